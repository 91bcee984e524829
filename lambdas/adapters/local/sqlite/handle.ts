import type { RunAgentInput } from '@ag-ui/core';
import type Database from 'better-sqlite3';
import { StoreUnavailable } from '../../../core/errors.js';
import type { Run } from '../../../core/model.js';
import type { RecordProjections } from '../../../core/ports.js';
import { decodePageCursor, encodePageCursor } from '../../page-cursor.js';

export type Row = Record<string, unknown>;
export type RunRow = { body: string };

/** SQLite's answers that say "not now" (the disk is full, the file cannot be written) rather than "never". */
const UNAVAILABLE = /^SQLITE_(FULL|IOERR|BUSY|LOCKED|READONLY|CANTOPEN|PROTOCOL)/;

/**
 * What the SQLite record's parts share: the connection, what the store computes beside each run
 * it writes, the places table (a thread's and a tenant's places, each a row per run holding one),
 * and a run's row read back. better-sqlite3 is synchronous: every method of a part runs whole
 * before any other code of this thread, so a read-check-write is one step; the writes that span
 * rows are transactions too, so a crash leaves all of them or none.
 */
export class SqliteHandle {
  /** Who holds each place: a thread's (`t:` and its key) and a tenant's (`n:` and the tenant), see PLACE_HOLDERS. */
  readonly places: {
    hold: Database.Statement;
    holds: Database.Statement;
    holders: Database.Statement;
    unhold: Database.Statement;
    unholdAll: Database.Statement;
    unholdTenants: Database.Statement;
  };
  private readonly getInput: Database.Statement;
  /** An audit record written once (`INSERT OR IGNORE`: its id is made so a second write is nothing). */
  readonly appendAudit: Database.Statement;

  constructor(
    readonly db: Database.Database,
    readonly projections: RecordProjections,
  ) {
    this.places = {
      hold: db.prepare('INSERT OR IGNORE INTO places (owner, run_id) VALUES (?, ?)'),
      holds: db.prepare('SELECT 1 FROM places WHERE owner = ? AND run_id = ?'),
      holders: db.prepare('SELECT run_id FROM places WHERE owner = ? ORDER BY run_id'),
      unhold: db.prepare('DELETE FROM places WHERE owner = ? AND run_id = ?'),
      unholdAll: db.prepare('DELETE FROM places WHERE owner = ?'),
      unholdTenants: db.prepare("DELETE FROM places WHERE owner LIKE 'n:%'"),
    };
    this.getInput = db.prepare('SELECT input FROM run_inputs WHERE run_id = ?');
    this.appendAudit = db.prepare('INSERT OR IGNORE INTO audit_records (id, tenant, body) VALUES (?, ?, ?)');
  }

  /** The audit records a run's write implies, written in the write's transaction (`RecordProjections.auditOf`). */
  writeAudits(run: Run, change: 'created' | Partial<Run>): void {
    for (const record of this.projections.auditOf?.(run, change) ?? []) this.appendAudit.run(record.id, record.tenant ?? null, JSON.stringify(record));
  }

  /** A run as its row says, its input read and parsed only when asked for (most writes of a run never look at it). */
  readonly runOf = (row: RunRow): Run => {
    const run = JSON.parse(row.body) as Run;
    const { getInput } = this;
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
  writing<T>(write: () => T): T {
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

/** A page's place in a listing: whose listing ('' for every tenant's) and the last row it gave. */
type Cursor<Key extends string> = { tenant: string } & Record<Key, string>;

export function encodeCursor(cursor: Cursor<string>): string {
  return encodePageCursor(cursor);
}

/** A cursor comes back from a caller: accept only the shape we issue, for the listing asking. */
export function decodeCursor<Key extends string>(cursor: string, tenant: string, keys: readonly Key[]): Cursor<Key> {
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
export function idColumn(runId: string): string {
  return JSON.stringify(runId);
}

export function idOf(column: string): string {
  return JSON.parse(column) as string;
}
