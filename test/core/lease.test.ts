import { describe, expect, it } from 'vitest';
import type { LeaseAs, RunStore } from '../../lambdas/core/ports.js';
import { eventually, Gate, harness, type Harness } from '../support/core-harness.js';
import { useStore } from '../support/stores.js';

const stores = useStore();

// Inside the test agent's time limits (60 s idle), which a silent agent would otherwise reach first.
const LEASE = { renewMs: 10_000, lapseMs: 30_000 };

/** The store of a dispatcher whose renewals of `runId`'s lease wait at `gate`: a dispatcher paused (or, never opened, dead) at its renewal. */
function renewalsHeld(store: RunStore, runId: string, gate: Gate): RunStore {
  return Object.assign(Object.create(store) as RunStore, {
    leases: Object.assign(Object.create(store.leases) as RunStore['leases'], {
      renew: async (id: string, until: number, receipt?: string) => {
        if (id === runId) await gate.wait;
        return store.leases.renew(id, until, receipt);
      },
    }),
  });
}

/** An agent that sends its first text, then waits for `more` before it sends the rest and finishes. */
function pausing(h: Harness, more: Gate): void {
  h.provider.script = async function* (input) {
    yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
    yield { type: 'TEXT_MESSAGE_START', messageId: 'm1', role: 'assistant' };
    yield { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: 'first' };
    await more.wait;
    yield { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: ' and the rest' };
    yield { type: 'TEXT_MESSAGE_END', messageId: 'm1' };
    yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId };
  };
}

