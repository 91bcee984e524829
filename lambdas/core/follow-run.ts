import type { Core, CoreDeps, LapseCheck } from './deps.js';
import { isTerminal, type Run, type StoredEvent } from './model.js';
import type { ChangeFeed } from './ports.js';
import { closingLog } from './log.js';

const PAGE = 500;
/** About this much of a run's events is read at once: a page of large events is fewer of them. */
const PAGE_BYTES = 1024 * 1024;
/** The first page is short (its events' size is not known yet); it grows to `PAGE` for small ones. */
const FIRST_PAGE = 4;
/** Events handed over by the feed are kept for a reader that has not taken them up to this much; past it, it reads them from the store. */
const FRESH_BYTES = 1024 * 1024;

/**
 * A run's changes from the moment it is made: what a reader needs to follow the run without
 * reading what it was told. A door that makes one before it starts a run knows the run as it was
 * created (queued, nothing stored) and needs no read before its first event.
 */
export class RunWatch {
  /** Events handed over by the feed and not yet taken. */
  private fresh: StoredEvent[] = [];
  /** What `fresh` holds, about; past `FRESH_BYTES` it is dropped and `dropped` set, so a reader that does not take costs no more. */
  private freshBytes = 0;
  private dropped = false;
  /** The run as its last status change left it. */
  latest: Run | undefined;
  /** Bumped by every change, so a change that lands while the reader is busy is never slept through. */
  changes = 0;
  private wake: (() => void) | undefined;
  private readonly unsubscribe: () => void;

  constructor(feed: ChangeFeed, runId: string) {
    this.unsubscribe = feed.subscribe(runId, (change) => {
      if (change.kind === 'events') this.hand(change.events);
      else this.latest = change.run;
      this.rouse();
    });
  }

  /** What was handed over since the last call (and whether some was dropped, to be read from the store). */
  take(): { events: StoredEvent[]; dropped: boolean } {
    const taken = { events: this.fresh, dropped: this.dropped };
    this.fresh = [];
    this.freshBytes = 0;
    this.dropped = false;
    return taken;
  }

  private hand(events: StoredEvent[]): void {
    if (this.dropped) return;
    for (const event of events) this.freshBytes += sizeOf(event);
    if (this.freshBytes > FRESH_BYTES) {
      this.fresh = [];
      this.freshBytes = 0;
      this.dropped = true;
    } else {
      this.fresh.push(...events);
    }
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
  deps: Pick<CoreDeps, 'store' | 'feed'> & Pick<Core, 'lapse'>,
  runId: string,
  afterSeq: number,
  signal?: AbortSignal,
  created?: { run: Run; watch: RunWatch },
): AsyncGenerator<StoredEvent> {
  let cursor = afterSeq;
  const watch = created?.watch ?? new RunWatch(deps.feed, runId);
  const quiet = deps.lapse ? new QuietCheck(watch, deps.lapse, runId) : undefined;
  const rouse = () => watch.rouse();
  signal?.addEventListener('abort', rouse, { once: true });
  try {
    if (created) watch.latest ??= created.run;
    else watch.latest = (await deps.store.runs.get(runId)) ?? watch.latest;
    // The stored log is read at the start (unless the run was watched since it was created), past
    // a full page, and when what the feed handed over does not follow the cursor; otherwise a wake
    // that only changed the status costs no read.
    let mustRead = !created;
    let page = FIRST_PAGE;
    while (!signal?.aborted) {
      const seen = watch.changes;
      const taken = watch.take();
      if (taken.dropped) mustRead = true;
      const handed = taken.dropped ? [] : taken.events.filter((e) => e.seq > cursor);
      const before = watch.latest;
      const ended = before !== undefined && isTerminal(before.status);
      // A settled run's record holds its closing events until the log has them: what comes next may be there.
      const closing = ended ? closingLog(before).filter((e) => e.seq > cursor) : [];
      const fromRecord = closing.length > 0 && closing[0].seq === cursor + 1;
      const behind = ended && cursor < (before.lastSeq ?? 0);
      const follows = handed.length > 0 && handed[0].seq === cursor + 1;
      const read = !follows && !fromRecord && (mustRead || handed.length > 0 || behind);
      const batch: StoredEvent[] = follows ? handed : fromRecord ? closing : read ? await deps.store.events.read(runId, cursor, page) : [];
      mustRead = read && batch.length === page;
      if (read) page = nextPage(page, batch);
      const latest = watch.latest;
      const settled = latest !== undefined && isTerminal(latest.status);
      let progressed = false;
      for (const stored of batch) {
        if (stored.seq <= cursor) continue;
        // A settled run's log ends at its lastSeq: events past a gap its writer left were never seen.
        if (settled && stored.seq > (latest.lastSeq ?? 0)) break;
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
      if (settled && cursor < (latest.lastSeq ?? 0)) {
        // A log with a hole before its closing events (a writer that stopped): a settled run's reader passes it.
        const owed = closingLog(latest).filter((stored) => stored.seq > cursor);
        for (const stored of owed) {
          cursor = stored.seq;
          yield stored;
        }
        if (owed.length > 0) continue;
      }
      if (!latest || (settled && cursor >= (latest.lastSeq ?? 0))) return;
      if (latest.status === 'running' || latest.status === 'cancelling') quiet?.start();
      await watch.changeSince(seen);
    }
  } finally {
    // A check on its way finishes first: its failure's last writes (the message let go) are not left to a frozen function.
    await quiet?.stop();
    watch.close();
    signal?.removeEventListener('abort', rouse);
  }
}

/**
 * A reader's watch on a running run's quiet: one timer a reader, started at its first wait on the
 * running run and re-armed as it fires, never touched by the run's events (a reader wakes for each
 * batch). A firing that finds no change since the one before follows a lapse of quiet at least, and
 * the run's lease is checked then: a dead dispatcher's run is failed between one and two lapses
 * after its last change, and the failure reaches the reader as the next change.
 */
class QuietCheck {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private changesAtLastFiring = -1;
  private stopped = false;
  private firing: Promise<void> | undefined;

  constructor(
    private readonly watch: RunWatch,
    private readonly lapse: LapseCheck,
    private readonly runId: string,
  ) {}

  start(): void {
    if (this.timer !== undefined || this.stopped) return;
    this.changesAtLastFiring = this.watch.changes;
    this.arm();
  }

  /** Stops the timer; resolves once a check on its way is done. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.firing;
  }

  private arm(): void {
    this.timer = setTimeout(() => (this.firing = this.fire()), this.lapse.afterMs);
  }

  private async fire(): Promise<void> {
    const latest = this.watch.latest;
    const running = latest?.status === 'running' || latest?.status === 'cancelling';
    // A check that cannot be made now is made again at the next firing (or by the sweep).
    if (running && this.watch.changes === this.changesAtLastFiring) await this.lapse.check(this.runId).catch(() => undefined);
    this.changesAtLastFiring = this.watch.changes;
    if (!this.stopped) this.arm();
  }
}

function sizeOf(event: StoredEvent): number {
  return event.json?.length ?? 256;
}

/** The next page's length: as many events as about `PAGE_BYTES` of the last page's size make, 1 to `PAGE`. */
function nextPage(page: number, batch: readonly StoredEvent[]): number {
  if (batch.length === 0) return page;
  const bytes = batch.reduce((sum, event) => sum + sizeOf(event), 0);
  return Math.max(1, Math.min(PAGE, Math.floor((page * PAGE_BYTES) / Math.max(bytes, 1))));
}
