import type { RunAgentInput } from '@ag-ui/core';
import Database from 'better-sqlite3';
import { StoreUnavailable } from '../../core/errors.js';
import {
  threadKey,
  type Agent,
  type AgUiEventRecord,
  type Arrival,
  type Ask,
  type AskState,
  type Budget,
  type LinkProvider,
  type MessageClaim,
  type PushConfig,
  type Run,
  type RunLink,
  type RunStatus,
  type Spend,
  type StoredEvent,
  type Tenant,
  type Thread,
  type ThreadRef,
} from '../../core/model.js';
import type { RunStore, TaskIndexQuery, TenantAdmission, TenantLimits, UsageQuery } from '../../core/ports.js';
import { taskStateAt, taskStateOf } from '../../core/a2a/task-state.js';
import type { UsageRecord } from '../../core/usage.js';
import { decodePageCursor, encodePageCursor } from '../page-cursor.js';
import { JOURNAL_SIZE_LIMIT, SqliteCheckpointer } from './sqlite-checkpointer.js';

/** SQLite's own default: a commit that finds the log this many pages long copies it into the file. */
const SQLITE_AUTOCHECKPOINT_PAGES = 1000;

/** Marks the file as funduq's (`PRAGMA application_id`), so a stranger's database is not taken for a record. */
const APPLICATION_ID = 0x66756471; // "fudq"

const FIRST_SCHEMA = `
  CREATE TABLE threads (
    thread_key TEXT PRIMARY KEY,
    body TEXT NOT NULL,
    unsettled INTEGER NOT NULL,
    arrivals INTEGER NOT NULL,
    waiting_run_id TEXT
  ) WITHOUT ROWID;
  CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    thread_key TEXT NOT NULL,
    arrival INTEGER NOT NULL,
    status TEXT NOT NULL,
    tenant TEXT NOT NULL,
    created_at TEXT NOT NULL,
    is_root INTEGER NOT NULL,
    input TEXT NOT NULL,
    body TEXT NOT NULL
  );
  CREATE INDEX runs_by_thread ON runs (thread_key, arrival);
  CREATE INDEX runs_by_status ON runs (status);
  CREATE INDEX root_runs_by_tenant ON runs (tenant, created_at, run_id) WHERE is_root = 1;
  CREATE TABLE run_events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    count INTEGER NOT NULL,
    events TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
  ) WITHOUT ROWID;
  CREATE TABLE tenants (
    tenant TEXT PRIMARY KEY,
    rate_window INTEGER,
    window_runs INTEGER,
    places INTEGER,
    budget TEXT,
    spend_period TEXT,
    spend_tokens REAL,
    spend_cost REAL,
    crossed_at TEXT,
    crossed_by TEXT
  ) WITHOUT ROWID;
  CREATE TABLE usage_records (run_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, ended_at TEXT NOT NULL, body TEXT NOT NULL) WITHOUT ROWID;
  CREATE INDEX usage_by_tenant ON usage_records (tenant, ended_at, run_id);
  CREATE INDEX usage_by_time ON usage_records (ended_at, run_id);
  CREATE TABLE agents (agent_id TEXT PRIMARY KEY, body TEXT NOT NULL) WITHOUT ROWID;
  CREATE TABLE push_configs (
    task_id TEXT NOT NULL,
    config_id TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (task_id, config_id)
  ) WITHOUT ROWID;
  CREATE TABLE message_claims (claim_key TEXT PRIMARY KEY, run_id TEXT NOT NULL, body TEXT NOT NULL, expires_at INTEGER NOT NULL) WITHOUT ROWID;
`;

/**
 * Who holds each place: a thread's (`t:` and its key) and a tenant's (`n:` and the tenant), one
 * row per run holding one, so a place is given back once whoever gives it. A record from before
 * has them from its unsettled runs.
 */
const PLACE_HOLDERS = `
  CREATE TABLE places (owner TEXT NOT NULL, run_id TEXT NOT NULL, PRIMARY KEY (owner, run_id)) WITHOUT ROWID;
  INSERT INTO places SELECT 't:' || thread_key, run_id FROM runs WHERE status IN ('queued', 'running', 'cancelling');
  INSERT INTO places SELECT 'n:' || tenant, run_id FROM runs WHERE status IN ('queued', 'running', 'cancelling') AND json_extract(body, '$.tenantPlace') = 1;
`;

/**
 * The record's schema, step by step: step i takes a file from schema version i to i + 1 (a new
 * table, a new column), inside the transaction that opens it. A change of the schema is a new step
 * at the end; a step once released is never edited.
 */
/**
 * Run ids read back from a column (a thread's waiting run, the run that crossed a budget) are kept
 * as JSON strings: SQLite's text is UTF-8, in which an id with a lone surrogate (which a caller may
 * choose) has no spelling, and reads back as U+FFFD, another id. Keys only looked up are not read back.
 */
const RUN_ID_COLUMNS_AS_JSON = `
  UPDATE threads SET waiting_run_id = json_quote(waiting_run_id) WHERE waiting_run_id IS NOT NULL;
  UPDATE tenants SET crossed_by = json_quote(crossed_by) WHERE crossed_by IS NOT NULL;
`;

/**
 * The task index (A2A ListTasks): a row per root run, with its task's state and that state's time
 * as the lineage's tail run says them (`core/a2a/task-state.ts`), written in the transaction of
 * every run write, so a listing filtered by state reads the index, never the tasks' records. A
 * record from before has it filled from its runs: the roots, then each answer run the tail it is.
 */
function taskIndex(db: Database.Database): void {
  db.exec(`
    CREATE TABLE tasks (
      task_id TEXT PRIMARY KEY,
      tenant TEXT NOT NULL,
      agent_id TEXT NOT NULL,
      thread_key TEXT NOT NULL,
      created_at TEXT NOT NULL,
      tail_arrival INTEGER NOT NULL,
      state INTEGER NOT NULL,
      state_at TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX tasks_by_agent ON tasks (tenant, agent_id, created_at, task_id);
    CREATE INDEX tasks_by_state ON tasks (tenant, agent_id, state, created_at, task_id);
    CREATE INDEX tasks_by_thread ON tasks (thread_key, created_at, task_id);
    DROP INDEX root_runs_by_tenant;
  `);
  const { indexRoot, indexTail } = taskStatements(db);
  // The bodies only (a run's input is a column of its own): each is a few hundred bytes.
  for (const root of [1, 0]) {
    for (const row of db.prepare('SELECT body FROM runs WHERE is_root = ?').all(root) as { body: string }[]) {
      indexTaskOf(JSON.parse(row.body) as Run, indexRoot, indexTail);
    }
  }
}

/**
 * A run's input in a table of its own: SQLite writes a whole row again on every UPDATE, and a run's
 * input (the caller's conversation, up to 350 KB) is written once while its record changes at each
 * step of the run (with the input in the row, a 340 KB run cost 340 KB of writing per step).
 */
