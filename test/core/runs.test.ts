import { describe, expect, it } from 'vitest';
import { ANONYMOUS } from '../../lambdas/core/model.js';
import { eventually, Gate, harness, lastText, replyEvents, TEST_AGENT } from '../support/core-harness.js';
import { aroundCalls, useStore } from '../support/stores.js';

const stores = useStore();

describe('a run', () => {
  it('is stored with its events numbered 1, 2, … and ends completed', async () => {
    const h = await harness(await stores.freshStore());
    const started = await h.send('hello');
    expect(started.ok).toBe(true);
    await h.settled();
    const run = await h.store.runs.get('run-1');
    expect(run?.status).toBe('completed');
    expect(run?.outcome).toBe('success');
    const events = await h.events('run-1');
    expect(events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(events.map((e) => e.event.type)).toEqual([
      'RUN_STARTED',
      'TEXT_MESSAGE_START',
      'TEXT_MESSAGE_CONTENT',
      'TEXT_MESSAGE_END',
      'RUN_FINISHED',
    ]);
    expect(run?.lastSeq).toBe(5);
  });

  it('refuses an unknown agent with agent_not_found', async () => {
    const h = await harness(await stores.freshStore());
    const refused = await h.gateway.startRun({ agentId: 'nobody', input: h.input('hi'), door: 'agui', principal: ANONYMOUS });
    expect(refused).toMatchObject({ ok: false, code: 'agent_not_found' });
  });

  it('binds a thread to the agent it was opened with', async () => {
    const h = await harness(await stores.freshStore());
    await h.send('hello');
    await h.store.agents.put({ ...TEST_AGENT, id: 'other' });
    const refused = await h.gateway.startRun({ agentId: 'other', input: h.input('hi'), door: 'agui', principal: ANONYMOUS });
    expect(refused).toMatchObject({ ok: false, code: 'thread_agent_mismatch' });
  });

  it('re-attaches a repeated runId with the same input and refuses it with another input', async () => {
    const h = await harness(await stores.freshStore());
    const input = h.input('hello');
    const first = await h.gateway.startRun({ agentId: TEST_AGENT.id, input, door: 'agui', principal: ANONYMOUS });
    const again = await h.gateway.startRun({ agentId: TEST_AGENT.id, input: { ...input }, door: 'agui', principal: ANONYMOUS });
    expect(first).toMatchObject({ ok: true, value: { attached: false } });
    expect(again).toMatchObject({ ok: true, value: { attached: true, run: { runId: input.runId } } });
    const changed = { ...input, messages: [{ id: 'x', role: 'user' as const, content: 'different' }] };
    const conflict = await h.gateway.startRun({ agentId: TEST_AGENT.id, input: changed, door: 'agui', principal: ANONYMOUS });
    expect(conflict).toMatchObject({ ok: false, code: 'run_id_conflict' });
    await h.settled();
    expect(h.provider.calls).toHaveLength(1);
  });

  it('passes the caller forwardedProps on untouched, strips a caller funduq key and names the caller', async () => {
    const h = await harness(await stores.freshStore());
    await h.send('hello', { forwardedProps: { theme: 'dark', funduq: { caller: 'forged' } } });
    await h.settled();
    expect(h.provider.calls[0].forwardedProps).toEqual({
      theme: 'dark',
      funduq: { caller: { principal: 'anonymous', tenant: 'anonymous' }, door: 'agui' },
    });
    expect((await h.store.runs.get('run-1'))?.input.forwardedProps).toEqual({ theme: 'dark' });
  });
});

describe('the thread queue', () => {
  it('starts the runs of a thread one at a time, in arrival order', async () => {
    const h = await harness(await stores.freshStore());
    const gate = new Gate();
    const started: string[] = [];
    let active = 0;
    let most = 0;
    h.provider.script = async function* (input) {
      started.push(input.runId);
      active += 1;
      most = Math.max(most, active);
      try {
        if (input.runId === 'run-1') await gate.wait;
        yield* replyEvents(input, lastText(input));
      } finally {
        active -= 1;
      }
    };
    for (let i = 0; i < 5; i++) expect((await h.send(`m${i}`)).ok).toBe(true);
    await eventually(() => expect(started).toEqual(['run-1']));
    expect((await h.store.runs.get('run-3'))?.status).toBe('queued');
    gate.open();
    await h.settled();
    expect(started).toEqual(['run-1', 'run-2', 'run-3', 'run-4', 'run-5']);
    expect(most).toBe(1);
  });

  it('refuses the tenth run of a busy thread with thread_queue_full and writes nothing', async () => {
    const h = await harness(await stores.freshStore(), { threadQueueLimit: 8 });
    const gate = new Gate();
    h.provider.script = async function* (input) {
      await gate.wait;
      yield* replyEvents(input, 'ok');
    };
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => h.send(`m${i}`)));
    expect(results.filter((r) => r.ok)).toHaveLength(9);
    const refused = results.filter((r) => !r.ok);
    expect(refused).toHaveLength(3);
    expect(refused.every((r) => !r.ok && r.code === 'thread_queue_full')).toBe(true);
    const runs = await h.store.runs.listOfThread(h.thread);
    expect(runs).toHaveLength(9);
    gate.open();
    await h.settled();
    expect((await h.send('after the queue drained')).ok).toBe(true);
    await h.settled();
  });

  it('runs threads beside each other', async () => {
    const store = await stores.freshStore();
    const a = await harness(store, { threadId: 'a' });
    const gate = new Gate();
    a.provider.script = async function* (input) {
      if (input.threadId === 'a') await gate.wait;
      yield* replyEvents(input, 'ok');
    };
    await a.send('blocks thread a');
    const other = await a.gateway.startRun({
      agentId: TEST_AGENT.id,
      input: { ...a.input('on thread b'), threadId: 'b' },
      door: 'agui',
      principal: ANONYMOUS,
    });
    expect(other.ok).toBe(true);
    await eventually(async () => expect((await store.runs.get('run-2'))?.status).toBe('completed'));
    expect((await store.runs.get('run-1'))?.status).toBe('running');
    gate.open();
    await a.settled();
  });
});

