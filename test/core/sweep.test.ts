import { describe, expect, it } from 'vitest';
import type { Run } from '../../lambdas/core/model.js';
import type { RunStore } from '../../lambdas/core/ports.js';
import { eventually, Gate, harness, TEST_AGENT, type Harness } from '../support/core-harness.js';
import { useStore } from '../support/stores.js';

const stores = useStore();

const BOUND_MS = 16 * 60_000;

/**
 * The store of a door that dies while recording `runId`: its `runs.create` never returns and never
 * writes, as a Lambda environment ended mid-request leaves it; `release` lets a slow one go on.
 */
function dyingAtCreateRun(store: RunStore, runId: string): { store: RunStore; release: () => void } {
  const slow = new Gate();
  return {
    store: Object.assign(Object.create(store) as RunStore, {
      runs: Object.assign(Object.create(store.runs) as RunStore['runs'], {
        create: async (run: Run) => {
          if (run.runId === runId) await slow.wait;
          return store.runs.create(run);
        },
      }),
    }),
    release: () => slow.open(),
  };
}

/** An agent that asks once (an interrupt that expires in an hour), and finishes any answer. */
function asking(h: Harness): void {
  h.provider.script = async function* (input) {
    yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
    if ((input.resume ?? []).length > 0 || input.runId !== 'run-1') {
      yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId };
      return;
    }
    const expiresAt = new Date(h.clock.now() + 3_600_000).toISOString();
    yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId, outcome: { type: 'interrupt', interrupts: [{ id: 'i1', reason: 'confirm', expiresAt }] } };
  };
}

const resume = [{ interruptId: 'i1', status: 'resolved' as const, payload: { approved: true } }];