const RUN_INPUTS = `
  CREATE TABLE run_inputs (run_id TEXT PRIMARY KEY, input TEXT NOT NULL);
  INSERT INTO run_inputs (run_id, input) SELECT run_id, input FROM runs;
  ALTER TABLE runs DROP COLUMN input;
`;

const MIGRATIONS: readonly (string | ((db: Database.Database) => void))[] = [
  FIRST_SCHEMA,
  RUN_ID_COLUMNS_AS_JSON,
  // Link providers: the registration as the admin wrote it, and the places its runs hold (the record's).
  'CREATE TABLE providers (provider_id TEXT PRIMARY KEY, body TEXT NOT NULL, places INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;',
  PLACE_HOLDERS,
  taskIndex,
  RUN_INPUTS,
  // Requests noted before they take anything, forgotten once their run is recorded (`Arrival`).
  'CREATE TABLE arrivals (run_id TEXT PRIMARY KEY, at TEXT NOT NULL, body TEXT NOT NULL, claimed INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID; CREATE INDEX arrivals_at ON arrivals (at);',
];

/**
 * The schema this code writes, kept in SQLite's own `user_version`. A file written by a newer
 * funduq (a higher version) is refused rather than misread; an older one is migrated at open.
 */
export const SCHEMA_VERSION = MIGRATIONS.length;

/**
 * A row of run_events holds consecutive events of one run (seq … seq + count − 1), at most this
 * many, as their JSON joined by newlines (JSON.stringify writes none): one insert for a slice of a
 * burst instead of one per event (inserting event by event was a third of the relay's CPU).
 */
const EVENTS_PER_ROW = 100;
/**
 * And at most about this much JSON (an event larger than that is a row of its own): a row is read
 * whole, so a reader after one event of a row of a hundred 380 KB events read 38 MB for it.
 */
const ROW_BYTES = 64 * 1024;

const TABLES = ['threads', 'runs', 'run_inputs', 'run_events', 'tenants', 'agents', 'push_configs', 'message_claims', 'usage_records', 'providers', 'places', 'tasks', 'arrivals'] as const;

/** Fields of a run kept in columns of their own (for its indexes), never patched (see `transitionRun`). */
const RUN_IDENTITY = new Set<string>(['runId', 'threadId', 'tenant', 'rootRunId', 'arrival', 'createdAt']);

/** SQLite's answers that say "not now" (the disk is full, the file cannot be written) rather than "never". */
const UNAVAILABLE = /^SQLITE_(FULL|IOERR|BUSY|LOCKED|READONLY|CANTOPEN|PROTOCOL)/;

/** The file was written by a newer funduq: its schema version is past this code's. */
export class SchemaTooNew extends Error {
  readonly code = 'store_schema_too_new';
}

/** The file is no funduq record: another program's SQLite database, or no database at all. */
export class NotARecord extends Error {
  readonly code = 'store_not_a_record';
}

/** The database file is held by another connection (another gateway on the same data dir). */
export class StoreLocked extends Error {
  readonly code = 'store_locked';
}

type Row = Record<string, unknown>;
type ThreadRow = { body: string; unsettled: number; arrivals: number; waiting_run_id: string | null };
type RunRow = { body: string };
type ProviderRow = { body: string; places: number };
type AskChanges = Record<string, { state: Exclude<AskState, 'open'>; closedByRunId?: string }>;
type TenantRow = { rate_window: number | null; window_runs: number | null; places: number | null };
type SpendRow = { budget: string | null; spend_period: string | null; spend_tokens: number | null; spend_cost: number | null; crossed_at: string | null; crossed_by: string | null };

/**
 * The RunStore on SQLite, for one machine: one file, WAL, and a lock beside it held for as long as
 * the store is open (another process opening it is refused, and the lock goes with the process,
 * however it ends). better-sqlite3 is synchronous: every method runs whole before any other code
 * of this thread, so a read-check-write is one step; the writes that span rows are transactions
 * too, so a crash leaves all of them or none. The log is copied into the file on a thread of its
 * own (SqliteCheckpointer), never inside one of this thread's commits.
 */
export class SqliteRunStore implements RunStore {
  private readonly lock: Database.Database | undefined;
  private readonly checkpointer: SqliteCheckpointer | undefined;
  private readonly db: Database.Database;
  private readonly statements: ReturnType<typeof prepare>;
  private readonly insertEvents: (events: StoredEvent[]) => void;
  private readonly insertNewEvents: (events: StoredEvent[]) => number[];
  /** ListTasks' statements, one per shape of query (which filters it names). */
  private readonly listings = new Map<string, Database.Statement>();

  /**
   * Opens (or creates) the record at `path`, or in memory for ':memory:'. `onCheckpointFailure`
   * hears, in a line for the operator, of a log the checkpoint thread could not copy (it tries
   * again; the log grows meanwhile), and of the thread gone (the store's own commits copy the log
   * from then on).
   */
  constructor(path: string, onCheckpointFailure: (message: string) => void = () => {}) {
    const inFile = path !== ':memory:';
    this.lock = inFile ? holdRecord(path) : undefined;
    try {
      this.db = openDatabase(path);
    } catch (error) {
      this.lock?.close();
      throw error;
    }
    if (inFile) {
      this.db.pragma('wal_autocheckpoint = 0');
      this.db.pragma(`journal_size_limit = ${JOURNAL_SIZE_LIMIT}`);
      const failed = (message: string) => onCheckpointFailure(`the record's log could not be copied into ${path} (tried again shortly): ${message}`);
      this.checkpointer = new SqliteCheckpointer(path, failed, (message) => {
        // Its commits checkpoint again, as SQLite does by default, rather than let the log grow.
        if (this.db.open) this.db.pragma(`wal_autocheckpoint = ${SQLITE_AUTOCHECKPOINT_PAGES}`);
        onCheckpointFailure(`the record's checkpoint thread stopped (${message}); the gateway's own commits copy the log into ${path} from now on`);
      });
    }
    this.statements = prepare(this.db);
    const { insertEvents, rowAtOrBefore } = this.statements;
    this.insertEvents = this.db.transaction((events: StoredEvent[]) => {
      for (const [first, count, json] of rowsOf(events)) {
        // The holder's seqs are new for the run: one stored already means two writers, and nothing of this write is kept.
        const before = rowAtOrBefore.get(first.runId, first.seq + count - 1) as { seq: number; count: number } | undefined;
        if (before && before.seq + before.count > first.seq) throw new Error(`run ${first.runId} has an event at seq ${Math.max(first.seq, before.seq)} already`);
        insertEvents.run(first.runId, first.seq, count, json);
      }
    });
    this.insertNewEvents = this.db.transaction((events: StoredEvent[]) => {
      const taken: number[] = [];
      for (const stored of events) {
        const row = rowAtOrBefore.get(stored.runId, stored.seq) as { seq: number; count: number } | undefined;
        if (row && row.seq + row.count > stored.seq) taken.push(stored.seq);
        else insertEvents.run(stored.runId, stored.seq, 1, jsonOf(stored));
      }
      return taken;
    });
  }