describe('what an agent streams', () => {
  it('fails a run whose agent sends a malformed known event with provider_sent_malformed_event', async () => {
    const h = await harness(await stores.freshStore());
    h.provider.script = async function* (input) {
      yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
      yield { type: 'TEXT_MESSAGE_CONTENT', delta: 42 };
    };
    await h.send('hi');
    await h.settled();
    const run = await h.store.runs.get('run-1');
    expect(run).toMatchObject({ status: 'failed', reason: 'provider_sent_malformed_event' });
    const events = await h.events('run-1');
    expect(events.map((e) => e.event.type)).toEqual(['RUN_STARTED', 'RUN_ERROR']);
    expect(events[1].event).toMatchObject({ code: 'provider_sent_malformed_event' });
  });

  it.each([
    ['a number no record keeps (1e-200)', { result: { tiny: 1e-200 } }, 'RUN_FINISHED.result.tiny'],
    ['an interrupt payload nested 40 deep', { outcome: { type: 'interrupt', interrupts: [{ id: 'i1', reason: 'confirm', payload: JSON.parse('['.repeat(40) + ']'.repeat(40)) }] } }, 'RUN_FINISHED.outcome.interrupts.0.payload'],
  ])('fails a run whose terminal event holds %s, which its run record must keep, naming where (any other event may)', async (_, fields, where) => {
    const h = await harness(await stores.freshStore());
    h.provider.script = async function* (input) {
      yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
      yield { type: 'STATE_SNAPSHOT', snapshot: { tiny: 1e-200 } };
      yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId, ...fields };
    };
    await h.send('hi');
    await h.settled();
    expect(await h.store.runs.get('run-1')).toMatchObject({ status: 'failed', reason: 'provider_sent_malformed_event', message: expect.stringContaining(where) });
    const events = await h.events('run-1');
    expect(events.map((e) => e.event)).toMatchObject([{ type: 'RUN_STARTED' }, { type: 'STATE_SNAPSHOT', snapshot: { tiny: 1e-200 } }, { type: 'RUN_ERROR', code: 'provider_sent_malformed_event' }]);
  });

  it('stores and relays an event type it does not know untouched', async () => {
    const h = await harness(await stores.freshStore());
    const future = { type: 'FUTURE_THING', payload: { nested: [1, 2] } };
    h.provider.script = async function* (input) {
      yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
      yield future;
      yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId };
    };
    await h.send('hi');
    await h.settled();
    expect((await h.events('run-1'))[1].event).toEqual(future);
    expect((await h.store.runs.get('run-1'))?.status).toBe('completed');
  });

  it('fails a run whose stream ends without finishing', async () => {
    const h = await harness(await stores.freshStore());
    h.provider.script = async function* (input) {
      yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
    };
    await h.send('hi');
    await h.settled();
    expect(await h.store.runs.get('run-1')).toMatchObject({
      status: 'failed',
      reason: 'provider_stream_ended_without_finishing',
    });
    expect((await h.events('run-1')).at(-1)?.event).toMatchObject({
      type: 'RUN_ERROR',
      code: 'provider_stream_ended_without_finishing',
    });
  });

  it('records the agent RUN_ERROR once, as the failure with its code', async () => {
    const h = await harness(await stores.freshStore());
    h.provider.script = async function* (input) {
      yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
      yield { type: 'RUN_ERROR', message: 'model overloaded', code: 'overloaded' };
      yield { type: 'TEXT_MESSAGE_START', messageId: 'late', role: 'assistant' };
    };
    await h.send('hi');
    await h.settled();
    expect(await h.store.runs.get('run-1')).toMatchObject({ status: 'failed', reason: 'overloaded', message: 'model overloaded' });
    expect((await h.events('run-1')).map((e) => e.event.type)).toEqual(['RUN_STARTED', 'RUN_ERROR']);
  });

  it('rewrites RUN_STARTED to the run ids and keeps what the agent sent under rawEvent', async () => {
    const h = await harness(await stores.freshStore());
    h.provider.script = async function* () {
      yield { type: 'RUN_STARTED', threadId: 'agent-thread', runId: 'agent-run' };
      yield { type: 'RUN_FINISHED', threadId: 'agent-thread', runId: 'agent-run' };
    };
    await h.send('hi');
    await h.settled();
    const [first] = await h.events('run-1');
    expect(first.event).toMatchObject({
      threadId: 'thread-1',
      runId: 'run-1',
      rawEvent: { threadId: 'agent-thread', runId: 'agent-run' },
    });
  });

  it('lets a reader that comes back after event N read every later event', async () => {
    const h = await harness(await stores.freshStore());
    await h.send('hello');
    await h.settled();
    const seen: number[] = [];
    for await (const stored of h.gateway.followRun('run-1', 2)) seen.push(stored.seq);
    expect(seen).toEqual([3, 4, 5]);
  });

  it('lets a reader that watched the run from before it was created follow it whole without reading the store', async () => {
    const reads: string[] = [];
    const store = await stores.freshStore();
    const counting = aroundCalls(store, (call, args, invoke) => {
      if (call === 'events.read' || call === 'runs.get') reads.push(`${call} ${String(args[0])}`);
      return invoke();
    });
    const h = await harness(counting);
    const started = await h.gateway.startAndFollow({ agentId: TEST_AGENT.id, input: h.input('hello'), door: 'agui', principal: ANONYMOUS });
    if (!started.ok) throw new Error(started.message);
    reads.length = 0; // startRun's own look for the run id
    const watched: number[] = [];
    for await (const stored of started.value.events()) watched.push(stored.seq);
    expect(watched).toEqual([1, 2, 3, 4, 5]);
    expect(reads).toEqual([]);
    // The same run followed without a watch reads the record.
    const replayed: number[] = [];
    for await (const stored of h.gateway.followRun('run-1', 0)) replayed.push(stored.seq);
    expect(replayed).toEqual(watched);
    expect(reads).toContain('events.read run-1');
  });

  it('stores a burst that arrived whole in slices of at most 100, in order, so readers need not wait for all of it', async () => {
    const store = await stores.freshStore();
    const writes: number[][] = [];
    const appendEvents = store.events.append.bind(store.events);
    store.events.append = async (events) => {
      writes.push(events.map((stored) => stored.seq));
      await appendEvents(events);
    };
    // The run's closing event is written by its end, first-write-wins.
    const appendNew = store.events.appendNew.bind(store.events);
    store.events.appendNew = async (events) => {
      writes.push(events.map((stored) => stored.seq));
      return appendNew(events);
    };
    const h = await harness(store);
    h.provider.script = async function* (input) {
      yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
      yield { type: 'TEXT_MESSAGE_START', messageId: 'm', role: 'assistant' };
      for (let i = 0; i < 350; i++) yield { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: `${i} ` };
      yield { type: 'TEXT_MESSAGE_END', messageId: 'm' };
      yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId };
    };
    await h.send('burst');
    await h.settled();
    expect(Math.max(...writes.map((write) => write.length))).toBe(100);
    expect(writes.flat()).toEqual(Array.from({ length: 354 }, (_, i) => i + 1));
    expect((await h.events('run-1')).map((stored) => stored.seq)).toEqual(writes.flat());
  });

  it('hands a live reader each event as it is stored, then ends with the run', async () => {
    const h = await harness(await stores.freshStore());
    const gate = new Gate();
    h.provider.script = async function* (input) {
      yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
      await gate.wait;
      yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId };
    };
    await h.send('hi');
    const reader = h.gateway.followRun('run-1', 0)[Symbol.asyncIterator]();
    const first = await reader.next();
    expect(first.value?.event.type).toBe('RUN_STARTED');
    gate.open();
    expect((await reader.next()).value?.event.type).toBe('RUN_FINISHED');
    expect((await reader.next()).done).toBe(true);
  });
});
