import type Database from 'better-sqlite3';
import { threadKey, type LegalHold, type Thread, type ThreadRef } from '../../../core/model.js';
import type { PurgedContent, RetentionRecords } from '../../../core/ports.js';
import type { AuditRecord } from '../../../core/audit/record.js';
import type { TenantRetention } from '../../../core/retention/policy.js';
import { decodeCursor, encodeCursor, type SqliteHandle } from './handle.js';
import { threadOf, type ThreadRow } from './threads.js';

/**
 * Retention on SQLite: each tenant's own policy and hold (a row each), threads listed by their last
 * activity, and a thread's deletion with its audit record in one transaction, so it is all gone
 * with its record, or nothing is.
 */
export class SqliteRetention implements RetentionRecords {
  private readonly statements: ReturnType<typeof prepare>;

  constructor(private readonly handle: SqliteHandle) {
    this.statements = prepare(handle.db);
  }

  async get(tenant: string): Promise<TenantRetention | undefined> {
    const row = this.statements.get.get(tenant) as { body: string } | undefined;
    return row && (JSON.parse(row.body) as TenantRetention);
  }

  async set<F extends 'policy' | 'hold'>(tenant: string, field: F, value: TenantRetention[F]): Promise<void> {
    this.handle.db.transaction(() => {
      const row = this.statements.get.get(tenant) as { body: string } | undefined;
      const entry: TenantRetention = row ? (JSON.parse(row.body) as TenantRetention) : { tenant };
      if (value === undefined) delete entry[field];
      else entry[field] = value;
      if (entry.policy === undefined && entry.hold === undefined) this.statements.delete.run(tenant);
      else this.statements.put.run(tenant, JSON.stringify(entry));
    })();
  }

  async list(): Promise<TenantRetention[]> {
    return (this.statements.list.all() as { body: string }[]).map((row) => JSON.parse(row.body) as TenantRetention);
  }

  async holdThread(ref: ThreadRef, hold: LegalHold | undefined): Promise<Thread | undefined> {
    const key = threadKey(ref);
    return this.handle.db.transaction(() => {
      const row = this.statements.thread.get(key) as ThreadRow | undefined;
      if (!row) return undefined;
      const body = JSON.parse(row.body) as Partial<Thread>;
      if (hold) body.hold = hold;
      else delete body.hold;
      this.statements.setBody.run(JSON.stringify(body), key);
      return threadOf({ ...row, body: JSON.stringify(body) });
    })();
  }

  async idleThreads(before: string, limit: number, cursor?: string): Promise<{ threads: Thread[]; cursor?: string }> {
    const after = cursor === undefined ? undefined : decodeCursor(cursor, '', ['at', 'key']);
    const rows = this.statements.idle.all({ before, afterAt: after?.at ?? null, afterKey: after?.key ?? '', limit: limit + 1 }) as (ThreadRow & { thread_key: string })[];
    const page = rows.slice(0, limit);
    const threads = page.map(threadOf);
    if (rows.length <= limit) return { threads };
    const last = page[page.length - 1];
    return { threads, cursor: encodeCursor({ tenant: '', at: last.last_activity_at ?? '', key: last.thread_key }) };
  }

  async purgeThread(thread: Thread, audit: (content: PurgedContent) => AuditRecord): Promise<PurgedContent | undefined> {
    const key = threadKey(thread);
    const s = this.statements;
    return this.handle.db.transaction(() => {
      const row = s.thread.get(key) as ThreadRow | undefined;
      // A run arrived since the thread was judged expired, one holds a place, or a hold was placed: it stays.
      if (!row || row.arrivals !== thread.arrivals || row.unsettled > 0 || threadOf(row).hold) return undefined;
      const content = { runs: (s.countRuns.get(key) as { n: number }).n, events: (s.countEvents.get(key) as { n: number }).n };
      const record = audit(content);
      this.handle.appendAudit.run(record.id, record.tenant ?? null, JSON.stringify(record));
      for (const statement of [s.deleteEvents, s.deleteInputs, s.deletePushConfigs, s.deleteTasks, s.deleteRuns, s.deleteThread]) statement.run(key);
      return content;
    })();
  }
}

function prepare(db: Database.Database) {
  const ofThread = 'SELECT run_id FROM runs WHERE thread_key = ?';
  return {
    get: db.prepare('SELECT body FROM retention WHERE tenant = ?'),
    put: db.prepare('INSERT INTO retention (tenant, body) VALUES (?, ?) ON CONFLICT (tenant) DO UPDATE SET body = excluded.body'),
    delete: db.prepare('DELETE FROM retention WHERE tenant = ?'),
    list: db.prepare('SELECT body FROM retention ORDER BY tenant'),
    thread: db.prepare('SELECT body, unsettled, arrivals, waiting_run_id, last_activity_at FROM threads WHERE thread_key = ?'),
    setBody: db.prepare('UPDATE threads SET body = ? WHERE thread_key = ?'),
    idle: db.prepare(
      `SELECT thread_key, body, unsettled, arrivals, waiting_run_id, last_activity_at FROM threads
       WHERE last_activity_at < @before AND (@afterAt IS NULL OR last_activity_at > @afterAt OR (last_activity_at = @afterAt AND thread_key > @afterKey))
       ORDER BY last_activity_at, thread_key LIMIT @limit`,
    ),
    countRuns: db.prepare('SELECT count(*) AS n FROM runs WHERE thread_key = ?'),
    // A row of run_events holds a write's events (`count` of them).
    countEvents: db.prepare(`SELECT coalesce(sum(count), 0) AS n FROM run_events WHERE run_id IN (${ofThread})`),
    deleteEvents: db.prepare(`DELETE FROM run_events WHERE run_id IN (${ofThread})`),
    deleteInputs: db.prepare(`DELETE FROM run_inputs WHERE run_id IN (${ofThread})`),
    deletePushConfigs: db.prepare(`DELETE FROM push_configs WHERE task_id IN (${ofThread})`),
    deleteTasks: db.prepare('DELETE FROM tasks WHERE thread_key = ?'),
    deleteRuns: db.prepare('DELETE FROM runs WHERE thread_key = ?'),
    deleteThread: db.prepare('DELETE FROM threads WHERE thread_key = ?'),
  };
}
