import type { Run, StoredEvent } from './model.js';
import type { RunStore } from './ports.js';

/** A settled run's closing events as the log's events: the last of its seqs, held on its record. */
export function closingLog(run: Run): StoredEvent[] {
  const closing = run.closingEvents ?? [];
  const first = (run.lastSeq ?? closing.length) - closing.length + 1;
  return closing.map((event, i) => ({ runId: run.runId, seq: first + i, event }));
}

/** A run's whole log as the record has it: what is stored, then the closing events its record still holds. */
export async function logOf(store: Pick<RunStore, 'events'>, run: Run): Promise<StoredEvent[]> {
  const stored = await store.events.read(run.runId, 0);
  if (!run.closingEvents) return stored;
  const last = stored.at(-1)?.seq ?? 0;
  return [...stored, ...closingLog(run).filter((event) => event.seq > last)];
}
