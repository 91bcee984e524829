import { describe, expect, it } from 'vitest';
import type { DynamoStore } from '../../../lambdas/adapters/aws/dynamodb/store/store.js';
import { PollingChangeFeed, READER_POLLING } from '../../../lambdas/adapters/aws/polling-change-feed.js';
import { followRun } from '../../../lambdas/core/follow-run.js';
import type { Run, StoredEvent } from '../../../lambdas/core/model.js';
import type { RunChange } from '../../../lambdas/core/ports.js';
import { useDynalite } from '../../support/dynalite.js';
import { aRun, newId } from '../../support/store-fixtures.js';

const dynamo = useDynalite();

/** A running run on a thread of its own. */
function aRunningRun(): Run {
  return aRun({ status: 'running', threadId: newId('thread') });
}

function events(runId: string, from: number, to: number): StoredEvent[] {
  const list: StoredEvent[] = [];
  for (let seq = from; seq <= to; seq += 1) list.push({ runId, seq, event: { type: 'CUSTOM', name: 'n', value: seq } });
  return list;
}

/**
 * Polls run when the test says so. Every delay the feed asks for is recorded; `tick` runs the
 * pending poll and resolves when the feed has scheduled the next one (or stopped).
 */
class ManualScheduler {
  readonly delays: number[] = [];
  pending: (() => void) | undefined;
  private waiting: (() => void) | undefined;

  readonly schedule = (poll: () => void, ms: number) => {
    this.delays.push(ms);
    this.pending = poll;
    this.waiting?.();
    return () => {
      if (this.pending === poll) this.pending = undefined;
    };
  };

  /** Resolves once a poll is scheduled. */
  scheduled(): Promise<void> {
    if (this.pending) return Promise.resolve();
    return new Promise((resolve) => (this.waiting = resolve));
  }

  async tick(): Promise<void> {
    await this.scheduled();
    const poll = this.pending as () => void;
    this.pending = undefined;
    poll();
    await this.scheduled();
  }
}

async function aStoredRun(store: DynamoStore): Promise<Run> {
  const run = aRunningRun();
  await store.runs.create(run);
  return run;
}

function recorder() {
  const changes: RunChange[] = [];
  return {
    changes,
    listener: (change: RunChange) => changes.push(change),
    seqs: () => changes.flatMap((c) => (c.kind === 'events' ? c.events.map((e) => e.seq) : [])),
    statuses: () => changes.flatMap((c) => (c.kind === 'status' ? [c.run.status] : [])),
  };
}