  /** Nothing to repair: a run and its task's index row are written in one transaction. */
  async reindexTask(): Promise<void> {}

  /** Ends the checkpoint thread, then closes the record (copying what is left of its log) and gives up the lock. */
  async close(): Promise<void> {
    await this.checkpointer?.stop();
    if (this.db.open) this.db.close();
    if (this.lock?.open) this.lock.close();
  }

  /** Rows per table: a look at the whole record (what a request may have left behind). */
  census(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const table of TABLES) counts[table] = (this.db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
    return counts;
  }

  async getThread(thread: ThreadRef): Promise<Thread | undefined> {
    const row = this.statements.getThread.get(threadKey(thread)) as ThreadRow | undefined;
    return row && threadOf(row);
  }

  async createThread(thread: Thread, holder: string): Promise<boolean> {
    const { unsettled, arrivals, waitingRunId, ...rest } = thread;
    const key = threadKey(thread);
    return this.db.transaction(() => {
      if (this.statements.createThread.run(key, JSON.stringify(rest), unsettled, arrivals, waitingRunId === undefined ? null : idColumn(waitingRunId)).changes === 0) return false;
      this.statements.hold.run(`t:${key}`, holder);
      return true;
    })();
  }

  async reserveArrival(thread: ThreadRef, holder: string, limit: number | undefined): Promise<number | undefined> {
    const key = threadKey(thread);
    return this.db.transaction(() => {
      // A run that holds a place already (its request came again after a crash) takes a new number only.
      if (this.statements.holds.get(`t:${key}`, holder)) return (this.statements.nextArrival.get(key) as { arrivals: number } | undefined)?.arrivals;
      const row = this.statements.reserveArrival.get({ key, limit: limit ?? null }) as { arrivals: number } | undefined;
      if (row) this.statements.hold.run(`t:${key}`, holder);
      return row?.arrivals;
    })();
  }

  async releasePlace(thread: ThreadRef, holder: string): Promise<void> {
    this.release(threadKey(thread), holder);
  }

  async placeHolders(thread: ThreadRef): Promise<string[]> {
    return (this.statements.holders.all(`t:${threadKey(thread)}`) as { run_id: string }[]).map((row) => row.run_id);
  }

  async abandonThread(thread: ThreadRef, holder: string): Promise<void> {
    const key = threadKey(thread);
    this.db.transaction(() => {
      // Another run arrived on it meanwhile, or the holder holds none of its places: the thread stays, without the holder's place.
      if (!this.statements.holds.get(`t:${key}`, holder) || this.statements.abandonThread.run(key).changes === 0) this.release(key, holder);
      else this.statements.unholdAll.run(`t:${key}`);
    })();
  }

  async noteArrival(arrival: Arrival): Promise<boolean> {
    return this.statements.noteArrival.run({ runId: arrival.runId, at: arrival.at, body: JSON.stringify(arrival) }).changes === 1;
  }

  async claimArrival(arrival: Arrival): Promise<boolean> {
    return this.statements.claimArrival.run(arrival.runId, arrival.at).changes === 1;
  }

  async forgetArrival(runId: string): Promise<void> {
    this.statements.forgetArrival.run(runId);
  }

  async listArrivals(before: string, limit: number): Promise<Arrival[]> {
    return (this.statements.listArrivals.all(before, limit) as Array<{ body: string }>).map((row) => JSON.parse(row.body) as Arrival);
  }

  async setUnsettled(thread: ThreadRef, holders: readonly string[]): Promise<void> {
    const key = threadKey(thread);
    this.db.transaction(() => {
      if (this.statements.setUnsettled.run(holders.length, key).changes === 0) return;
      this.statements.unholdAll.run(`t:${key}`);
      for (const holder of holders) this.statements.hold.run(`t:${key}`, holder);
    })();
  }

  /** Gives back a thread's place with the row that says `holder` holds it, or nothing when none does. */
  private release(key: string, holder: string): void {
    this.db.transaction(() => {
      if (this.statements.unhold.run(`t:${key}`, holder).changes === 1) this.statements.releasePlace.run(key);
    })();
  }

  async setWaitingRun(thread: ThreadRef, runId: string): Promise<void> {
    this.statements.setWaitingRun.run(idColumn(runId), threadKey(thread));
  }

  async admitTenantRun(tenant: string, holder: string, limits: TenantLimits): Promise<TenantAdmission> {
    return this.db.transaction(() => this.admit(tenant, holder, limits))();
  }

  private admit(tenant: string, holder: string, limits: TenantLimits): TenantAdmission {
    const { runsPerWindow, places } = limits;
    if (runsPerWindow === undefined && places === undefined) return 'admitted';
    // The run holds a place already (its request came again after a crash): it is admitted on that one.
    if (places !== undefined && this.statements.holds.get(`n:${tenant}`, holder)) return 'admitted';
    const held = this.statements.getTenant.get(tenant) as TenantRow | undefined;
    const placesHeld = held?.places ?? 0;
    if (places !== undefined && placesHeld >= places) return 'places_full';
    let window = held?.rate_window ?? null;
    let windowRuns = held?.window_runs ?? null;
    if (runsPerWindow !== undefined) {
      // The first run of a new minute opens its window; a writer whose clock runs ahead opened a later one, which this run counts in.
      if (window === null || window < limits.window) {
        window = limits.window;
        windowRuns = 0;
      }
      if ((windowRuns ?? 0) >= runsPerWindow) return 'rate_limited';
      windowRuns = (windowRuns ?? 0) + 1;
    }
    const placesAfter = places === undefined ? held?.places ?? null : placesHeld + 1;
    this.statements.putTenant.run({ tenant, window, runs: windowRuns, places: placesAfter });
    if (places !== undefined) this.statements.hold.run(`n:${tenant}`, holder);
    return 'admitted';
  }

  async getTenant(tenant: string): Promise<Tenant | undefined> {
    const row = this.statements.getSpend.get(tenant) as SpendRow | undefined;
    if (!row || (row.budget === null && row.spend_period === null)) return undefined;
    const found: Tenant = { tenant };
    if (row.budget !== null) found.budget = JSON.parse(row.budget) as Budget;
    if (row.spend_period !== null) found.spend = spendOf(row);
    return found;
  }

  async putTenantBudget(tenant: string, budget: Budget | undefined, spend: Spend): Promise<void> {
    this.statements.putBudget.run({
      tenant,
      budget: budget ? JSON.stringify(budget) : null,
      period: spend.period,
      tokens: spend.tokens,
      cost: spend.cost,
      crossedAt: spend.crossedAt ?? null,
      crossedBy: spend.crossedByRunId === undefined ? null : idColumn(spend.crossedByRunId),
    });
  }

