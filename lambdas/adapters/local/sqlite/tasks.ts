import type Database from 'better-sqlite3';
import { threadKey, type Run } from '../../../core/model.js';
import type { TaskEntry, TaskIndex, TaskIndexQuery } from '../../../core/ports.js';
import { checkPageLimit } from '../../../core/record/rules.js';
import { decodeCursor, encodeCursor, type Row, type RunRow, type SqliteHandle } from './handle.js';

/**
 * The task index (A2A ListTasks): a row per task, written in the transaction of every run write
 * (`write`, from the entry the store's projections compute), so a listing filtered by state reads
 * the index, never the tasks' records.
 */
export class SqliteTaskIndex implements TaskIndex {
  private readonly writeEntry: (entry: TaskEntry) => void;
  /** ListTasks' statements, one per shape of query (which filters it names). */
  private readonly listings = new Map<string, Database.Statement>();

  constructor(private readonly handle: SqliteHandle) {
    this.writeEntry = taskEntryWriter(handle.db);
  }

  /** The entry of a run just written, inside the transaction that wrote it. */
  write(run: Run): void {
    this.writeEntry(this.handle.projections.taskEntry(run));
  }

  async list(tenant: string, query: TaskIndexQuery): Promise<{ runs: Run[]; cursor?: string }> {
    checkPageLimit(query.limit);
    const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor, tenant, ['createdAt', 'runId']);
    const conditions = query.threadId === undefined ? ['t.tenant = @tenant', 't.agent_id = @agentId'] : ['t.thread_key = @thread', 't.agent_id = @agentId'];
    if (query.state !== undefined) conditions.push('t.state = @state');
    if (query.stateAfter !== undefined) conditions.push('t.state_at > @stateAfter');
    if (after) conditions.push('(t.created_at < @afterAt OR (t.created_at = @afterAt AND t.task_id < @afterId))');
    const sql = `SELECT r.body FROM tasks t JOIN runs r ON r.run_id = t.task_id WHERE ${conditions.join(' AND ')} ORDER BY t.created_at DESC, t.task_id DESC LIMIT @limit`;
    let listing = this.listings.get(sql);
    if (!listing) this.listings.set(sql, (listing = this.handle.db.prepare(sql)));
    const params: Row = { agentId: query.agentId, limit: query.limit + 1 };
    if (query.threadId === undefined) params.tenant = tenant;
    else params.thread = threadKey({ tenant, threadId: query.threadId });
    if (query.state !== undefined) params.state = query.state;
    if (query.stateAfter !== undefined) params.stateAfter = query.stateAfter;
    if (after) Object.assign(params, { afterAt: after.createdAt, afterId: after.runId });
    // One row past the page tells whether another page exists, so the last page carries no cursor.
    const rows = listing.all(params) as RunRow[];
    const runs = rows.slice(0, query.limit).map(this.handle.runOf);
    if (rows.length <= query.limit) return { runs };
    const last = runs[runs.length - 1];
    return { runs, cursor: encodeCursor({ tenant, createdAt: last.createdAt, runId: last.runId }) };
  }

  /** Nothing to repair: a run and its task's index row are written in one transaction. */
  async reindex(): Promise<void> {}
}

/** Writes an entry as its task's index row takes it: the root's makes the row (or, while it is the tail, sets its state), a later run's moves its state. */
export function taskEntryWriter(db: Database.Database): (entry: TaskEntry) => void {
  const indexRoot = db.prepare(
    `INSERT INTO tasks (task_id, tenant, agent_id, thread_key, created_at, tail_arrival, state, state_at) VALUES (@taskId, @tenant, @agentId, @thread, @createdAt, @arrival, @state, @at)
     ON CONFLICT (task_id) DO UPDATE SET state = @state, state_at = @at WHERE tail_arrival = @arrival`,
  );
  // An answer run is its task's tail from its creation on; an earlier run's later write changes nothing.
  const indexTail = db.prepare('UPDATE tasks SET tail_arrival = @arrival, state = @state, state_at = @at WHERE task_id = @taskId AND tail_arrival <= @arrival');
  return (entry) => {
    const { taskId, tailArrival: arrival, state, stateAt: at } = entry;
    if (entry.root) indexRoot.run({ taskId, arrival, state, at, tenant: entry.tenant, agentId: entry.agentId, thread: threadKey(entry), createdAt: entry.createdAt });
    else indexTail.run({ taskId, arrival, state, at });
  };
}
