import type { CoreDeps } from './deps.js';
import { isTerminal, type Run, type StoredEvent } from './model.js';
import type { ChangeFeed } from './ports.js';

const PAGE = 500;

/**
 * A run's changes from the moment it is made: what a reader needs to follow the run without
 * reading what it was told. A door that makes one before it starts a run knows the run as it was
 * created (queued, nothing stored) and needs no read before its first event.
 */
export class RunWatch {
  /** Events handed over by the feed and not yet taken. */
  fresh: StoredEvent[] = [];
  /** The run as its last status change left it. */
  latest: Run | undefined;
  /** Bumped by every change, so a change that lands while the reader is busy is never slept through. */
  changes = 0;
  private wake: (() => void) | undefined;
  private readonly unsubscribe: () => void;

  constructor(feed: ChangeFeed, runId: string) {
    this.unsubscribe = feed.subscribe(runId, (change) => {
      if (change.kind === 'events') this.fresh.push(...change.events);
      else this.latest = change.run;
      this.rouse();
    });
  }

  rouse(): void {
    this.changes += 1;
    this.wake?.();
    this.wake = undefined;
  }

  /** Resolves at the next change, or at once if there was one since `seen`. */
  async changeSince(seen: number): Promise<void> {
    if (this.changes === seen) await new Promise<void>((resolve) => (this.wake = resolve));
  }

  close(): void {
    this.unsubscribe();
  }
}

/**
 * A run's stored events after `afterSeq`, then its new ones as they are stored, until the run
 * settles and its last event is read. Every event comes from the record: the feed only wakes
 * the reader (and hands over what was just stored, so a live reader need not read it back).
 * `created`: the run as `startRun` created it, watched since before (the reader then reads
 * nothing until the feed says something it cannot follow); the reader closes the watch.
 */
export async function* followRun(
  deps: Pick<CoreDeps, 'store' | 'feed'>,
  runId: string,
  afterSeq: number,
  signal?: AbortSignal,
  created?: { run: Run; watch: RunWatch },
): AsyncGenerator<StoredEvent> {
  let cursor = afterSeq;
  const watch = created?.watch ?? new RunWatch(deps.feed, runId);
  const rouse = () => watch.rouse();
  signal?.addEventListener('abort', rouse, { once: true });
  try {
    if (created) watch.latest ??= created.run;
    else watch.latest = (await deps.store.getRun(runId)) ?? watch.latest;
    // The stored log is read at the start (unless the run was watched since it was created), past
    // a full page, and when what the feed handed over does not follow the cursor; otherwise a wake
    // that only changed the status costs no read.
    let mustRead = !created;
    while (!signal?.aborted) {
      const seen = watch.changes;
      const handed = watch.fresh.filter((e) => e.seq > cursor);
      watch.fresh = [];
      const before = watch.latest;
      const behind = before !== undefined && isTerminal(before.status) && cursor < (before.lastSeq ?? 0);
      const follows = handed.length > 0 && handed[0].seq === cursor + 1;
      const batch: StoredEvent[] = follows
        ? handed
        : mustRead || handed.length > 0 || behind
          ? await deps.store.readEvents(runId, cursor, PAGE)
          : [];
      mustRead = !follows && batch.length === PAGE;
      const latest = watch.latest;
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
      await watch.changeSince(seen);
    }
  } finally {
    watch.close();
    signal?.removeEventListener('abort', rouse);
  }
}