  async chargeTenant(tenant: string, charge: Pick<Spend, 'period' | 'tokens' | 'cost'>): Promise<Spend | undefined> {
    return this.db.transaction(() => {
      const row = this.statements.getSpend.get(tenant) as SpendRow | undefined;
      const held = row?.spend_period ?? null;
      // A charge of a period already over adds nothing; the first charge of a period starts its spend.
      if (held !== null && held > charge.period) return undefined;
      const fresh = held !== charge.period;
      this.statements.chargeSpend.run({ tenant, period: charge.period, tokens: charge.tokens, cost: charge.cost, fresh: fresh ? 1 : 0 });
      return spendOf(this.statements.getSpend.get(tenant) as SpendRow);
    })();
  }

  async markBudgetCrossed(tenant: string, period: string, runId: string, at: string): Promise<void> {
    this.statements.markCrossed.run(at, idColumn(runId), tenant, period);
  }

  async putUsageRecord(record: UsageRecord): Promise<boolean> {
    return this.statements.putUsage.run(record.runId, record.tenant, record.endedAt, JSON.stringify(record)).changes === 1;
  }

  async listUsage(query: UsageQuery): Promise<{ records: UsageRecord[]; cursor?: string }> {
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

  async releaseTenantPlace(tenant: string, holder: string): Promise<void> {
    this.db.transaction(() => {
      if (this.statements.unhold.run(`n:${tenant}`, holder).changes === 1) this.statements.releaseTenantPlace.run(tenant);
    })();
  }

  async setTenantPlaces(places: ReadonlyMap<string, readonly string[]>): Promise<void> {
    this.db.transaction(() => {
      this.statements.clearTenantPlaces.run();
      this.statements.unholdTenants.run();
      for (const [tenant, holders] of places) {
        this.statements.setTenantPlaces.run({ tenant, places: holders.length });
        for (const holder of holders) this.statements.hold.run(`n:${tenant}`, holder);
      }
    })();
  }

  async createRun(run: Run): Promise<boolean> {
    const { input, ...rest } = run;
    const { createRun, putInput, indexRoot, indexTail } = this.statements;
    return this.db.transaction(() => {
      const created =
        createRun.run(run.runId, threadKey(run), run.arrival, run.status, run.tenant, run.createdAt, run.runId === run.rootRunId ? 1 : 0, JSON.stringify(rest)).changes === 1;
      if (!created) return false;
      putInput.run(run.runId, JSON.stringify(input));
      indexTaskOf(run, indexRoot, indexTail);
      return true;
    })();
  }

  async getRun(runId: string): Promise<Run | undefined> {
    const row = this.statements.getRun.get(runId) as RunRow | undefined;
    return row && this.runOf(row);
  }

  async getRunOf(tenant: string, runId: string): Promise<Run | undefined> {
    const row = this.statements.getRunOf.get(runId, tenant) as RunRow | undefined;
    return row && this.runOf(row);
  }

  async listThreadRuns(thread: ThreadRef): Promise<Run[]> {
    return (this.statements.listThreadRuns.all(threadKey(thread)) as RunRow[]).map(this.runOf);
  }

  async listRunsByStatus(status: RunStatus): Promise<Run[]> {
    return (this.statements.listRunsByStatus.all(status) as RunRow[]).map(this.runOf);
  }

  async pageRunsByStatus(status: RunStatus, page: { limit: number; cursor?: string }): Promise<{ runs: Run[]; cursor?: string }> {
    const rows = this.statements.pageRunsByStatus.all(status, page.cursor ?? '', page.limit) as (RunRow & { run_id: string })[];
    const runs = rows.map(this.runOf);
    return rows.length < page.limit ? { runs } : { runs, cursor: rows[rows.length - 1].run_id };
  }

  async listTasks(tenant: string, query: TaskIndexQuery): Promise<{ runs: Run[]; cursor?: string }> {
    if (!Number.isInteger(query.limit) || query.limit < 1) throw new RangeError(`page limit must be a positive integer, got ${query.limit}`);
    const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor, tenant, ['createdAt', 'runId']);
    const conditions = query.threadId === undefined ? ['t.tenant = @tenant', 't.agent_id = @agentId'] : ['t.thread_key = @thread', 't.agent_id = @agentId'];
    if (query.state !== undefined) conditions.push('t.state = @state');
    if (query.stateAfter !== undefined) conditions.push('t.state_at > @stateAfter');
    if (after) conditions.push('(t.created_at < @afterAt OR (t.created_at = @afterAt AND t.task_id < @afterId))');
    const sql = `SELECT r.body FROM tasks t JOIN runs r ON r.run_id = t.task_id WHERE ${conditions.join(' AND ')} ORDER BY t.created_at DESC, t.task_id DESC LIMIT @limit`;
    let listing = this.listings.get(sql);
    if (!listing) this.listings.set(sql, (listing = this.db.prepare(sql)));
    const params: Row = { agentId: query.agentId, limit: query.limit + 1 };
    if (query.threadId === undefined) params.tenant = tenant;
    else params.thread = threadKey({ tenant, threadId: query.threadId });
    if (query.state !== undefined) params.state = query.state;
    if (query.stateAfter !== undefined) params.stateAfter = query.stateAfter;
    if (after) Object.assign(params, { afterAt: after.createdAt, afterId: after.runId });
    // One row past the page tells whether another page exists, so the last page carries no cursor.
    const rows = listing.all(params) as RunRow[];
    const runs = rows.slice(0, query.limit).map(this.runOf);
    if (rows.length <= query.limit) return { runs };
    const last = runs[runs.length - 1];
    return { runs, cursor: encodeCursor({ tenant, createdAt: last.createdAt, runId: last.runId }) };
  }

  async transitionRun(runId: string, from: readonly RunStatus[], patch: Partial<Run> & { status: RunStatus }): Promise<Run | undefined> {
    if (from.length === 0) return undefined;
    for (const [key, value] of Object.entries(patch)) {
      if (value !== undefined && RUN_IDENTITY.has(key)) throw new TypeError(`transitionRun cannot change a run's ${key}`);
    }
    const row = this.statements.getRun.get(runId) as RunRow | undefined;
    if (!row) return undefined;
    const run = this.runOf(row);
    if (!from.includes(run.status)) return undefined;
    for (const [key, value] of Object.entries(patch)) if (value !== undefined) (run as unknown as Row)[key] = value;
    this.writeRun(run, patch.input !== undefined);
    return run;
  }

  async closeAsks(runId: string, changes: AskChanges): Promise<Run | undefined> {
    return this.changeAsks(
      runId,
      changes,
      (ask) => ask.state === 'open',
      (ask, change) => ({ ...ask, state: change.state, ...(change.closedByRunId !== undefined ? { closedByRunId: change.closedByRunId } : {}) }),
    );
  }

