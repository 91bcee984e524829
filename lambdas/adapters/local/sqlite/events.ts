import type Database from 'better-sqlite3';
import type { AgUiEventRecord, StoredEvent } from '../../../core/model.js';
import type { EventLog } from '../../../core/ports.js';
import type { SqliteHandle } from './handle.js';

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

/** Run events: rows of consecutive events of one run, written whole (see EVENTS_PER_ROW). */
export class SqliteEventLog implements EventLog {
  private readonly statements: ReturnType<typeof prepare>;
  private readonly insertEvents: (events: StoredEvent[]) => void;
  private readonly insertNewEvents: (events: StoredEvent[]) => number[];

  constructor(private readonly handle: SqliteHandle) {
    const { db } = handle;
    this.statements = prepare(db);
    const { insertEvents, rowAtOrBefore } = this.statements;
    this.insertEvents = db.transaction((events: StoredEvent[]) => {
      for (const [first, count, json] of rowsOf(events)) {
        // The holder's seqs are new for the run: one stored already means two writers, and nothing of this write is kept.
        const before = rowAtOrBefore.get(first.runId, first.seq + count - 1) as { seq: number; count: number } | undefined;
        if (before && before.seq + before.count > first.seq) throw new Error(`run ${first.runId} has an event at seq ${Math.max(first.seq, before.seq)} already`);
        insertEvents.run(first.runId, first.seq, count, json);
      }
    });
    this.insertNewEvents = db.transaction((events: StoredEvent[]) => {
      const taken: number[] = [];
      for (const stored of events) {
        const row = rowAtOrBefore.get(stored.runId, stored.seq) as { seq: number; count: number } | undefined;
        if (row && row.seq + row.count > stored.seq) taken.push(stored.seq);
        else insertEvents.run(stored.runId, stored.seq, 1, jsonOf(stored));
      }
      return taken;
    });
  }

  async append(events: StoredEvent[]): Promise<void> {
    if (events.length === 0) return;
    this.handle.writing(() => this.insertEvents(events));
  }

  async appendNew(events: StoredEvent[]): Promise<number[]> {
    if (events.length === 0) return [];
    return this.handle.writing(() => this.insertNewEvents(events)).sort((a, b) => a - b);
  }

  async read(runId: string, afterSeq: number, limit?: number): Promise<StoredEvent[]> {
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
}

function prepare(db: Database.Database) {
  return {
    insertEvents: db.prepare('INSERT INTO run_events (run_id, seq, count, events) VALUES (?, ?, ?, ?)'),
    rowAtOrBefore: db.prepare('SELECT seq, count FROM run_events WHERE run_id = ? AND seq <= ? ORDER BY seq DESC LIMIT 1'),
    readEvents: db.prepare('SELECT seq, count, events FROM run_events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?'),
    lastSeq: db.prepare('SELECT max(seq + count - 1) AS seq FROM run_events WHERE run_id = ?'),
  };
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
