import type Database from 'better-sqlite3';
import { threadKey, type Run, type RunLink, type RunStatus, type ThreadRef } from '../../../core/model.js';
import type { AskChanges, RunRecords } from '../../../core/ports.js';
import { checkRunPatch, closedAsks, linkMayMove, reopenedAsks } from '../../../core/record/rules.js';
import type { Row, RunRow, SqliteHandle } from './handle.js';
import type { SqliteTaskIndex } from './tasks.js';

/**
 * Runs: a row each, the fields the indexes need in columns and the rest as its body, its input in
 * `run_inputs` (written once). Every write of a run writes its task's index entry in the same
 * transaction.
 */
export class SqliteRunRecords implements RunRecords {
  private readonly statements: ReturnType<typeof prepare>;

  constructor(
    private readonly handle: SqliteHandle,
    private readonly tasks: SqliteTaskIndex,
  ) {
    this.statements = prepare(handle.db);
  }

  async create(run: Run): Promise<boolean> {
    const { input, ...rest } = run;
    const { createRun, putInput } = this.statements;
    return this.handle.db.transaction(() => {
      const created =
        createRun.run(run.runId, threadKey(run), run.arrival, run.status, run.tenant, run.createdAt, run.runId === run.rootRunId ? 1 : 0, JSON.stringify(rest)).changes === 1;
      if (!created) return false;
      putInput.run(run.runId, JSON.stringify(input));
      this.tasks.write(run);
      this.handle.writeAudits(run, 'created');
      return true;
    })();
  }

  async get(runId: string): Promise<Run | undefined> {
    return this.read(runId);
  }

  async getOf(tenant: string, runId: string): Promise<Run | undefined> {
    const row = this.statements.getRunOf.get(runId, tenant) as RunRow | undefined;
    return row && this.handle.runOf(row);
  }

  async listOfThread(thread: ThreadRef): Promise<Run[]> {
    return (this.statements.listThreadRuns.all(threadKey(thread)) as RunRow[]).map(this.handle.runOf);
  }

  async listByStatus(status: RunStatus): Promise<Run[]> {
    return (this.statements.listRunsByStatus.all(status) as RunRow[]).map(this.handle.runOf);
  }

  async pageByStatus(status: RunStatus, page: { limit: number; cursor?: string }): Promise<{ runs: Run[]; cursor?: string }> {
    const rows = this.statements.pageRunsByStatus.all(status, page.cursor ?? '', page.limit) as (RunRow & { run_id: string })[];
    const runs = rows.map(this.handle.runOf);
    return rows.length < page.limit ? { runs } : { runs, cursor: rows[rows.length - 1].run_id };
  }

  async transition(runId: string, from: readonly RunStatus[], patch: Partial<Run> & { status: RunStatus }): Promise<Run | undefined> {
    if (from.length === 0) return undefined;
    checkRunPatch(patch);
    const run = this.read(runId);
    if (!run || !from.includes(run.status)) return undefined;
    for (const [key, value] of Object.entries(patch)) if (value !== undefined) (run as unknown as Row)[key] = value;
    this.write(run, patch.input !== undefined, patch);
    return run;
  }

  async closeAsks(runId: string, changes: AskChanges): Promise<Run | undefined> {
    return this.changeAsks(runId, changes, closedAsks);
  }

  async reopenAsks(runId: string, changes: AskChanges): Promise<Run | undefined> {
    return this.changeAsks(runId, changes, reopenedAsks, (run) => (run.asksReopened = (run.asksReopened ?? 0) + 1));
  }

  /** One statement, at every settle: the run is not read, and its task's entry (its state unchanged) not written again. */
  async forgetClosingEvents(runId: string): Promise<void> {
    this.statements.forgetClosingEvents.run(runId);
  }

  async updateLink(runId: string, expectedRev: number | undefined, link: RunLink): Promise<Run | undefined> {
    const run = this.read(runId);
    if (!run || !linkMayMove(run, expectedRev)) return undefined;
    run.link = link;
    this.write(run, false);
    return run;
  }

  private read(runId: string): Run | undefined {
    const row = this.statements.getRun.get(runId) as RunRow | undefined;
    return row && this.handle.runOf(row);
  }

  /** Changes the named asks of a run only when `change` takes every one of them: all or none (one synchronous step). */
  private changeAsks(runId: string, changes: AskChanges, change: typeof closedAsks, count: (run: Run) => void = () => {}): Run | undefined {
    const run = this.read(runId);
    if (!run) return undefined;
    if (Object.keys(changes).length === 0) return run;
    const asks = change(run.asks, changes);
    if (!asks) return undefined;
    run.asks = asks;
    count(run);
    this.write(run, false);
    return run;
  }

  private write(run: Run, withInput: boolean, change?: Partial<Run>): void {
    const { writeRun, putInput } = this.statements;
    this.handle.db.transaction(() => {
      writeRun.run(run.status, JSON.stringify(bodyOf(run)), run.runId);
      if (withInput) putInput.run(run.runId, JSON.stringify(run.input));
      this.tasks.write(run);
      if (change) this.handle.writeAudits(run, change);
    })();
  }
}

function prepare(db: Database.Database) {
  const runColumns = 'body';
  return {
    createRun: db.prepare('INSERT OR IGNORE INTO runs (run_id, thread_key, arrival, status, tenant, created_at, is_root, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?)'),
    putInput: db.prepare('INSERT OR REPLACE INTO run_inputs (run_id, input) VALUES (?, ?)'),
    getRun: db.prepare(`SELECT ${runColumns} FROM runs WHERE run_id = ?`),
    getRunOf: db.prepare(`SELECT ${runColumns} FROM runs WHERE run_id = ? AND tenant = ?`),
    writeRun: db.prepare('UPDATE runs SET status = ?, body = ? WHERE run_id = ?'),
    forgetClosingEvents: db.prepare("UPDATE runs SET body = json_remove(body, '$.closingEvents') WHERE run_id = ? AND json_type(body, '$.closingEvents') IS NOT NULL"),
    listThreadRuns: db.prepare(`SELECT ${runColumns} FROM runs WHERE thread_key = ? ORDER BY arrival, run_id`),
    listRunsByStatus: db.prepare(`SELECT ${runColumns} FROM runs WHERE status = ?`),
    pageRunsByStatus: db.prepare(`SELECT ${runColumns}, run_id FROM runs WHERE status = ? AND run_id > ? ORDER BY run_id LIMIT ?`),
  };
}

/** A run's row body: the run less its input (a column of its own, see RUN_INPUTS), without reading the input. */
function bodyOf(run: Run): Omit<Run, 'input'> {
  const body: Row = {};
  for (const key of Object.keys(run)) if (key !== 'input') body[key] = (run as unknown as Row)[key];
  return body as Omit<Run, 'input'>;
}