  async reopenAsks(runId: string, changes: AskChanges): Promise<Run | undefined> {
    return this.changeAsks(
      runId,
      changes,
      (ask, change) => ask.state !== 'open' && ask.closedByRunId === change.closedByRunId,
      ({ closedByRunId: _closedBy, ...ask }) => ({ ...ask, state: 'open' }),
      (run) => (run.asksReopened = (run.asksReopened ?? 0) + 1),
    );
  }

  /** Changes the named asks of a run only when every one of them is as `was` expects: all or none (one synchronous step). */
  private changeAsks(
    runId: string,
    changes: AskChanges,
    was: (ask: Ask, change: AskChanges[string]) => boolean,
    next: (ask: Ask, change: AskChanges[string]) => Ask,
    count: (run: Run) => void = () => {},
  ): Run | undefined {
    const entries = Object.entries(changes);
    const row = this.statements.getRun.get(runId) as RunRow | undefined;
    if (!row) return undefined;
    const run = this.runOf(row);
    if (entries.length === 0) return run;
    const asks = run.asks ?? {};
    if (!entries.every(([askId, change]) => Object.hasOwn(asks, askId) && was(asks[askId], change))) return undefined;
    for (const [askId, change] of entries) asks[askId] = next(asks[askId], change);
    count(run);
    this.writeRun(run, false);
    return run;
  }

  async forgetClosingEvents(runId: string): Promise<void> {
    const row = this.statements.getRun.get(runId) as RunRow | undefined;
    if (!row) return;
    const run = this.runOf(row);
    if (run.closingEvents === undefined) return;
    delete run.closingEvents;
    this.writeRun(run, false);
  }

  async appendEvents(events: StoredEvent[]): Promise<void> {
    if (events.length === 0) return;
    this.writing(() => this.insertEvents(events));
  }

  async appendNew(events: StoredEvent[]): Promise<number[]> {
    if (events.length === 0) return [];
    return this.writing(() => this.insertNewEvents(events)).sort((a, b) => a - b);
  }

  async readEvents(runId: string, afterSeq: number, limit?: number): Promise<StoredEvent[]> {
    // The row holding the event after the cursor may begin before it; each row holds one event at
    // least, so `limit` rows from there hold the page (no row before it is read: events may be large).
    const first = this.statements.rowAtOrBefore.get(runId, afterSeq + 1) as { seq: number; count: number } | undefined;
    const from = first && first.seq + first.count - 1 > afterSeq ? first.seq : afterSeq + 1;
    const rows = this.statements.readEvents.all(runId, from - 1, limit === undefined ? -1 : limit) as { seq: number; count: number; events: string }[];
    const events: StoredEvent[] = [];
    for (const row of rows) {
      if (row.seq + row.count - 1 <= afterSeq) continue;
      const texts = row.count === 1 ? [row.events] : row.events.split('\n');
      for (let i = 0; i < texts.length; i++) {
        const seq = row.seq + i;
        if (seq <= afterSeq) continue;
        if (limit !== undefined && events.length >= limit) return events;
        events.push(storedOf(runId, seq, texts[i]));
      }
    }
    return events;
  }

  async lastSeq(runId: string): Promise<number> {
    return ((this.statements.lastSeq.get(runId) as { seq: number | null }).seq ?? 0);
  }

  async putAgent(agent: Agent): Promise<void> {
    this.statements.putAgent.run(agent.id, JSON.stringify(agent));
  }

  async getAgent(agentId: string): Promise<Agent | undefined> {
    const row = this.statements.getAgent.get(agentId) as { body: string } | undefined;
    return row && JSON.parse(row.body);
  }

  async listAgents(): Promise<Agent[]> {
    return (this.statements.listAgents.all() as { body: string }[]).map((row) => JSON.parse(row.body));
  }

  async deleteAgent(agentId: string): Promise<void> {
    this.statements.deleteAgent.run(agentId);
  }

  async putPushConfig(config: PushConfig): Promise<void> {
    this.statements.putPushConfig.run(config.taskId, config.configId, JSON.stringify(config));
  }

  async getPushConfig(taskId: string, configId: string): Promise<PushConfig | undefined> {
    const row = this.statements.getPushConfig.get(taskId, configId) as { body: string } | undefined;
    return row && JSON.parse(row.body);
  }

  async listPushConfigs(taskId: string): Promise<PushConfig[]> {
    return (this.statements.listPushConfigs.all(taskId) as { body: string }[]).map((row) => JSON.parse(row.body));
  }

  async deletePushConfig(taskId: string, configId: string): Promise<boolean> {
    return this.statements.deletePushConfig.run(taskId, configId).changes === 1;
  }

  async recordPushFailure(taskId: string, configId: string, deadLetter: NonNullable<PushConfig['deadLetter']>): Promise<void> {
    const row = this.statements.getPushConfig.get(taskId, configId) as { body: string } | undefined;
    // A config deleted while its notification was being retried is not brought back.
    if (!row) return;
    this.statements.putPushConfig.run(taskId, configId, JSON.stringify({ ...JSON.parse(row.body), deadLetter }));
  }

  async claimMessage(claim: MessageClaim, nowSeconds: number): Promise<MessageClaim> {
    // A claim past its expiry is free to take over, as on DynamoDB before TTL removes it.
    const taken =
      this.statements.claimMessage.run({ key: claim.key, runId: claim.runId, body: JSON.stringify(claim), expiresAt: claim.expiresAt, now: nowSeconds }).changes === 1;
    if (taken) return claim;
    return JSON.parse((this.statements.getClaim.get(claim.key) as { body: string }).body);
  }

  async releaseMessage(claim: MessageClaim): Promise<void> {
    this.statements.releaseMessage.run(claim.key, claim.runId);
  }

  async putProvider(provider: LinkProvider): Promise<boolean> {
    // The places its runs hold are the record's, not the admin's: a new registration keeps them.
    // The first registration's createdAt stays, as on DynamoDB (if_not_exists).
    const existing = this.statements.getProvider.get(provider.providerId) as ProviderRow | undefined;
    const createdAt = existing ? (JSON.parse(existing.body) as LinkProvider).createdAt : provider.createdAt;
    this.statements.putProvider.run({ id: provider.providerId, body: JSON.stringify({ ...provider, createdAt }) });
    return existing === undefined;
  }

  async getProvider(providerId: string): Promise<(LinkProvider & { places: number }) | undefined> {
    const row = this.statements.getProvider.get(providerId) as ProviderRow | undefined;
    return row && providerOf(row);
  }

  async listProviders(): Promise<(LinkProvider & { places: number })[]> {
    return (this.statements.listProviders.all() as ProviderRow[]).map(providerOf);
  }