describe('the sweep of requests that died before recording their run', () => {
  it('drops the thread a first message opened once its note is older than the bound, and a retry of the request then runs', async () => {
    const base = await stores.freshStore();
    const dying = dyingAtCreateRun(base, 'run-1');
    const h = await harness(dying.store, { settings: { tenantConcurrentRuns: 4 } });
    void h.send('hello');
    await eventually(async () => expect(await base.threads.get(h.thread)).toMatchObject({ unsettled: 1 }));

    // A door that is merely slow keeps what it took.
    h.clock.advance(BOUND_MS - 1);
    expect(await h.gateway.sweepArrivals(BOUND_MS)).toEqual({ recorded: 0, givenBack: 0, handedOver: 0 });
    expect(await base.threads.get(h.thread)).toBeDefined();

    h.clock.advance(2);
    expect(await h.gateway.sweepArrivals(BOUND_MS)).toEqual({ recorded: 0, givenBack: 1, handedOver: 0 });
    expect(await base.threads.get(h.thread)).toBeUndefined();
    expect(await base.arrivals.list(new Date(h.clock.now() + 1).toISOString(), 10)).toEqual([]);
    expect(await h.gateway.sweepArrivals(BOUND_MS)).toEqual({ recorded: 0, givenBack: 0, handedOver: 0 });

    // The tenant's place went back too: its whole limit is there for the retry and three more.
    const retry = await harness(base, { settings: { tenantConcurrentRuns: 1 } });
    expect(await retry.send('hello')).toMatchObject({ ok: true, value: { attached: false } });
    await retry.settled();
    expect(await base.runs.get('run-1')).toMatchObject({ status: 'completed' });
    expect(await base.threads.get(h.thread)).toMatchObject({ unsettled: 0 });
  });

  it('gives back a thread’s place once, whoever else gives places back, and leaves the thread and its other runs', async () => {
    const base = await stores.freshStore();
    const dying = dyingAtCreateRun(base, 'run-2');
    const h = await harness(dying.store);
    await h.send('first');
    await h.settled();
    void h.send('second');
    await eventually(async () => expect(await base.threads.get(h.thread)).toMatchObject({ unsettled: 1 }));
    h.clock.advance(BOUND_MS + 1);
    const sweeps = await Promise.all([h.gateway.sweepArrivals(BOUND_MS), h.gateway.sweepArrivals(BOUND_MS)]);
    expect(sweeps.reduce((sum, sweep) => sum + sweep.givenBack, 0)).toBeGreaterThanOrEqual(1);
    expect(await base.threads.get(h.thread)).toMatchObject({ unsettled: 0, arrivals: 2 });
    expect(await base.threads.placeHolders(h.thread)).toEqual([]);
    expect(await base.runs.get('run-1')).toMatchObject({ status: 'completed' });
  });

  it('opens again the asks an answer closed, with a timer of their own, so the next answer is taken', async () => {
    const base = await stores.freshStore();
    const dying = dyingAtCreateRun(base, 'run-2');
    const h = await harness(dying.store);
    asking(h);
    await h.send('/ask');
    await h.settled();
    expect(h.timer.armed.get('run-1')).toBeDefined();
    void h.send('', { messages: [], resume });
    await eventually(async () => expect((await base.runs.get('run-1'))?.asks?.i1).toMatchObject({ state: 'answered', closedByRunId: 'run-2' }));
    // The door disarms the timer after it closed the asks: wait for that too.
    await eventually(() => expect(h.timer.armed.has('run-1')).toBe(false));

    h.clock.advance(BOUND_MS + 1);
    expect(await h.gateway.sweepArrivals(BOUND_MS)).toEqual({ recorded: 0, givenBack: 1, handedOver: 0 });
    const reopened = await base.runs.get('run-1');
    expect(reopened?.asks?.i1).toMatchObject({ state: 'open' });
    expect(reopened?.asks?.i1).not.toHaveProperty('closedByRunId');
    expect(reopened?.asksReopened).toBe(1);
    expect(h.timer.armed.get('run-1')).toBe(reopened?.asks?.i1.expiresAt);
    expect(await base.threads.get(h.thread)).toMatchObject({ unsettled: 0 });

    const answer = await h.send('', { messages: [], resume });
    expect(answer).toMatchObject({ ok: true, value: { run: { runId: 'run-3', parentRunId: 'run-1' } } });
    await h.settled();
    expect((await base.runs.get('run-1'))?.asks?.i1).toMatchObject({ state: 'answered', closedByRunId: 'run-3' });
  });

  it('leaves a request noted again since it was listed to that repeat, and holds a repeat off while it gives back', async () => {
    const base = await stores.freshStore();
    const h = await harness(base);
    const old = { runId: 'run-9', tenant: 'anonymous', threadId: 'thread-1', at: '2026-01-01T00:00:00.000Z' };
    expect(await base.arrivals.note(old)).toBe(true);
    // The repeat noted itself after the sweep listed the old note: the claim fails, the repeat keeps its note.
    expect(await base.arrivals.note({ ...old, at: '2026-01-01T00:20:00.000Z' })).toBe(true);
    expect(await base.arrivals.claim(old)).toBe(false);
    // Claimed first, the note refuses a repeat until the sweep has given back and forgotten it.
    const now = { ...old, at: '2026-01-01T00:20:00.000Z' };
    expect(await base.arrivals.claim(now)).toBe(true);
    expect(await base.arrivals.note({ ...old, at: '2026-01-01T00:40:00.000Z' })).toBe(false);
    await expect(h.send('hello', { runId: 'run-9' } as never)).rejects.toThrow(/given back: send the request again/);
    expect(await base.threads.get(h.thread)).toBeUndefined();
    await base.arrivals.forget('run-9');
    expect(await h.send('hello', { runId: 'run-9' } as never)).toMatchObject({ ok: true });
  });

  it('only forgets the note of a request whose run was recorded after all, and gives back nothing of it', async () => {
    const base = await stores.freshStore();
    const dying = dyingAtCreateRun(base, 'run-1');
    const h = await harness(dying.store);
    const started = h.send('slow');
    await eventually(async () => expect(await base.threads.get(h.thread)).toMatchObject({ unsettled: 1 }));
    // The note outlives the request (its door died right after recording the run, before forgetting it).
    const note = (await base.arrivals.list(new Date(h.clock.now() + 1).toISOString(), 10))[0];
    dying.release();
    expect(await started).toMatchObject({ ok: true });
    await h.settled();
    await eventually(async () => expect(await base.arrivals.list(new Date(h.clock.now() + 1).toISOString(), 10)).toEqual([]));
    await base.arrivals.note(note);
    h.clock.advance(BOUND_MS + 1);
    expect(await h.gateway.sweepArrivals(BOUND_MS)).toEqual({ recorded: 1, givenBack: 0, handedOver: 0 });
    expect(await base.runs.get('run-1')).toMatchObject({ status: 'completed' });
    expect(await base.threads.get(h.thread)).toMatchObject({ unsettled: 0, arrivals: 1 });
  });

  it('hands an interjection its door recorded and never handed over to its thread’s queue, where it runs after the run it named', async () => {
    const base = await stores.freshStore();
    const h = await harness(base);
    await base.agents.put({ ...TEST_AGENT, takesInterjections: true });
    const gate = new Gate();
    h.provider.script = async function* (input) {
      if (input.runId === 'run-1') await gate.wait;
      yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
      yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId };
    };
    await h.send('long');
    await eventually(async () => expect((await base.runs.get('run-1'))?.status).toBe('running'));
    // What a door that died at its hand-over left: the interjection recorded queued, its place taken, its note.
    const at = new Date(h.clock.now()).toISOString();
    const arrival = await base.threads.reserveArrival(h.thread, 'run-2', undefined);
    const target = (await base.runs.get('run-1'))!;
    const { startedAt: _startedAt, ...queued } = target;
    await base.runs.create({ ...queued, runId: 'run-2', rootRunId: 'run-2', status: 'queued', arrival: arrival!.arrival, addressedRunId: 'run-1', input: h.input('also', { runId: 'run-2' }) });
    await base.arrivals.note({ runId: 'run-2', tenant: 'anonymous', threadId: 'thread-1', at });

    h.clock.advance(BOUND_MS + 1);
    expect(await h.gateway.sweepArrivals(BOUND_MS)).toEqual({ recorded: 1, givenBack: 0, handedOver: 1 });
    expect((await base.runs.get('run-2'))?.status).toBe('queued');
    gate.open();
    await h.settled();
    await eventually(async () => expect((await base.runs.get('run-2'))?.status).toBe('completed'));
    expect(h.provider.calls.map((call) => call.runId)).toEqual(['run-1', 'run-2']);
    expect(await base.threads.get(h.thread)).toMatchObject({ unsettled: 0 });
  });

  it('leaves no note behind a request that was recorded or refused', async () => {
    const base = await stores.freshStore();
    const h = await harness(base, { threadQueueLimit: 0 });
    const gate = new Gate();
    h.provider.script = async function* (input) {
      yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
      await gate.wait;
      yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId };
    };
    expect(await h.send('runs')).toMatchObject({ ok: true });
    expect(await h.send('refused')).toMatchObject({ ok: false, code: 'thread_queue_full' });
    gate.open();
    await h.settled();
    await eventually(async () => expect(await base.arrivals.list(new Date(h.clock.now() + 1).toISOString(), 10)).toEqual([]));
  });
});
