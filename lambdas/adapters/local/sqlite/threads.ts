import type Database from 'better-sqlite3';
import { threadKey, type Thread, type ThreadRef } from '../../../core/model.js';
import type { Reserved, ThreadListQuery, Threads } from '../../../core/ports.js';
import { threadListCursor, threadListPlace } from '../../thread-list-cursor.js';
import { idColumn, idOf, type SqliteHandle } from './handle.js';

export type ThreadRow = { body: string; unsettled: number; arrivals: number; waiting_run_id: string | null; last_activity_at: string | null };

/** Threads: a row each, with its places' count and arrival counter in columns; who holds a place is in `places`. */
export class SqliteThreads implements Threads {
  private readonly statements: ReturnType<typeof prepare>;

  constructor(private readonly handle: SqliteHandle) {
    this.statements = prepare(handle.db);
  }

  async get(thread: ThreadRef): Promise<Thread | undefined> {
    const row = this.statements.getThread.get(threadKey(thread)) as ThreadRow | undefined;
    return row && threadOf(row);
  }

  async create(thread: Thread, holder: string): Promise<boolean> {
    const { unsettled, arrivals, waitingRunId, lastActivityAt, ...rest } = thread;
    const key = threadKey(thread);
    return this.handle.db.transaction(() => {
      const waiting = waitingRunId === undefined ? null : idColumn(waitingRunId);
      if (this.statements.createThread.run(key, JSON.stringify(rest), unsettled, arrivals, waiting, lastActivityAt ?? thread.createdAt).changes === 0) return false;
      this.handle.places.hold.run(`t:${key}`, holder);
      return true;
    })();
  }

  async reserveArrival(thread: ThreadRef, holder: string, limit: number | undefined): Promise<Reserved | undefined> {
    const key = threadKey(thread);
    const { places } = this.handle;
    return this.handle.db.transaction((): Reserved | undefined => {
      // A run that holds a place already (its request came again after a crash) takes a new number only.
      if (places.holds.get(`t:${key}`, holder)) {
        const next = this.statements.nextArrival.get(key) as { arrivals: number } | undefined;
        return next && { arrival: next.arrivals, alone: false };
      }
      const row = this.statements.reserveArrival.get({ key, limit: limit ?? null }) as { arrivals: number; unsettled: number } | undefined;
      if (row) places.hold.run(`t:${key}`, holder);
      return row && { arrival: row.arrivals, alone: row.unsettled === 1 };
    })();
  }

  async releasePlace(thread: ThreadRef, holder: string, at?: string): Promise<void> {
    this.release(threadKey(thread), holder, at);
  }

  async placeHolders(thread: ThreadRef): Promise<string[]> {
    return (this.handle.places.holders.all(`t:${threadKey(thread)}`) as { run_id: string }[]).map((row) => row.run_id);
  }

  async abandon(thread: ThreadRef, holder: string): Promise<void> {
    const key = threadKey(thread);
    const { places } = this.handle;
    this.handle.db.transaction(() => {
      // Another run arrived on it meanwhile, or the holder holds none of its places: the thread stays, without the holder's place.
      if (!places.holds.get(`t:${key}`, holder) || this.statements.abandonThread.run(key).changes === 0) this.release(key, holder, undefined);
      else places.unholdAll.run(`t:${key}`);
    })();
  }

  async setPlaces(thread: ThreadRef, holders: readonly string[]): Promise<void> {
    const key = threadKey(thread);
    const { places } = this.handle;
    this.handle.db.transaction(() => {
      if (this.statements.setUnsettled.run(holders.length, key).changes === 0) return;
      places.unholdAll.run(`t:${key}`);
      for (const holder of holders) places.hold.run(`t:${key}`, holder);
    })();
  }

  async setWaitingRun(thread: ThreadRef, runId: string): Promise<void> {
    this.statements.setWaitingRun.run(idColumn(runId), threadKey(thread));
  }