  async deleteProvider(providerId: string): Promise<boolean> {
    return this.statements.deleteProvider.run(providerId).changes === 1;
  }

  async takeProviderPlace(providerId: string, limit: number): Promise<boolean> {
    return this.statements.takeProviderPlace.run(providerId, limit).changes === 1;
  }

  async releaseProviderPlace(providerId: string): Promise<void> {
    this.statements.releaseProviderPlace.run(providerId);
  }

  async resetProviderPlaces(): Promise<void> {
    this.statements.resetProviderPlaces.run();
  }

  async updateRunLink(runId: string, expectedRev: number | undefined, link: RunLink): Promise<Run | undefined> {
    const row = this.statements.getRun.get(runId) as RunRow | undefined;
    if (!row) return undefined;
    const run = this.runOf(row);
    if (run.status !== 'running' && run.status !== 'cancelling') return undefined;
    if (expectedRev === undefined ? run.link !== undefined : run.link?.rev !== expectedRev) return undefined;
    run.link = link;
    this.writeRun(run, false);
    return run;
  }

  private writeRun(run: Run, withInput: boolean): void {
    const { writeRun, putInput, indexRoot, indexTail } = this.statements;
    this.db.transaction(() => {
      writeRun.run(run.status, JSON.stringify(bodyOf(run)), run.runId);
      if (withInput) putInput.run(run.runId, JSON.stringify(run.input));
      indexTaskOf(run, indexRoot, indexTail);
    })();
  }

  /** A run as its row says, its input read and parsed only when asked for (most writes of a run never look at it). */
  private readonly runOf = (row: RunRow): Run => {
    const run = JSON.parse(row.body) as Run;
    const { getInput } = this.statements;
    let input: RunAgentInput | undefined;
    Object.defineProperty(run, 'input', {
      get: () => (input ??= JSON.parse((getInput.get(run.runId) as { input: string }).input) as RunAgentInput),
      set: (value: RunAgentInput) => (input = value),
      enumerable: true,
      configurable: true,
    });
    return run;
  };

  /** An event write SQLite could not take for now (a full disk, an I/O error) is `store_unavailable`, so its run fails saying why. */
  private writing<T>(write: () => T): T {
    try {
      return write();
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (typeof code === 'string' && UNAVAILABLE.test(code)) {
        throw new StoreUnavailable(`the SQLite record did not take the events: ${(error as Error).message}`, { cause: error });
      }
      throw error;
    }
  }
}

/**
 * Takes the record's lock: a file of its own (the record itself is shared with the checkpoint
 * thread's connection), held by a connection in `locking_mode = EXCLUSIVE` from its first
 * transaction until it closes, or the process ends however it ends. A second gateway on the same
 * record fails here, before it serves anything.
 */
function holdRecord(path: string): Database.Database {
  // timeout 0: a lock another process holds is reported at once, not after waiting for it.
  const lock = new Database(`${path}-lock`, { timeout: 0 });
  try {
    // Its journal in memory: the lock file stays empty, with nothing beside it (OFF is refused in defensive mode).
    lock.pragma('journal_mode = MEMORY');
    lock.pragma('locking_mode = EXCLUSIVE');
    lock.exec('BEGIN EXCLUSIVE');
    lock.exec('COMMIT');
    return lock;
  } catch (error) {
    lock.close();
    if ((error as { code?: unknown }).code === 'SQLITE_BUSY') throw new StoreLocked(`${path} is held by another process`, { cause: error });
    throw error;
  }
}

/**
 * Opens the record in WAL mode with `synchronous = NORMAL`: a commit is durable across a crash of
 * the process; a power cut may lose the last commits, never the file. Checks the schema version,
 * and creates or migrates the tables.
 */
function openDatabase(path: string): Database.Database {
  const db = new Database(path, { timeout: 0 });
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.exec('BEGIN IMMEDIATE');
    const version = db.pragma('user_version', { simple: true }) as number;
    const application = db.pragma('application_id', { simple: true }) as number;
    if (version > SCHEMA_VERSION) {
      throw new SchemaTooNew(
        `${path} was written by a newer funduq (record schema ${version}; this one reads up to ${SCHEMA_VERSION}): run that version, or choose another FUNDUQ_DATA_DIR`,
      );
    }
    if (version === 0) {
      const tables = (db.prepare("SELECT count(*) AS n FROM sqlite_schema WHERE type = 'table'").get() as { n: number }).n;
      if (tables > 0) throw new NotARecord(`${path} is a SQLite database, but not a funduq record: choose another FUNDUQ_DATA_DIR`);
      db.pragma(`application_id = ${APPLICATION_ID}`);
    } else if (application !== APPLICATION_ID) {
      throw new NotARecord(`${path} is a SQLite database, but not a funduq record: choose another FUNDUQ_DATA_DIR`);
    }
    for (const step of MIGRATIONS.slice(version)) {
      if (typeof step === 'string') db.exec(step);
      else step(db);
    }
    if (version < SCHEMA_VERSION) db.pragma(`user_version = ${SCHEMA_VERSION}`);
    db.exec('COMMIT');
    return db;
  } catch (error) {
    if (db.inTransaction) db.exec('ROLLBACK');
    db.close();
    const code = (error as { code?: unknown }).code;
    if (code === 'SQLITE_BUSY') throw new StoreLocked(`${path} is held by another process`, { cause: error });
    if (code === 'SQLITE_NOTADB') throw new NotARecord(`${path} is not a SQLite database: choose another FUNDUQ_DATA_DIR`, { cause: error });
    throw error;
  }
}

