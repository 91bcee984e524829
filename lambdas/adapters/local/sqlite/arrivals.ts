import type Database from 'better-sqlite3';
import type { Arrival } from '../../../core/model.js';
import type { ArrivalNotes } from '../../../core/ports.js';
import type { SqliteHandle } from './handle.js';

/** Arrival notes: a row per request on its way, `claimed` once a sweep took it. */
export class SqliteArrivals implements ArrivalNotes {
  private readonly statements: ReturnType<typeof prepare>;

  constructor(handle: SqliteHandle) {
    this.statements = prepare(handle.db);
  }

  async note(arrival: Arrival): Promise<boolean> {
    return this.statements.noteArrival.run({ runId: arrival.runId, at: arrival.at, body: JSON.stringify(arrival) }).changes === 1;
  }

  async claim(arrival: Arrival): Promise<boolean> {
    return this.statements.claimArrival.run(arrival.runId, arrival.at).changes === 1;
  }

  async forget(runId: string): Promise<void> {
    this.statements.forgetArrival.run(runId);
  }

  async list(before: string, limit: number): Promise<Arrival[]> {
    return (this.statements.listArrivals.all(before, limit) as Array<{ body: string }>).map((row) => JSON.parse(row.body) as Arrival);
  }
}

function prepare(db: Database.Database) {
  return {
    noteArrival: db.prepare(
      'INSERT INTO arrivals (run_id, at, body) VALUES (@runId, @at, @body) ON CONFLICT (run_id) DO UPDATE SET at = @at, body = @body WHERE claimed = 0',
    ),
    claimArrival: db.prepare('UPDATE arrivals SET claimed = 1 WHERE run_id = ? AND at = ?'),
    forgetArrival: db.prepare('DELETE FROM arrivals WHERE run_id = ?'),
    listArrivals: db.prepare('SELECT body FROM arrivals WHERE at < ? ORDER BY at LIMIT ?'),
  };
}
