import type { Run } from '../../core/model.js';
import type { ChangeFeed, RunChange, RunStore } from '../../core/ports.js';

export interface PollingOptions {
  /** The interval after a poll that found something another process wrote. */
  minIntervalMs: number;
  /** The interval an idle subscription backs off to, doubling from the minimum. */
  maxIntervalMs: number;
  /**
   * Until a run's first event, how long a subscription keeps polling at the minimum after it began
   * and after each change before it backs off (the polls' intervals added up): a reader of a run
   * just accepted, or just started, is quick to its first event, whose dispatch takes a queue's
   * hand-off and a few writes. Once events came, it backs off as any subscription does.
   */
  quietMs: number;
  /** The interval a subscription to a queued run backs off to at most: it reads the run alone (a queued run has no events), to be quick to its start. */
  queuedMaxIntervalMs: number;
  /** Events read per poll. */
  page: number;
  /** Told about a poll that failed; the subscription backs off and keeps polling. */
  onError?: (error: unknown) => void;
  /** Runs `poll` after `ms`; returns a cancel. Tests pass a manual scheduler. */
  schedule?: (poll: () => void, ms: number) => () => void;
}

export const DEFAULT_POLLING: PollingOptions = { minIntervalMs: 50, maxIntervalMs: 1_000, quietMs: 0, queuedMaxIntervalMs: 1_000, page: 500 };

/**
 * A caller's reader (the doors): until its run's first event, quick for a second after the run was
 * accepted or last changed (its start), and never more than 250 ms behind a queued run's start. What it costs is counted in the bench's
 * cost model (scenario 6), what it buys in its first event on AWS (scenario 14).
 */
export const READER_POLLING: Partial<PollingOptions> = { quietMs: 1_000, queuedMaxIntervalMs: 250 };

interface Subscription {
  readonly runId: string;
  readonly listener: (change: RunChange) => void;
  /** The seq of the last event this subscription has seen (delivered or published here). */
  cursor: number | undefined;
  /** The run as last delivered (its fingerprint), to tell a change from a re-read. */
  seen: string | undefined;
  interval: number;
  /** How long (the polls' intervals added up) since it began or last found a change. */
  quietFor: number;
  /** Whether a poll brought it events (the run's first event has been read). */
  hadEvents: boolean;
  /** The run's status as last read: a queued run's polls read the run alone. */
  status: Run['status'] | undefined;
  cancel: (() => void) | undefined;
  stopped: boolean;
}

/**
 * The change feed for functions that cannot hear each other: each subscription polls the store
 * (events after the last seq it saw, and the run for its status), every 50 ms while something
 * happens, backing off to 1 s while nothing does. A wake-up is never lost: the first poll always
 * wakes the listener, so a reader re-reads the record once after subscribing.
 *
 * Changes published in this process (a dispatcher's own events, a door's own cancel) are handed
 * to this process's subscribers at once, and the pollers skip them, so a dispatcher does not
 * read back, nor speed up for, what it wrote itself.
 */
export class PollingChangeFeed implements ChangeFeed {
  private readonly options: PollingOptions;
  private readonly subscriptions = new Map<string, Set<Subscription>>();

  constructor(
    private readonly store: Pick<RunStore, 'events' | 'runs'>,
    options: Partial<PollingOptions> = {},
  ) {
    this.options = { ...DEFAULT_POLLING, ...options };
  }

  publish(change: RunChange): void {
    for (const subscription of this.subscriptions.get(change.runId) ?? []) {
      if (change.kind === 'events') {
        const fresh = change.events.filter((event) => subscription.cursor === undefined || event.seq > subscription.cursor);
        if (fresh.length === 0) continue;
        subscription.cursor = Math.max(subscription.cursor ?? 0, ...fresh.map((event) => event.seq));
        subscription.listener({ ...change, events: fresh });
      } else {
        subscription.seen = fingerprint(change.run);
        subscription.listener(change);
      }
    }
  }