function prepare(db: Database.Database) {
  const runColumns = 'body';
  return {
    getThread: db.prepare('SELECT body, unsettled, arrivals, waiting_run_id FROM threads WHERE thread_key = ?'),
    createThread: db.prepare('INSERT OR IGNORE INTO threads (thread_key, body, unsettled, arrivals, waiting_run_id) VALUES (?, ?, ?, ?, ?)'),
    // One statement takes the number and the place together, only while the thread has room.
    reserveArrival: db.prepare(
      'UPDATE threads SET arrivals = arrivals + 1, unsettled = unsettled + 1 WHERE thread_key = @key AND (@limit IS NULL OR unsettled < @limit) RETURNING arrivals',
    ),
    releasePlace: db.prepare('UPDATE threads SET unsettled = unsettled - 1 WHERE thread_key = ? AND unsettled > 0'),
    nextArrival: db.prepare('UPDATE threads SET arrivals = arrivals + 1 WHERE thread_key = ? RETURNING arrivals'),
    hold: db.prepare('INSERT OR IGNORE INTO places (owner, run_id) VALUES (?, ?)'),
    holds: db.prepare('SELECT 1 FROM places WHERE owner = ? AND run_id = ?'),
    holders: db.prepare('SELECT run_id FROM places WHERE owner = ? ORDER BY run_id'),
    unhold: db.prepare('DELETE FROM places WHERE owner = ? AND run_id = ?'),
    unholdAll: db.prepare('DELETE FROM places WHERE owner = ?'),
    unholdTenants: db.prepare("DELETE FROM places WHERE owner LIKE 'n:%'"),
    abandonThread: db.prepare('DELETE FROM threads WHERE thread_key = ? AND arrivals = 1'),
    noteArrival: db.prepare(
      'INSERT INTO arrivals (run_id, at, body) VALUES (@runId, @at, @body) ON CONFLICT (run_id) DO UPDATE SET at = @at, body = @body WHERE claimed = 0',
    ),
    claimArrival: db.prepare('UPDATE arrivals SET claimed = 1 WHERE run_id = ? AND at = ?'),
    forgetArrival: db.prepare('DELETE FROM arrivals WHERE run_id = ?'),
    listArrivals: db.prepare('SELECT body FROM arrivals WHERE at < ? ORDER BY at LIMIT ?'),
    setUnsettled: db.prepare('UPDATE threads SET unsettled = ? WHERE thread_key = ?'),
    setWaitingRun: db.prepare('UPDATE threads SET waiting_run_id = ? WHERE thread_key = ?'),
    getTenant: db.prepare('SELECT rate_window, window_runs, places FROM tenants WHERE tenant = ?'),
    putTenant: db.prepare(
      'INSERT INTO tenants (tenant, rate_window, window_runs, places) VALUES (@tenant, @window, @runs, @places) ON CONFLICT (tenant) DO UPDATE SET rate_window = @window, window_runs = @runs, places = @places',
    ),
    getSpend: db.prepare('SELECT budget, spend_period, spend_tokens, spend_cost, crossed_at, crossed_by FROM tenants WHERE tenant = ?'),
    putBudget: db.prepare(
      `INSERT INTO tenants (tenant, budget, spend_period, spend_tokens, spend_cost, crossed_at, crossed_by)
       VALUES (@tenant, @budget, @period, @tokens, @cost, @crossedAt, @crossedBy)
       ON CONFLICT (tenant) DO UPDATE SET budget = @budget, spend_period = @period, spend_tokens = @tokens, spend_cost = @cost, crossed_at = @crossedAt, crossed_by = @crossedBy`,
    ),
    chargeSpend: db.prepare(
      `INSERT INTO tenants (tenant, spend_period, spend_tokens, spend_cost) VALUES (@tenant, @period, @tokens, @cost)
       ON CONFLICT (tenant) DO UPDATE SET
         spend_period = @period,
         spend_tokens = CASE WHEN @fresh = 1 THEN @tokens ELSE spend_tokens + @tokens END,
         spend_cost = CASE WHEN @fresh = 1 THEN @cost ELSE spend_cost + @cost END,
         crossed_at = CASE WHEN @fresh = 1 THEN NULL ELSE crossed_at END,
         crossed_by = CASE WHEN @fresh = 1 THEN NULL ELSE crossed_by END`,
    ),
    markCrossed: db.prepare('UPDATE tenants SET crossed_at = ?, crossed_by = ? WHERE tenant = ? AND spend_period = ? AND crossed_at IS NULL'),
    putUsage: db.prepare('INSERT OR IGNORE INTO usage_records (run_id, tenant, ended_at, body) VALUES (?, ?, ?, ?)'),
    listTenantUsage: db.prepare(
      `SELECT body FROM usage_records WHERE tenant = @tenant AND ended_at >= @from AND ended_at < @to
       AND (@afterAt IS NULL OR ended_at > @afterAt OR (ended_at = @afterAt AND run_id > @afterRun)) ORDER BY ended_at, run_id LIMIT @limit`,
    ),
    listUsage: db.prepare(
      `SELECT body FROM usage_records WHERE ended_at >= @from AND ended_at < @to
       AND (@afterAt IS NULL OR ended_at > @afterAt OR (ended_at = @afterAt AND run_id > @afterRun)) ORDER BY ended_at, run_id LIMIT @limit`,
    ),
    releaseTenantPlace: db.prepare('UPDATE tenants SET places = places - 1 WHERE tenant = ? AND places > 0'),
    clearTenantPlaces: db.prepare('UPDATE tenants SET places = 0'),
    setTenantPlaces: db.prepare('INSERT INTO tenants (tenant, places) VALUES (@tenant, @places) ON CONFLICT (tenant) DO UPDATE SET places = @places'),
    createRun: db.prepare('INSERT OR IGNORE INTO runs (run_id, thread_key, arrival, status, tenant, created_at, is_root, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?)'),
    putInput: db.prepare('INSERT OR REPLACE INTO run_inputs (run_id, input) VALUES (?, ?)'),
    getInput: db.prepare('SELECT input FROM run_inputs WHERE run_id = ?'),
    getRun: db.prepare(`SELECT ${runColumns} FROM runs WHERE run_id = ?`),
    getRunOf: db.prepare(`SELECT ${runColumns} FROM runs WHERE run_id = ? AND tenant = ?`),
    writeRun: db.prepare('UPDATE runs SET status = ?, body = ? WHERE run_id = ?'),
    listThreadRuns: db.prepare(`SELECT ${runColumns} FROM runs WHERE thread_key = ? ORDER BY arrival, run_id`),
    listRunsByStatus: db.prepare(`SELECT ${runColumns} FROM runs WHERE status = ?`),
    pageRunsByStatus: db.prepare(`SELECT ${runColumns}, run_id FROM runs WHERE status = ? AND run_id > ? ORDER BY run_id LIMIT ?`),
    ...taskStatements(db),
    insertEvents: db.prepare('INSERT INTO run_events (run_id, seq, count, events) VALUES (?, ?, ?, ?)'),
    rowAtOrBefore: db.prepare('SELECT seq, count FROM run_events WHERE run_id = ? AND seq <= ? ORDER BY seq DESC LIMIT 1'),
    readEvents: db.prepare('SELECT seq, count, events FROM run_events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?'),
    lastSeq: db.prepare('SELECT max(seq + count - 1) AS seq FROM run_events WHERE run_id = ?'),
    putAgent: db.prepare('INSERT OR REPLACE INTO agents (agent_id, body) VALUES (?, ?)'),
    getAgent: db.prepare('SELECT body FROM agents WHERE agent_id = ?'),
    listAgents: db.prepare('SELECT body FROM agents ORDER BY agent_id'),
    deleteAgent: db.prepare('DELETE FROM agents WHERE agent_id = ?'),
    putPushConfig: db.prepare('INSERT OR REPLACE INTO push_configs (task_id, config_id, body) VALUES (?, ?, ?)'),
    getPushConfig: db.prepare('SELECT body FROM push_configs WHERE task_id = ? AND config_id = ?'),
    listPushConfigs: db.prepare('SELECT body FROM push_configs WHERE task_id = ? ORDER BY config_id'),
    deletePushConfig: db.prepare('DELETE FROM push_configs WHERE task_id = ? AND config_id = ?'),
    claimMessage: db.prepare(
      'INSERT INTO message_claims (claim_key, run_id, body, expires_at) VALUES (@key, @runId, @body, @expiresAt) ON CONFLICT (claim_key) DO UPDATE SET run_id = @runId, body = @body, expires_at = @expiresAt WHERE expires_at <= @now',
    ),
    getClaim: db.prepare('SELECT body FROM message_claims WHERE claim_key = ?'),
    releaseMessage: db.prepare('DELETE FROM message_claims WHERE claim_key = ? AND run_id = ?'),
    putProvider: db.prepare('INSERT INTO providers (provider_id, body) VALUES (@id, @body) ON CONFLICT (provider_id) DO UPDATE SET body = @body'),
    getProvider: db.prepare('SELECT body, places FROM providers WHERE provider_id = ?'),
    listProviders: db.prepare('SELECT body, places FROM providers ORDER BY provider_id'),
    deleteProvider: db.prepare('DELETE FROM providers WHERE provider_id = ?'),
    takeProviderPlace: db.prepare('UPDATE providers SET places = places + 1 WHERE provider_id = ? AND places < ?'),
    releaseProviderPlace: db.prepare('UPDATE providers SET places = places - 1 WHERE provider_id = ? AND places > 0'),
    resetProviderPlaces: db.prepare('UPDATE providers SET places = 0 WHERE places > 0'),
  };
}