  async list(query: ThreadListQuery): Promise<{ threads: Thread[]; cursor?: string }> {
    const before = query.cursor === undefined ? undefined : threadListPlace(query.cursor);
    const rows = this.statements.list.all({
      beforeAt: before?.at ?? null,
      beforeKey: before?.key ?? '',
      prefix: query.tenant === undefined ? null : threadKey({ tenant: query.tenant, threadId: '' }),
      agent: query.agentId ?? null,
      state: query.state ?? null,
      limit: query.limit + 1,
    }) as (ThreadRow & { thread_key: string })[];
    const page = rows.slice(0, query.limit);
    const threads = page.map(threadOf);
    if (rows.length <= query.limit) return { threads };
    const last = page[page.length - 1];
    return { threads, cursor: threadListCursor(last.last_activity_at ?? '', last.thread_key) };
  }

  /** Gives back a thread's place with the row that says `holder` holds it, or nothing when none does. */
  private release(key: string, holder: string, at: string | undefined): void {
    this.handle.db.transaction(() => {
      if (this.handle.places.unhold.run(`t:${key}`, holder).changes === 1) this.statements.releasePlace.run({ key, at: at ?? null });
    })();
  }
}

function prepare(db: Database.Database) {
  return {
    getThread: db.prepare('SELECT body, unsettled, arrivals, waiting_run_id, last_activity_at FROM threads WHERE thread_key = ?'),
    createThread: db.prepare('INSERT OR IGNORE INTO threads (thread_key, body, unsettled, arrivals, waiting_run_id, last_activity_at) VALUES (?, ?, ?, ?, ?, ?)'),
    // One statement takes the number and the place together, only while the thread has room.
    reserveArrival: db.prepare(
      'UPDATE threads SET arrivals = arrivals + 1, unsettled = unsettled + 1 WHERE thread_key = @key AND (@limit IS NULL OR unsettled < @limit) RETURNING arrivals, unsettled',
    ),
    releasePlace: db.prepare('UPDATE threads SET unsettled = unsettled - 1, last_activity_at = coalesce(@at, last_activity_at) WHERE thread_key = @key AND unsettled > 0'),
    nextArrival: db.prepare('UPDATE threads SET arrivals = arrivals + 1 WHERE thread_key = ? RETURNING arrivals'),
    abandonThread: db.prepare('DELETE FROM threads WHERE thread_key = ? AND arrivals = 1'),
    setUnsettled: db.prepare('UPDATE threads SET unsettled = ? WHERE thread_key = ?'),
    setWaitingRun: db.prepare('UPDATE threads SET waiting_run_id = ? WHERE thread_key = ?'),
    // Walks threads_idle backwards from the cursor; the filters read each row it passes.
    list: db.prepare(
      `SELECT thread_key, body, unsettled, arrivals, waiting_run_id, last_activity_at FROM threads
       WHERE (@beforeAt IS NULL OR (last_activity_at, thread_key) < (@beforeAt, @beforeKey))
         AND (@prefix IS NULL OR substr(thread_key, 1, length(@prefix)) = @prefix)
         AND (@agent IS NULL OR json_extract(body, '$.agentId') = @agent)
         AND (@state IS NULL OR (@state = 'active') = (unsettled > 0))
       ORDER BY last_activity_at DESC, thread_key DESC LIMIT @limit`,
    ),
  };
}

export function threadOf(row: ThreadRow): Thread {
  const thread: Thread = { ...JSON.parse(row.body), unsettled: row.unsettled, arrivals: row.arrivals };
  if (row.waiting_run_id !== null) thread.waitingRunId = idOf(row.waiting_run_id);
  // The column lists a thread never active since it was made under its creation time: not a field written.
  if (row.last_activity_at !== null && row.last_activity_at !== thread.createdAt) thread.lastActivityAt = row.last_activity_at;
  return thread;
}