describe('a dispatcher’s lease on its run', () => {
  it('keeps the run of a live dispatcher whose agent is silent past the lapse: its timer renews the lease', async () => {
    const h = await harness(await stores.freshStore(), { settings: { lease: LEASE } });
    const more = new Gate();
    pausing(h, more);
    await h.send('hello');
    await eventually(async () => expect((await h.events('run-1')).length).toBe(3), 20_000);
    for (let i = 0; i < 4; i++) {
      h.clock.advance(LEASE.renewMs);
      // Each renewal lands before the next step of the clock.
      await eventually(async () => expect((await h.store.leases.lapsed(h.clock.now() + LEASE.lapseMs + 1, 10)).map((l) => l.until)).toEqual([h.clock.now() + LEASE.lapseMs]), 20_000);
    }
    expect(await h.gateway.failLapsed()).toEqual({ failed: 0, released: 0, redelivered: 0 });
    more.open();
    await h.settled();
    expect(await h.store.runs.get('run-1')).toMatchObject({ status: 'completed' });
    expect(await h.store.leases.lapsed(Number.MAX_SAFE_INTEGER, 10)).toEqual([]);
  });

  it('fails the run of a dispatcher that died dispatch_lost once its lease lapsed, and lets its thread-queue message go', async () => {
    const base = await stores.freshStore();
    const dead = new Gate();
    const h = await harness(renewalsHeld(base, 'run-1', dead), { settings: { lease: LEASE }, receipt: (runId) => `receipt-${runId}` });
    const released: string[] = [];
    Object.assign(h.queue, { release: async (receipt: string) => void released.push(receipt) });
    pausing(h, new Gate());
    await h.send('hello');
    await eventually(async () => expect((await h.events('run-1')).length).toBe(3), 20_000);

    h.clock.advance(LEASE.lapseMs - 1);
    expect(await h.gateway.failLapsed()).toEqual({ failed: 0, released: 0, redelivered: 0 });
    h.clock.advance(2);
    expect(await h.gateway.failLapsed()).toEqual({ failed: 1, released: 1, redelivered: 0 });
    expect(released).toEqual(['receipt-run-1']);
    expect(await base.runs.get('run-1')).toMatchObject({ status: 'failed', reason: 'dispatch_lost' });
    const events = await h.events('run-1');
    expect(events.map((e) => e.event.type)).toEqual(['RUN_STARTED', 'TEXT_MESSAGE_START', 'TEXT_MESSAGE_CONTENT', 'RUN_ERROR']);
    expect(events.at(-1)?.event).toMatchObject({ code: 'dispatch_lost' });
    expect(await base.threads.get(h.thread)).toMatchObject({ unsettled: 0 });
    // Done once: a second sweep finds nothing.
    expect(await h.gateway.failLapsed()).toEqual({ failed: 0, released: 0, redelivered: 0 });
  });

  it('delivers again, at once, the message of a run still queued whose dispatcher died after taking its lease and before marking it running', async () => {
    const base = await stores.freshStore();
    const dead = new Gate();
    // The dispatcher took the lease, then died at the write that marks the run running (it never returns).
    const store = Object.assign(Object.create(base) as RunStore, {
      runs: Object.assign(Object.create(base.runs) as RunStore['runs'], {
        transition: async (...args: Parameters<RunStore['runs']['transition']>) => {
          if (args[0] === 'run-1' && args[2].status === 'running') await dead.wait;
          return base.runs.transition(...args);
        },
      }),
    });
    // Its renewals wait with it: a dead dispatcher's timer fires no more.
    const h = await harness(renewalsHeld(store, 'run-1', dead), { settings: { lease: LEASE }, receipt: (runId) => `receipt-${runId}` });
    const redelivered: string[] = [];
    Object.assign(h.queue, { redeliver: async (receipt: string) => void redelivered.push(receipt) });
    void h.send('hello');
    await eventually(async () => expect(await base.leases.lapsed(Number.MAX_SAFE_INTEGER, 10)).toEqual([expect.objectContaining({ runId: 'run-1', receipt: 'receipt-run-1' })]), 20_000);
    expect(await base.runs.get('run-1')).toMatchObject({ status: 'queued' });

    h.clock.advance(LEASE.lapseMs + 1);
    expect(await h.gateway.failLapsed()).toEqual({ failed: 0, released: 0, redelivered: 1 });
    // Not failed: the run was never started, and the next receive of its message runs it.
    expect(redelivered).toEqual(['receipt-run-1']);
    expect(await base.runs.get('run-1')).toMatchObject({ status: 'queued' });
    expect(await base.leases.lapsed(Number.MAX_SAFE_INTEGER, 10)).toEqual([]);
    expect(await h.gateway.failLapsed()).toEqual({ failed: 0, released: 0, redelivered: 0 });
  });

  it('leaves a run started by the next delivery to its dispatcher, when the lease the sweep ended was the dead dispatch’s before it', async () => {
    const base = await stores.freshStore();
    const dead = new Gate();
    let starts = 0;
    let second: Promise<unknown> | undefined;
    let sweeping = false;
    const store = Object.assign(Object.create(base) as RunStore, {
      runs: Object.assign(Object.create(base.runs) as RunStore['runs'], {
        // The first dispatch took its lease and died at the write that marks the run running.
        transition: async (...args: Parameters<RunStore['runs']['transition']>) => {
          if (args[0] === 'run-1' && args[2].status === 'running' && ++starts === 1) await dead.wait;
          return base.runs.transition(...args);
        },
      }),
      leases: Object.assign(Object.create(base.leases) as RunStore['leases'], {
        // The message came again: its next dispatcher takes a lease of its own and starts the run
        // just after the sweep ended the lapsed lease, and before the sweep reads the run.
        end: async (runId: string, as?: LeaseAs) => {
          const ended = await base.leases.end(runId, as);
          if (sweeping && as?.until !== undefined && second === undefined) {
            second = h.gateway.dispatchRun('run-1', { receipt: 'receipt-2' });
            await eventually(async () => expect((await h.events('run-1')).length).toBe(3), 20_000);
          }
          return ended;
        },
      }),
    });
    const h = await harness(renewalsHeld(store, 'run-1', dead), { settings: { lease: LEASE }, receipt: () => 'receipt-1' });
    const more = new Gate();
    pausing(h, more);
    void h.send('hello');
    await eventually(async () => expect(await base.leases.lapsed(Number.MAX_SAFE_INTEGER, 10)).toEqual([expect.objectContaining({ receipt: 'receipt-1' })]), 20_000);
    h.clock.advance(LEASE.lapseMs + 1);

    sweeping = true;
    expect(await h.gateway.failLapsed()).toEqual({ failed: 0, released: 0, redelivered: 0 });
    expect(await base.runs.get('run-1')).toMatchObject({ status: 'running', receipt: 'receipt-2' });

    more.open();
    expect(await second).toBe('ran');
    expect(await base.runs.get('run-1')).toMatchObject({ status: 'completed', lastSeq: 6 });
    expect((await h.events('run-1')).map((e) => e.event.type)).toEqual(['RUN_STARTED', 'TEXT_MESSAGE_START', 'TEXT_MESSAGE_CONTENT', 'TEXT_MESSAGE_CONTENT', 'TEXT_MESSAGE_END', 'RUN_FINISHED']);
  });

  it('leaves the lease of the next delivery’s dispatcher alone when the dispatch before it was only stalled, not dead', async () => {
    const base = await stores.freshStore();
    const stalled = new Gate();
    const timerStalled = new Gate();
    let starts = 0;
    const done: string[] = [];
    const store = Object.assign(Object.create(base) as RunStore, {
      runs: Object.assign(Object.create(base.runs) as RunStore['runs'], {
        // The first dispatch took its lease and stalled at the write that marks the run running.
        transition: async (...args: Parameters<RunStore['runs']['transition']>) => {
          const first = args[0] === 'run-1' && args[2].status === 'running' && ++starts === 1;
          if (first) await stalled.wait;
          return base.runs.transition(...args);
        },
      }),
      leases: Object.assign(Object.create(base.leases) as RunStore['leases'], {
        // Its timer stalled with it, and wakes after it; both of its late writes to the lease are counted when they land.
        renew: async (runId: string, until: number, receipt?: string) => {
          if (receipt === 'receipt-1') await timerStalled.wait;
          const renewed = await base.leases.renew(runId, until, receipt);
          if (receipt === 'receipt-1') done.push(`renew ${renewed}`);
          return renewed;
        },
        end: async (runId: string, as?: LeaseAs) => {
          const ended = await base.leases.end(runId, as);
          if (as?.receipt === 'receipt-1') done.push(`end ${ended}`);
          return ended;
        },
      }),
    });
    const results: string[] = [];
    const life = { dispatched: (d: { runId: string; result?: string }) => void results.push(String(d.result)) };
    const h = await harness(store, { settings: { lease: LEASE }, receipt: () => 'receipt-1', life });
    Object.assign(h.queue, { redeliver: async () => undefined });
    const more = new Gate();
    pausing(h, more);
    void h.send('hello');
    await eventually(async () => expect(await base.leases.lapsed(Number.MAX_SAFE_INTEGER, 10)).toEqual([expect.objectContaining({ receipt: 'receipt-1' })]), 20_000);
    h.clock.advance(LEASE.lapseMs + 1);
    expect(await h.gateway.failLapsed()).toEqual({ failed: 0, released: 0, redelivered: 1 });

    // The message's next delivery runs the run, under a lease of its own.
    const second = h.gateway.dispatchRun('run-1', { receipt: 'receipt-2' });
    await eventually(async () => expect((await h.events('run-1')).length).toBe(3), 20_000);
    // The stalled dispatch wakes: it finds the run started and its lease the next one's, and
    // leaves both (no renewal of its lands, and it ends nothing).
    stalled.open();
    timerStalled.open();
    await eventually(() => expect(results).toEqual(['superseded']), 20_000);
    expect(done.filter((write) => write !== 'renew false')).toEqual([]);
    expect(await base.leases.lapsed(Number.MAX_SAFE_INTEGER, 10)).toEqual([expect.objectContaining({ runId: 'run-1', receipt: 'receipt-2' })]);

    // The live dispatcher's renewals still find its lease, and a sweep past the old lapse leaves its run.
    h.clock.advance(LEASE.renewMs);
    await eventually(async () => expect((await base.leases.lapsed(Number.MAX_SAFE_INTEGER, 10))[0]?.until).toBe(h.clock.now() + LEASE.lapseMs), 20_000);
    expect(await h.gateway.failLapsed()).toEqual({ failed: 0, released: 0, redelivered: 0 });
    more.open();
    expect(await second).toBe('ran');
    expect(await base.runs.get('run-1')).toMatchObject({ status: 'completed', lastSeq: 6 });
    expect(await base.leases.lapsed(Number.MAX_SAFE_INTEGER, 10)).toEqual([]);
  });

  it('lets a dispatcher paused past its lease find its run failed, and write nothing over the failure', async () => {
    const base = await stores.freshStore();
    const paused = new Gate();
    const h = await harness(renewalsHeld(base, 'run-1', paused), { settings: { lease: LEASE } });
    const more = new Gate();
    pausing(h, more);
    await h.send('hello');
    await eventually(async () => expect((await h.events('run-1')).length).toBe(3), 20_000);
    h.clock.advance(LEASE.lapseMs + 1);
    expect(await h.gateway.failLapsed()).toMatchObject({ failed: 1 });
    const failed = await base.runs.get('run-1');

    // It wakes: its renewal finds the lease ended, and what the agent says next is written nowhere.
    paused.open();
    more.open();
    await h.settled();
    expect(await base.runs.get('run-1')).toEqual(failed);
    expect((await h.events('run-1')).map((e) => e.event.type)).toEqual(['RUN_STARTED', 'TEXT_MESSAGE_START', 'TEXT_MESSAGE_CONTENT', 'RUN_ERROR']);
  });

  it('lets a reader that hears nothing of a running run for a lapse find its dispatcher dead, and end its stream dispatch_lost before any sweep', async () => {
    // A lapse short enough to be waited out: the reader's quiet is real time, the lease's end the gateway's clock.
    const quick = { renewMs: 100, lapseMs: 300 };
    const base = await stores.freshStore();
    const h = await harness(renewalsHeld(base, 'run-1', new Gate()), { settings: { lease: quick }, receipt: (runId) => `receipt-${runId}` });
    const released: string[] = [];
    Object.assign(h.queue, { release: async (receipt: string) => void released.push(receipt) });
    pausing(h, new Gate());
    await h.send('hello');
    await eventually(async () => expect((await h.events('run-1')).length).toBe(3), 20_000);
    h.clock.advance(quick.lapseMs + 1);

    const read: string[] = [];
    for await (const stored of h.gateway.followRun('run-1', 0)) read.push(stored.event.type);
    expect(read).toEqual(['RUN_STARTED', 'TEXT_MESSAGE_START', 'TEXT_MESSAGE_CONTENT', 'RUN_ERROR']);
    expect(await base.runs.get('run-1')).toMatchObject({ status: 'failed', reason: 'dispatch_lost' });
    expect(released).toEqual(['receipt-run-1']);
    // The reader did the sweep's work for this lease: nothing is left for the sweep.
    expect(await h.gateway.failLapsed()).toEqual({ failed: 0, released: 0, redelivered: 0 });
  });

  it('lets an A2A stream of the task find its dispatcher dead too, and end on the failed task', async () => {
    const quick = { renewMs: 100, lapseMs: 300 };
    const h = await harness(renewalsHeld(await stores.freshStore(), 'run-1', new Gate()), { settings: { lease: quick } });
    pausing(h, new Gate());
    await h.send('hello');
    await eventually(async () => expect((await h.events('run-1')).length).toBe(3), 20_000);
    h.clock.advance(quick.lapseMs + 1);
    const states: number[] = [];
    for await (const { payload } of h.gateway.tasks.stream((await h.store.runs.get('run-1'))!)) {
      if (payload?.$case === 'statusUpdate') states.push(payload.value.status!.state);
    }
    // The task's last word: FAILED (A2A 1.0's TaskState 4).
    expect(states.at(-1)).toBe(4);
    expect(await h.store.runs.get('run-1')).toMatchObject({ status: 'failed', reason: 'dispatch_lost' });
  });

  it('lets a reader that hears nothing of a live dispatcher\'s run for longer than a lapse leave it running: its lease was renewed', async () => {
    const quick = { renewMs: 100, lapseMs: 300 };
    const h = await harness(await stores.freshStore(), { settings: { lease: quick } });
    const more = new Gate();
    pausing(h, more);
    await h.send('hello');
    await eventually(async () => expect((await h.events('run-1')).length).toBe(3), 20_000);
    const read: string[] = [];
    const reading = (async () => {
      for await (const stored of h.gateway.followRun('run-1', 0)) read.push(stored.event.type);
    })();
    // Quiet for several lapses, each checked by the reader: the lease stays the live dispatcher's.
    const checked = h.store.leases.get.bind(h.store.leases);
    let checks = 0;
    Object.assign(h.store.leases, { get: async (runId: string) => ((checks += 1), checked(runId)) });
    await eventually(async () => expect(checks).toBeGreaterThanOrEqual(2), 20_000);
    expect(await h.store.runs.get('run-1')).toMatchObject({ status: 'running' });
    more.open();
    await reading;
    expect(read).toEqual(['RUN_STARTED', 'TEXT_MESSAGE_START', 'TEXT_MESSAGE_CONTENT', 'TEXT_MESSAGE_CONTENT', 'TEXT_MESSAGE_END', 'RUN_FINISHED']);
    expect(await h.store.runs.get('run-1')).toMatchObject({ status: 'completed' });
  });

  it('takes no lease on one machine, where a restart fails a run left running', async () => {
    const h = await harness(await stores.freshStore());
    await h.send('hello');
    await h.settled();
    expect(await h.store.runs.get('run-1')).toMatchObject({ status: 'completed' });
    expect(await h.store.leases.lapsed(Number.MAX_SAFE_INTEGER, 10)).toEqual([]);
  });
});