function taskStatements(db: Database.Database) {
  return {
    indexRoot: db.prepare(
      `INSERT INTO tasks (task_id, tenant, agent_id, thread_key, created_at, tail_arrival, state, state_at) VALUES (@taskId, @tenant, @agentId, @thread, @createdAt, @arrival, @state, @at)
       ON CONFLICT (task_id) DO UPDATE SET state = @state, state_at = @at WHERE tail_arrival = @arrival`,
    ),
    // An answer run is its task's tail from its creation on; an earlier run's later write changes nothing.
    indexTail: db.prepare('UPDATE tasks SET tail_arrival = @arrival, state = @state, state_at = @at WHERE task_id = @taskId AND tail_arrival <= @arrival'),
  };
}

/** A run's write as its task's index row says it: the root's makes the row, the tail's sets the state. */
function indexTaskOf(run: Run, indexRoot: Database.Statement, indexTail: Database.Statement): void {
  const state = { taskId: run.rootRunId, arrival: run.arrival, state: taskStateOf(run), at: taskStateAt(run) };
  if (run.runId === run.rootRunId) indexRoot.run({ ...state, tenant: run.tenant, agentId: run.agentId, thread: threadKey(run), createdAt: run.createdAt });
  else indexTail.run(state);
}

/** Events as rows: runs of consecutive seqs of one run, at most EVENTS_PER_ROW and about ROW_BYTES each, as [first event, count, joined JSON]. */
function rowsOf(events: StoredEvent[]): [StoredEvent, number, string][] {
  const rows: [StoredEvent, number, string][] = [];
  let first = events[0];
  let json = jsonOf(first);
  let count = 1;
  for (let i = 1; i < events.length; i++) {
    const stored = events[i];
    const next = jsonOf(stored);
    if (stored.runId === first.runId && stored.seq === first.seq + count && count < EVENTS_PER_ROW && json.length + next.length < ROW_BYTES) {
      json += `\n${next}`;
      count += 1;
      continue;
    }
    rows.push([first, count, json]);
    first = stored;
    json = next;
    count = 1;
  }
  rows.push([first, count, json]);
  return rows;
}

/**
 * An event as read back, parsed only when its `event` is asked for: a reader of the stream sends
 * the stored JSON as it is (twelve readers of a run of 380 KB events parsed 38 MB each, for nothing).
 */
function storedOf(runId: string, seq: number, json: string): StoredEvent {
  let event: AgUiEventRecord | undefined;
  const stored = { runId, seq, json } as StoredEvent;
  Object.defineProperty(stored, 'event', {
    get: () => (event ??= JSON.parse(json) as AgUiEventRecord),
    set: (value: AgUiEventRecord) => (event = value),
    enumerable: true,
    configurable: true,
  });
  return stored;
}

function jsonOf(stored: StoredEvent): string {
  // JSON text from elsewhere could be laid out over lines; a row's events are split at newlines.
  if (stored.json === undefined || stored.json.includes('\n')) stored.json = JSON.stringify(stored.event);
  return stored.json;
}

function threadOf(row: ThreadRow): Thread {
  const thread: Thread = { ...JSON.parse(row.body), unsettled: row.unsettled, arrivals: row.arrivals };
  if (row.waiting_run_id !== null) thread.waitingRunId = idOf(row.waiting_run_id);
  return thread;
}

function providerOf(row: ProviderRow): LinkProvider & { places: number } {
  return { ...(JSON.parse(row.body) as LinkProvider), places: row.places };
}

/** A run's row body: the run less its input (a column of its own, see RUN_INPUTS), without reading the input. */
function bodyOf(run: Run): Omit<Run, 'input'> {
  const body: Row = {};
  for (const key of Object.keys(run)) if (key !== 'input') body[key] = (run as unknown as Row)[key];
  return body as Omit<Run, 'input'>;
}

function spendOf(row: SpendRow): Spend {
  const spend: Spend = { period: row.spend_period ?? '', tokens: row.spend_tokens ?? 0, cost: row.spend_cost ?? 0 };
  if (row.crossed_at !== null) spend.crossedAt = row.crossed_at;
  if (row.crossed_by !== null) spend.crossedByRunId = idOf(row.crossed_by);
  return spend;
}

/** A page's place in a listing: whose listing ('' for every tenant's) and the last row it gave. */
type Cursor<Key extends string> = { tenant: string } & Record<Key, string>;

function encodeCursor(cursor: Cursor<string>): string {
  return encodePageCursor(cursor);
}

/** A cursor comes back from a caller: accept only the shape we issue, for the listing asking. */
function decodeCursor<Key extends string>(cursor: string, tenant: string, keys: readonly Key[]): Cursor<Key> {
  const value = decodePageCursor(cursor);
  const fields = ['tenant', ...keys];
  const valid =
    typeof value === 'object' &&
    value !== null &&
    Object.keys(value).length === fields.length &&
    fields.every((field) => typeof (value as Row)[field] === 'string') &&
    (value as Row).tenant === tenant;
  if (!valid) throw new RangeError('invalid page cursor');
  return value as Cursor<Key>;
}

/** A run id as a column keeps it (see RUN_ID_COLUMNS_AS_JSON). */
function idColumn(runId: string): string {
  return JSON.stringify(runId);
}

function idOf(column: string): string {
  return JSON.parse(column) as string;
}
