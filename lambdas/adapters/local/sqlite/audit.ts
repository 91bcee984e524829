import type Database from 'better-sqlite3';
import type { AuditQuery, AuditRecord } from '../../../core/audit/record.js';
import type { AuditLog, SealedSegment } from '../../../core/ports.js';
import { decodeCursor, encodeCursor, type SqliteHandle } from './handle.js';

/** The audit log: a row per record (its id sorts by time), unsealed ones in an index of their own, and a row per segment. */
export class SqliteAuditLog implements AuditLog {
  private readonly statements: ReturnType<typeof prepare>;
  private readonly markAll: (seq: number, ids: readonly string[]) => void;
  private readonly deleteAll: (ids: readonly string[]) => void;

  constructor(private readonly handle: SqliteHandle) {
    this.statements = prepare(handle.db);
    const mark = this.statements.mark;
    this.markAll = handle.db.transaction((seq: number, ids: readonly string[]) => {
      for (const id of ids) mark.run(seq, id);
    });
    const remove = this.statements.delete;
    this.deleteAll = handle.db.transaction((ids: readonly string[]) => {
      for (const id of ids) remove.run(id);
    });
  }

  async append(record: AuditRecord): Promise<void> {
    this.handle.appendAudit.run(record.id, record.tenant ?? null, JSON.stringify(record));
  }

  async list(query: AuditQuery): Promise<{ records: AuditRecord[]; cursor?: string }> {
    const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor, query.tenant ?? '', ['id']).id;
    const rows = this.statements.list.all({
      tenant: query.tenant ?? null,
      // A record's id starts with its time: [from, to) on ids is [from, to) on times.
      from: after ?? query.from,
      to: query.to,
      after: after === undefined ? 0 : 1,
      action: query.action ?? null,
      target: query.target ?? null,
      actor: query.actor ?? null,
      limit: query.limit + 1,
    }) as { body: string }[];
    const records = rows.slice(0, query.limit).map((row) => JSON.parse(row.body) as AuditRecord);
    if (rows.length <= query.limit) return { records };
    return { records, cursor: encodeCursor({ tenant: query.tenant ?? '', id: records[records.length - 1].id }) };
  }

  async unsealed(limit: number, since: string, until: string): Promise<AuditRecord[]> {
    return (this.statements.unsealed.all(since, until, limit) as { body: string }[]).map((row) => JSON.parse(row.body) as AuditRecord);
  }

  async get(ids: readonly string[]): Promise<AuditRecord[]> {
    const records: AuditRecord[] = [];
    for (const id of ids) {
      const row = this.statements.get.get(id) as { body: string } | undefined;
      if (row) records.push(JSON.parse(row.body) as AuditRecord);
    }
    return records;
  }

  async lastSegment(): Promise<SealedSegment | undefined> {
    const row = this.statements.lastSegment.get() as { body: string } | undefined;
    return row && (JSON.parse(row.body) as SealedSegment);
  }

  async segment(seq: number): Promise<SealedSegment | undefined> {
    const row = this.statements.segment.get(seq) as { body: string } | undefined;
    return row && (JSON.parse(row.body) as SealedSegment);
  }

  async segments(fromSeq: number, limit: number): Promise<SealedSegment[]> {
    return (this.statements.segments.all(fromSeq, limit) as { body: string }[]).map((row) => JSON.parse(row.body) as SealedSegment);
  }

  async putSegment(segment: SealedSegment): Promise<boolean> {
    return this.statements.putSegment.run(segment.seq, JSON.stringify(segment)).changes === 1;
  }

  async markSealed(seq: number, ids: readonly string[]): Promise<void> {
    this.markAll(seq, ids);
  }

  async delete(ids: readonly string[]): Promise<void> {
    this.deleteAll(ids);
  }

  async deleteSegment(seq: number): Promise<void> {
    this.statements.deleteSegment.run(seq);
  }
}

function prepare(db: Database.Database) {
  return {
    list: db.prepare(
      `SELECT body FROM audit_records
       WHERE (CASE WHEN @after = 1 THEN id > @from ELSE id >= @from END) AND id < @to
       AND (@tenant IS NULL OR tenant = @tenant)
       AND (@action IS NULL OR json_extract(body, '$.action') = @action)
       AND (@target IS NULL OR json_extract(body, '$.target') = @target)
       AND (@actor IS NULL OR coalesce(json_extract(body, '$.actor.principal'), json_extract(body, '$.actor.kind')) = @actor)
       ORDER BY id LIMIT @limit`,
    ),
    unsealed: db.prepare('SELECT body FROM audit_records WHERE segment IS NULL AND id >= ? AND id < ? ORDER BY id LIMIT ?'),
    get: db.prepare('SELECT body FROM audit_records WHERE id = ?'),
    mark: db.prepare('UPDATE audit_records SET segment = ? WHERE id = ? AND segment IS NULL'),
    lastSegment: db.prepare('SELECT body FROM audit_segments ORDER BY seq DESC LIMIT 1'),
    segment: db.prepare('SELECT body FROM audit_segments WHERE seq = ?'),
    segments: db.prepare('SELECT body FROM audit_segments WHERE seq >= ? ORDER BY seq LIMIT ?'),
    putSegment: db.prepare('INSERT OR IGNORE INTO audit_segments (seq, body) VALUES (?, ?)'),
    delete: db.prepare('DELETE FROM audit_records WHERE id = ?'),
    deleteSegment: db.prepare('DELETE FROM audit_segments WHERE seq = ?'),
  };
}
