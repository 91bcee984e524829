import type { CoreDeps } from './deps.js';
import { isTerminal, type Run, type StoredEvent } from './model.js';

const PAGE = 500;

/**
 * A run's stored events after `afterSeq`, then its new ones as they are stored, until the run
 * settles and its last event is read. Every event comes from the record: the feed only wakes
 * the reader (and hands over what was just stored, so a live reader need not read it back).
 */
export async function* followRun(
  deps: Pick<CoreDeps, 'store' | 'feed'>,
  runId: string,
  afterSeq: number,
  signal?: AbortSignal,
): AsyncGenerator<StoredEvent> {
  let cursor = afterSeq;
  let fresh: StoredEvent[] = [];
  let latest: Run | undefined;
  // Bumped by every change, so a change that lands while the reader is busy is never slept through.
  let changes = 0;
  let wake: (() => void) | undefined;
  const rouse = () => {
    changes += 1;
    wake?.();
    wake = undefined;
  };
  const unsubscribe = deps.feed.subscribe(runId, (change) => {
    if (change.kind === 'events') fresh.push(...change.events);
    else latest = change.run;
    rouse();
  });
  signal?.addEventListener('abort', rouse, { once: true });
  try {
    latest = (await deps.store.getRun(runId)) ?? latest;
    // The stored log is read at the start, past a full page, and when what the feed handed over
    // does not follow the cursor; otherwise a wake that only changed the status costs no read.
    let mustRead = true;
    while (!signal?.aborted) {
      const seen = changes;
      const handed = fresh.filter((e) => e.seq > cursor);
      fresh = [];
      const behind = latest !== undefined && isTerminal(latest.status) && cursor < (latest.lastSeq ?? 0);
      const follows = handed.length > 0 && handed[0].seq === cursor + 1;
      const batch: StoredEvent[] = follows
        ? handed
        : mustRead || handed.length > 0 || behind
          ? await deps.store.readEvents(runId, cursor, PAGE)
          : [];
      mustRead = !follows && batch.length === PAGE;
      const settled = latest !== undefined && isTerminal(latest.status);
      let progressed = false;
      for (const stored of batch) {
        if (stored.seq <= cursor) continue;
        // Batches are written in parallel, so a later seq can be visible before an earlier one; a
        // live reader stops at the gap and is woken when the whole batch is stored.
        if (stored.seq !== cursor + 1 && !settled) {
          mustRead = true;
          break;
        }
        cursor = stored.seq;
        progressed = true;
        yield stored;
      }
      if (progressed) continue;
      if (!latest || (settled && cursor >= (latest.lastSeq ?? 0))) return;
      if (changes === seen) await new Promise<void>((resolve) => (wake = resolve));
    }
  } finally {
    unsubscribe();
    signal?.removeEventListener('abort', rouse);
  }
}
