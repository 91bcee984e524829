import type Database from 'better-sqlite3';
import type { RunLease } from '../../../core/model.js';
import type { LeaseAs, RunLeases } from '../../../core/ports.js';
import type { SqliteHandle } from './handle.js';

/** Leases: a row per run, its end in a column of its own (indexed: the sweep lists by it). */
export class SqliteRunLeases implements RunLeases {
  private readonly statements: ReturnType<typeof prepare>;

  constructor(handle: SqliteHandle) {
    this.statements = prepare(handle.db);
  }

  async take(lease: RunLease): Promise<boolean> {
    const put = lease.door ? this.statements.putDoor : this.statements.put;
    return put.run(lease.runId, lease.until, lease.receipt ?? null).changes === 1;
  }

  async renew(runId: string, until: number, receipt?: string): Promise<boolean> {
    return this.statements.renew.run({ until, runId, receipt: receipt ?? null }).changes === 1;
  }

  async get(runId: string): Promise<RunLease | undefined> {
    const row = this.statements.get.get(runId) as LeaseRow | undefined;
    return row && leaseOf(row);
  }

  async lapsed(before: number, limit: number): Promise<RunLease[]> {
    return (this.statements.lapsed.all(before, limit) as LeaseRow[]).map(leaseOf);
  }

  async end(runId: string, as: LeaseAs = {}): Promise<boolean> {
    return this.statements.end.run({ runId, until: as.until ?? null, receipt: as.receipt ?? null }).changes === 1;
  }
}

interface LeaseRow {
  run_id: string;
  until: number;
  receipt: string | null;
  door: number;
}

function leaseOf(row: LeaseRow): RunLease {
  return { runId: row.run_id, until: row.until, ...(row.receipt !== null ? { receipt: row.receipt } : {}), ...(row.door ? { door: true as const } : {}) };
}

function prepare(db: Database.Database) {
  return {
    get: db.prepare('SELECT run_id, until, receipt, door FROM leases WHERE run_id = ?'),
    // A dispatcher's lease takes over any but a door's; a door's is taken only where none is held.
    put: db.prepare('INSERT INTO leases (run_id, until, receipt, door) VALUES (?, ?, ?, 0) ON CONFLICT (run_id) DO UPDATE SET until = excluded.until, receipt = excluded.receipt WHERE door = 0'),
    putDoor: db.prepare('INSERT INTO leases (run_id, until, receipt, door) VALUES (?, ?, ?, 1) ON CONFLICT (run_id) DO NOTHING'),
    // A condition left null is no condition.
    renew: db.prepare('UPDATE leases SET until = @until WHERE run_id = @runId AND (@receipt IS NULL OR receipt = @receipt)'),
    lapsed: db.prepare('SELECT run_id, until, receipt, door FROM leases WHERE until < ? ORDER BY until, run_id LIMIT ?'),
    end: db.prepare('DELETE FROM leases WHERE run_id = @runId AND (@until IS NULL OR until = @until) AND (@receipt IS NULL OR receipt = @receipt)'),
  };
}