  subscribe(runId: string, listener: (change: RunChange) => void): () => void {
    const subscription: Subscription = {
      runId,
      listener,
      cursor: undefined,
      seen: undefined,
      interval: this.options.minIntervalMs,
      quietFor: 0,
      hadEvents: false,
      status: undefined,
      cancel: undefined,
      stopped: false,
    };
    let set = this.subscriptions.get(runId);
    if (!set) this.subscriptions.set(runId, (set = new Set()));
    set.add(subscription);
    void this.poll(subscription);
    return () => {
      subscription.stopped = true;
      subscription.cancel?.();
      set.delete(subscription);
      if (set.size === 0) this.subscriptions.delete(runId);
    };
  }

  private async poll(subscription: Subscription): Promise<void> {
    subscription.cancel = undefined;
    let active = false;
    try {
      active = await this.read(subscription);
    } catch (error) {
      this.options.onError?.(error);
    }
    if (subscription.stopped) return;
    const { minIntervalMs, maxIntervalMs, quietMs, queuedMaxIntervalMs } = this.options;
    subscription.quietFor = active ? 0 : subscription.quietFor + subscription.interval;
    const most = subscription.status === 'queued' ? Math.min(maxIntervalMs, queuedMaxIntervalMs) : maxIntervalMs;
    const waitingForFirst = !subscription.hadEvents && subscription.quietFor < quietMs;
    subscription.interval = active || waitingForFirst ? minIntervalMs : Math.min(most, subscription.interval * 2);
    subscription.cancel = this.schedule(() => void this.poll(subscription), subscription.interval);
  }

  /** One poll: true when it found something another process wrote. */
  private async read(subscription: Subscription): Promise<boolean> {
    const { runId } = subscription;
    let active = false;
    // A queued run has no events: its poll reads the run first, and the log only once the run has
    // left the queue (in the same poll, so its first events are not a poll late). Read before the
    // log, the run is never newer than the events handed with it.
    let run = subscription.status === 'queued' ? await this.store.runs.get(runId) : undefined;
    if (subscription.stopped) return false;
    if (subscription.cursor === undefined) {
      // Events stored before this point are the subscriber's to read; the first status wakes it to do so.
      const lastSeq = await this.store.events.lastSeq(runId);
      if (subscription.stopped) return false;
      subscription.cursor ??= lastSeq;
    } else if (run?.status !== 'queued') {
      const events = await this.store.events.read(runId, subscription.cursor, this.options.page);
      const fresh = events.filter((event) => event.seq > (subscription.cursor as number));
      if (subscription.stopped) return false;
      if (fresh.length > 0) {
        subscription.cursor = fresh[fresh.length - 1].seq;
        subscription.hadEvents = true;
        subscription.listener({ kind: 'events', runId, events: fresh });
        active = true;
      }
    }
    run ??= await this.store.runs.get(runId);
    if (subscription.stopped || !run) return active;
    subscription.status = run.status;
    const print = fingerprint(run);
    if (print !== subscription.seen) {
      const first = subscription.seen === undefined;
      subscription.seen = print;
      subscription.listener({ kind: 'status', runId, run });
      active ||= !first;
    }
    return active;
  }

  private schedule(poll: () => void, ms: number): () => void {
    if (this.options.schedule) return this.options.schedule(poll, ms);
    const timer = setTimeout(poll, ms);
    return () => clearTimeout(timer);
  }
}

/**
 * What a listener may act on: the status, a cancel request, the settled log's end and the asks'
 * states. Built field by field because DynamoDB does not promise an item's attribute order.
 */
function fingerprint(run: Run): string {
  const asks = Object.values(run.asks ?? {})
    .map((ask) => `${ask.id}=${ask.state}`)
    .sort();
  return JSON.stringify([run.status, run.cancelRequested ?? false, run.lastSeq ?? null, run.endedAt ?? null, asks]);
}