describe('the polling change feed', () => {
  it('wakes a subscriber once at the start, so it reads what was stored before it subscribed', async () => {
    const store = await dynamo.freshStore();
    const run = await aStoredRun(store);
    await store.events.append(events(run.runId, 1, 2));
    const scheduler = new ManualScheduler();
    const seen = recorder();
    new PollingChangeFeed(store, { schedule: scheduler.schedule }).subscribe(run.runId, seen.listener);
    await scheduler.scheduled();
    expect(seen.statuses()).toEqual(['running']);
    expect(seen.seqs()).toEqual([]);
  });

  it('hands a subscriber the events another function stored after its cursor, then the run’s new status', async () => {
    const store = await dynamo.freshStore();
    const run = await aStoredRun(store);
    await store.events.append(events(run.runId, 1, 2));
    const scheduler = new ManualScheduler();
    const seen = recorder();
    new PollingChangeFeed(store, { schedule: scheduler.schedule }).subscribe(run.runId, seen.listener);
    await scheduler.scheduled();

    await store.events.append(events(run.runId, 3, 5));
    await scheduler.tick();
    expect(seen.seqs()).toEqual([3, 4, 5]);

    await store.runs.transition(run.runId, ['running'], { status: 'completed', lastSeq: 5 });
    await scheduler.tick();
    await scheduler.tick();
    expect(seen.statuses()).toEqual(['running', 'completed']);
    expect(seen.seqs()).toEqual([3, 4, 5]);
  });

  it('tells a cancel requested elsewhere to the running run’s dispatcher', async () => {
    const store = await dynamo.freshStore();
    const run = await aStoredRun(store);
    const scheduler = new ManualScheduler();
    const seen = recorder();
    new PollingChangeFeed(store, { schedule: scheduler.schedule }).subscribe(run.runId, seen.listener);
    await scheduler.scheduled();
    await store.runs.transition(run.runId, ['running'], { status: 'cancelling', cancelRequested: true });
    await scheduler.tick();
    expect(seen.statuses()).toEqual(['running', 'cancelling']);
  });

  it('polls every 50 ms while something happens and backs off, doubling, to 1 s while nothing does', async () => {
    const store = await dynamo.freshStore();
    const run = await aStoredRun(store);
    const scheduler = new ManualScheduler();
    new PollingChangeFeed(store, { schedule: scheduler.schedule }).subscribe(run.runId, () => {});
    await scheduler.scheduled();
    for (let i = 0; i < 5; i += 1) await scheduler.tick();
    expect(scheduler.delays).toEqual([100, 200, 400, 800, 1000, 1000]);

    await store.events.append(events(run.runId, 1, 1));
    await scheduler.tick();
    await scheduler.tick();
    expect(scheduler.delays.slice(-2)).toEqual([50, 100]);
  });

  it('as a reader, keeps polling every 50 ms for a second until the run’s first event, then backs off as any subscription', async () => {
    const store = await dynamo.freshStore();
    const run = await aStoredRun(store);
    const scheduler = new ManualScheduler();
    new PollingChangeFeed(store, { ...READER_POLLING, schedule: scheduler.schedule }).subscribe(run.runId, () => {});
    await scheduler.scheduled();
    // Its polls' intervals add up to the second (the first poll and 19 more, 50 ms apart); then it doubles.
    for (let i = 0; i < 21; i += 1) await scheduler.tick();
    expect(scheduler.delays).toEqual([...Array.from({ length: 19 }, () => 50), 100, 200, 400]);

    await store.events.append(events(run.runId, 1, 1));
    await scheduler.tick();
    // Its first event read, a quiet poll doubles at once: a streaming run's reader costs no more than before.
    await scheduler.tick();
    await scheduler.tick();
    expect(scheduler.delays.slice(-3)).toEqual([50, 100, 200]);
  });

  it('as a reader of a queued run, reads the run alone, at most every 250 ms, and its first events in the poll that sees it start', async () => {
    const store = await dynamo.freshStore();
    const run = aRun({ status: 'queued', threadId: newId('thread') });
    await store.runs.create(run);
    let eventReads = 0;
    const counting = {
      runs: store.runs,
      events: {
        lastSeq: (runId: string) => store.events.lastSeq(runId),
        read: (...args: Parameters<typeof store.events.read>) => ((eventReads += 1), store.events.read(...args)),
      },
    } as unknown as typeof store;
    const scheduler = new ManualScheduler();
    const seen = recorder();
    new PollingChangeFeed(counting, { ...READER_POLLING, schedule: scheduler.schedule }).subscribe(run.runId, seen.listener);
    await scheduler.scheduled();
    for (let i = 0; i < 24; i += 1) await scheduler.tick();
    expect(scheduler.delays.slice(-3)).toEqual([250, 250, 250]);
    expect(eventReads).toBe(0);

    // Started, with its first event stored before the next poll: that poll hands over both.
    await store.runs.transition(run.runId, ['queued'], { status: 'running' });
    await store.events.append(events(run.runId, 1, 1));
    await scheduler.tick();
    expect(seen.statuses().at(-1)).toBe('running');
    expect(seen.seqs()).toEqual([1]);
    expect(eventReads).toBe(1);
    expect(scheduler.delays.at(-1)).toBe(50);
  });

  it('hands this function’s own changes over at once, and does not read them back as news', async () => {
    const store = await dynamo.freshStore();
    const run = await aStoredRun(store);
    const scheduler = new ManualScheduler();
    const seen = recorder();
    const feed = new PollingChangeFeed(store, { schedule: scheduler.schedule });
    feed.subscribe(run.runId, seen.listener);
    await scheduler.scheduled();

    const mine = events(run.runId, 1, 2);
    await store.events.append(mine);
    feed.publish({ kind: 'events', runId: run.runId, events: mine });
    expect(seen.seqs()).toEqual([1, 2]);

    await scheduler.tick();
    expect(seen.seqs()).toEqual([1, 2]);
    expect(scheduler.delays).toEqual([100, 200]);
  });

  it('stops reading the store once unsubscribed', async () => {
    const store = await dynamo.freshStore();
    const run = await aStoredRun(store);
    const scheduler = new ManualScheduler();
    const seen = recorder();
    const unsubscribe = new PollingChangeFeed(store, { schedule: scheduler.schedule }).subscribe(run.runId, seen.listener);
    await scheduler.scheduled();
    unsubscribe();
    expect(scheduler.pending).toBeUndefined();
    await store.events.append(events(run.runId, 1, 3));
    expect(seen.seqs()).toEqual([]);
  });

  it('drops what a poll in flight finds once unsubscribed, and schedules nothing more', async () => {
    const store = await dynamo.freshStore();
    const run = await aStoredRun(store);
    const scheduler = new ManualScheduler();
    const seen = recorder();
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    let reading: Promise<Run | undefined> | undefined;
    const gated = {
      events: store.events,
      runs: Object.assign(Object.create(store.runs) as DynamoStore['runs'], { get: (runId: string) => (reading = gate.then(() => store.runs.get(runId))) }),
    };
    const unsubscribe = new PollingChangeFeed(gated, { schedule: scheduler.schedule }).subscribe(run.runId, seen.listener);
    await expect.poll(() => reading !== undefined).toBe(true);
    unsubscribe();
    release();
    await reading;
    // One macrotask turn lets the poll's continuation run to its end.
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen.changes).toEqual([]);
    expect(scheduler.delays).toEqual([]);
  });

  it('keeps polling after a failed read, and says so', async () => {
    const store = await dynamo.freshStore();
    const run = await aStoredRun(store);
    const scheduler = new ManualScheduler();
    const errors: unknown[] = [];
    let failures = 1;
    const flaky = {
      events: store.events,
      runs: Object.assign(Object.create(store.runs) as DynamoStore['runs'], { get: (runId: string) => (failures-- > 0 ? Promise.reject(new Error('throttled')) : store.runs.get(runId)) }),
    };
    const seen = recorder();
    new PollingChangeFeed(flaky, { schedule: scheduler.schedule, onError: (e) => errors.push(e) }).subscribe(run.runId, seen.listener);
    await scheduler.tick();
    expect(errors).toHaveLength(1);
    expect(seen.statuses()).toEqual(['running']);
  });

  it('lets the core’s reader follow a run another function writes, to its end', async () => {
    const store = await dynamo.freshStore();
    const run = await aStoredRun(store);
    await store.events.append(events(run.runId, 1, 2));
    const readerFeed = new PollingChangeFeed(store, { minIntervalMs: 2, maxIntervalMs: 20 });
    const read: number[] = [];
    const reading = (async () => {
      for await (const stored of followRun({ store, feed: readerFeed }, run.runId, 0)) read.push(stored.seq);
    })();
    await expect.poll(() => read).toEqual([1, 2]);
    await store.events.append(events(run.runId, 3, 4));
    await expect.poll(() => read).toEqual([1, 2, 3, 4]);
    await store.events.append(events(run.runId, 5, 5));
    await store.runs.transition(run.runId, ['running'], { status: 'completed', lastSeq: 5 });
    await reading;
    expect(read).toEqual([1, 2, 3, 4, 5]);
  });
});
