import Database from 'better-sqlite3';
import type { Run } from '../../../core/model.js';
import type { RecordProjections } from '../../../core/ports.js';
import { taskEntryWriter } from './tasks.js';

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
function taskIndex(db: Database.Database, projections: RecordProjections): void {
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
  const writer = taskEntryWriter(db);
  // The bodies only (a run's input is a column of its own): each is a few hundred bytes.
  for (const root of [1, 0]) {
    for (const row of db.prepare('SELECT body FROM runs WHERE is_root = ?').all(root) as { body: string }[]) {
      writer(projections.taskEntry(JSON.parse(row.body) as Run));
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

const MIGRATIONS: readonly (string | ((db: Database.Database, projections: RecordProjections) => void))[] = [
  FIRST_SCHEMA,
  RUN_ID_COLUMNS_AS_JSON,
  // Link providers: the registration as the admin wrote it, and the places its runs hold (the record's).
  'CREATE TABLE providers (provider_id TEXT PRIMARY KEY, body TEXT NOT NULL, places INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;',
  PLACE_HOLDERS,
  taskIndex,
  RUN_INPUTS,
  // Requests noted before they take anything, forgotten once their run is recorded (`Arrival`).
  'CREATE TABLE arrivals (run_id TEXT PRIMARY KEY, at TEXT NOT NULL, body TEXT NOT NULL, claimed INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID; CREATE INDEX arrivals_at ON arrivals (at);',
  // The keys an admin registered for a principal: its actor chains' last hop is signed by one of them.
  'CREATE TABLE principals (tenant TEXT NOT NULL, principal TEXT NOT NULL, keys TEXT NOT NULL, PRIMARY KEY (tenant, principal)) WITHOUT ROWID;',
  // Dispatchers' leases on the runs they relay (`RunLease`), listed by their end.
  'CREATE TABLE leases (run_id TEXT PRIMARY KEY, until INTEGER NOT NULL, receipt TEXT) WITHOUT ROWID; CREATE INDEX leases_until ON leases (until);',
  // The audit log: records by id (their time first), those not sealed yet apart, and the segments that seal them.
  `CREATE TABLE audit_records (id TEXT PRIMARY KEY, tenant TEXT, body TEXT NOT NULL, segment INTEGER) WITHOUT ROWID;
   CREATE INDEX audit_unsealed ON audit_records (id) WHERE segment IS NULL;
   CREATE INDEX audit_tenant ON audit_records (tenant, id);
   CREATE TABLE audit_segments (seq INTEGER PRIMARY KEY, body TEXT NOT NULL);`,
  // Retention: a thread's last activity (from its latest run, for a record from before), threads
  // listed by it, and each tenant's own policy and hold.
  `ALTER TABLE threads ADD COLUMN last_activity_at TEXT;
   UPDATE threads SET last_activity_at = coalesce((SELECT max(created_at) FROM runs WHERE runs.thread_key = threads.thread_key), json_extract(body, '$.createdAt'));
   CREATE INDEX threads_idle ON threads (last_activity_at, thread_key);
   CREATE TABLE retention (tenant TEXT PRIMARY KEY, body TEXT NOT NULL) WITHOUT ROWID;`,
  // A lease held by the door that admitted its run, which no dispatcher takes over (`RunLease.door`).
  'ALTER TABLE leases ADD COLUMN door INTEGER NOT NULL DEFAULT 0;',
];

/**
 * The schema this code writes, kept in SQLite's own `user_version`. A file written by a newer
 * funduq (a higher version) is refused rather than misread; an older one is migrated at open.
 */
export const SCHEMA_VERSION = MIGRATIONS.length;

/** Every table of the record, for a look at the whole of it (`SqliteStore.census`). */
export const TABLES = ['threads', 'runs', 'run_inputs', 'run_events', 'tenants', 'agents', 'push_configs', 'message_claims', 'usage_records', 'providers', 'places', 'tasks', 'arrivals', 'principals', 'leases', 'audit_records', 'audit_segments', 'retention'] as const;

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


/**
 * Takes the record's lock: a file of its own (the record itself is shared with the checkpoint
 * thread's connection), held by a connection in `locking_mode = EXCLUSIVE` from its first
 * transaction until it closes, or the process ends however it ends. A second gateway on the same
 * record fails here, before it serves anything.
 */
export function holdRecord(path: string): Database.Database {
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
export function openDatabase(path: string, projections: RecordProjections): Database.Database {
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
      else step(db, projections);
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
