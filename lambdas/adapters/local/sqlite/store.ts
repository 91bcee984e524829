import type Database from 'better-sqlite3';
import type { RecordProjections, RunStore } from '../../../core/ports.js';
import { JOURNAL_SIZE_LIMIT, SqliteCheckpointer } from '../sqlite-checkpointer.js';
import { SqliteAgents } from './agents.js';
import { SqliteAuditLog } from './audit.js';
import { SqliteArrivals } from './arrivals.js';
import { SqliteMessageClaims } from './claims.js';
import { SqliteRunLeases } from './leases.js';
import { SqliteEventLog } from './events.js';
import { SqliteHandle } from './handle.js';
import { SqlitePrincipals } from './principals.js';
import { SqliteProviders } from './providers.js';
import { SqlitePushConfigs } from './push-configs.js';
import { SqliteRetention } from './retention.js';
import { SqliteRunRecords } from './runs.js';
import { holdRecord, openDatabase, TABLES } from './schema.js';
import { SqliteTaskIndex } from './tasks.js';
import { SqliteTenants } from './tenants.js';
import { SqliteThreads } from './threads.js';
import { SqliteUsageRecords } from './usage.js';

export { NotARecord, SCHEMA_VERSION, SchemaTooNew, StoreLocked } from './schema.js';

/** SQLite's own default: a commit that finds the log this many pages long copies it into the file. */
const SQLITE_AUTOCHECKPOINT_PAGES = 1000;

export interface SqliteStoreOptions {
  /** What the store computes beside each run it writes (the task index's entries). */
  projections: RecordProjections;
  /**
   * Hears, in a line for the operator, of a log the checkpoint thread could not copy (it tries
   * again; the log grows meanwhile), and of the thread gone (the store's own commits copy the log
   * from then on).
   */
  onCheckpointFailure?: (message: string) => void;
}

/**
 * The record on SQLite, for one machine: one file, WAL, and a lock beside it held for as long as
 * the store is open (another process opening it is refused, and the lock goes with the process,
 * however it ends). Its parts share one connection (`SqliteHandle`). The log is copied into the
 * file on a thread of its own (SqliteCheckpointer), never inside one of this thread's commits.
 */
export class SqliteStore implements RunStore {
  readonly threads: SqliteThreads;
  readonly arrivals: SqliteArrivals;
  readonly tenants: SqliteTenants;
  readonly usage: SqliteUsageRecords;
  readonly runs: SqliteRunRecords;
  readonly tasks: SqliteTaskIndex;
  readonly events: SqliteEventLog;
  readonly agents: SqliteAgents;
  readonly pushConfigs: SqlitePushConfigs;
  readonly claims: SqliteMessageClaims;
  readonly providers: SqliteProviders;
  readonly principals: SqlitePrincipals;
  readonly leases: SqliteRunLeases;
  readonly audit: SqliteAuditLog;
  readonly retention: SqliteRetention;
  private readonly lock: Database.Database | undefined;
  private readonly checkpointer: SqliteCheckpointer | undefined;
  private readonly db: Database.Database;

  /** Opens (or creates) the record at `path`, or in memory for ':memory:'. */
  constructor(path: string, { projections, onCheckpointFailure = () => {} }: SqliteStoreOptions) {
    const inFile = path !== ':memory:';
    this.lock = inFile ? holdRecord(path) : undefined;
    try {
      this.db = openDatabase(path, projections);
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
    const handle = new SqliteHandle(this.db, projections);
    this.threads = new SqliteThreads(handle);
    this.arrivals = new SqliteArrivals(handle);
    this.tenants = new SqliteTenants(handle);
    this.usage = new SqliteUsageRecords(handle);
    this.tasks = new SqliteTaskIndex(handle);
    this.runs = new SqliteRunRecords(handle, this.tasks);
    this.events = new SqliteEventLog(handle);
    this.agents = new SqliteAgents(handle);
    this.pushConfigs = new SqlitePushConfigs(handle);
    this.claims = new SqliteMessageClaims(handle);
    this.providers = new SqliteProviders(handle);
    this.principals = new SqlitePrincipals(handle);
    this.leases = new SqliteRunLeases(handle);
    this.audit = new SqliteAuditLog(handle);
    this.retention = new SqliteRetention(handle);
  }

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
}

/** The record on SQLite at `path` (':memory:' for none). */
export function createSqliteStore(path: string, options: SqliteStoreOptions): SqliteStore {
  return new SqliteStore(path, options);
}
