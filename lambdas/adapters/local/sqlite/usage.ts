import type Database from 'better-sqlite3';
import type { UsageQuery, UsageRecords } from '../../../core/ports.js';
import type { UsageRecord } from '../../../core/usage.js';
import { decodeCursor, encodeCursor, type SqliteHandle } from './handle.js';

/** Usage records: a row per settled run, indexed by tenant and by time. */
export class SqliteUsageRecords implements UsageRecords {
  private readonly statements: ReturnType<typeof prepare>;

  private readonly deleteAll: (runIds: readonly string[]) => void;

  constructor(handle: SqliteHandle) {
    this.statements = prepare(handle.db);
    const remove = this.statements.deleteUsage;
    this.deleteAll = handle.db.transaction((runIds: readonly string[]) => {
      for (const runId of runIds) remove.run(runId);
    });
  }

  async put(record: UsageRecord): Promise<boolean> {
    return this.statements.putUsage.run(record.runId, record.tenant, record.endedAt, JSON.stringify(record)).changes === 1;
  }

  async list(query: UsageQuery): Promise<{ records: UsageRecord[]; cursor?: string }> {
    const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor, query.tenant ?? '', ['endedAt', 'runId']);
    const params = {
      tenant: query.tenant ?? null,
      from: query.from,
      to: query.to,
      afterAt: after?.endedAt ?? null,
      afterRun: after?.runId ?? '',
      limit: query.limit + 1,
    };
    const rows = (query.tenant === undefined ? this.statements.listUsage : this.statements.listTenantUsage).all(params) as { body: string }[];
    const records = rows.slice(0, query.limit).map((row) => JSON.parse(row.body) as UsageRecord);
    if (rows.length <= query.limit) return { records };
    const last = records[records.length - 1];
    return { records, cursor: encodeCursor({ tenant: query.tenant ?? '', endedAt: last.endedAt, runId: last.runId }) };
  }

  async delete(runIds: readonly string[]): Promise<void> {
    this.deleteAll(runIds);
  }
}

function prepare(db: Database.Database) {
  return {
    putUsage: db.prepare('INSERT OR IGNORE INTO usage_records (run_id, tenant, ended_at, body) VALUES (?, ?, ?, ?)'),
    deleteUsage: db.prepare('DELETE FROM usage_records WHERE run_id = ?'),
    listTenantUsage: db.prepare(
      `SELECT body FROM usage_records WHERE tenant = @tenant AND ended_at >= @from AND ended_at < @to
       AND (@afterAt IS NULL OR ended_at > @afterAt OR (ended_at = @afterAt AND run_id > @afterRun)) ORDER BY ended_at, run_id LIMIT @limit`,
    ),
    listUsage: db.prepare(
      `SELECT body FROM usage_records WHERE ended_at >= @from AND ended_at < @to
       AND (@afterAt IS NULL OR ended_at > @afterAt OR (ended_at = @afterAt AND run_id > @afterRun)) ORDER BY ended_at, run_id LIMIT @limit`,
    ),
  };
}
