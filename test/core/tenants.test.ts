import type { RunAgentInput } from '@ag-ui/core';
import { describe, expect, it } from 'vitest';
import type { Principal } from '../../lambdas/core/model.js';
import type { RunStore } from '../../lambdas/core/ports.js';
import { userMessage } from '../support/a2a.js';
import { eventually, Gate, harness, replyEvents, TEST_AGENT, type Harness } from '../support/core-harness.js';
import { aroundCalls, useStore } from '../support/stores.js';

const stores = useStore();

const ALICE: Principal = { id: 'alice', tenant: 'acme' };
const ALMA: Principal = { id: 'alma', tenant: 'acme' };
const BOB: Principal = { id: 'bob', tenant: 'globex' };

function sendAs(h: Harness, principal: Principal, text: string, extra: Partial<RunAgentInput> = {}) {
  return h.gateway.startRun({ agentId: TEST_AGENT.id, input: h.input(text, extra), door: 'agui', principal });
}

/** A harness whose agent holds every run until the gate opens. */
async function heldHarness(settings: Parameters<typeof harness>[1] = {}) {
  const h = await harness(await stores.freshStore(), settings);
  const gate = new Gate();
  h.provider.script = async function* (input) {
    const [started, ...rest] = replyEvents(input, 'done');
    yield started;
    await gate.wait;
    yield* rest;
  };
  return { h, gate };
}

/** The store, noting each call made through it and what it found: what a request read, whatever the ids. */
function noting(store: RunStore): { store: RunStore; reads: string[] } {
  const reads: string[] = [];
  const proxy = aroundCalls(store, async (call, _args, invoke) => {
    const result: unknown = await invoke();
    reads.push(`${call} → ${result === undefined ? 'nothing' : Array.isArray(result) ? `${result.length} found` : 'found'}`);
    return result;
  });
  return { store: proxy, reads };
}

describe('threads of tenants', () => {
  it('keeps two tenants apart on the same thread id: two threads, two queues, two conversations', async () => {
    const { h, gate } = await heldHarness();
    expect(await sendAs(h, ALICE, 'from acme')).toMatchObject({ ok: true });
    expect(await sendAs(h, BOB, 'from globex')).toMatchObject({ ok: true });

    // Both run at once: one thread id, but each tenant's own thread queue.
    await eventually(async () => {
      expect((await h.store.runs.get('run-1'))?.status).toBe('running');
      expect((await h.store.runs.get('run-2'))?.status).toBe('running');
    });
    gate.open();
    await h.settled();

    const acme = await h.gateway.threadView('thread-1', ALICE);
    const globex = await h.gateway.threadView('thread-1', BOB);
    expect(acme.ok && acme.value.messages.map((m) => m.content)).toEqual(['from acme', 'done']);
    expect(globex.ok && globex.value.runs.map((r) => r.runId)).toEqual(['run-2']);
    expect(h.provider.calls.map((input) => input.forwardedProps.funduq.caller)).toEqual([
      { principal: 'alice', tenant: 'acme' },
      { principal: 'bob', tenant: 'globex' },
    ]);
  });

  it('lets principals of one tenant share its threads', async () => {
    const h = await harness(await stores.freshStore());
    await sendAs(h, ALICE, 'first');
    await sendAs(h, ALMA, 'second');
    await h.settled();
    const view = await h.gateway.threadView('thread-1', ALICE);
    expect(view.ok && view.value.runs.map((r) => r.runId)).toEqual(['run-1', 'run-2']);
    expect((await h.store.runs.get('run-2'))?.principal).toBe('alma');
  });

  it("does not let a tenant join another tenant's running run by naming it", async () => {
    const { h, gate } = await heldHarness();
    await h.store.agents.put({ ...TEST_AGENT, takesInterjections: true });
    await sendAs(h, ALICE, 'long');
    const interjection = await sendAs(h, BOB, 'me too', {
      forwardedProps: { 'https://github.com/hukaichun/funduq/ext/interjection/v1/addressedRunId': 'run-1' },
    });
    expect(interjection).toMatchObject({ ok: true, value: { run: { tenant: 'globex' } } });
    expect(interjection.ok && interjection.value.run.addressedRunId).toBeUndefined();
    gate.open();
    await h.settled();
    expect(h.provider.calls[1].forwardedProps.funduq.addressedRunId).toBeUndefined();
  });

  it("answers another tenant's task id and context id exactly as unknown ones", async () => {
    const h = await harness(await stores.freshStore());
    const { tasks } = h.gateway;
    const message = (fields: Parameters<typeof userMessage>[1] = {}) => userMessage('hi', fields);
    const sent = await tasks.sendMessage({ agentId: TEST_AGENT.id, principal: ALICE, message: message() });
    await h.settled();
    if (!sent.ok) throw new Error(sent.message);
    const bob = { agentId: TEST_AGENT.id, principal: BOB };
    const strip = (result: { ok: boolean; code?: string }) => ({ ok: result.ok, code: result.code });

    expect(strip(await tasks.getTask(bob, sent.value.root.runId))).toEqual(strip(await tasks.getTask(bob, 'unknown')));
    expect(strip(await tasks.cancelTask(bob, sent.value.root.runId))).toEqual(strip(await tasks.cancelTask(bob, 'unknown')));
    expect(strip(await tasks.subscribe(bob, sent.value.root.runId, undefined))).toEqual(strip(await tasks.subscribe(bob, 'unknown', undefined)));
    expect(strip(await tasks.listPushConfigs(bob, sent.value.root.runId))).toEqual(strip(await tasks.listPushConfigs(bob, 'unknown')));
    const byContext = await tasks.sendMessage({ ...bob, message: message({ contextId: sent.value.root.threadId }) });
    const unknownContext = await tasks.sendMessage({ ...bob, message: message({ contextId: 'unknown' }) });
    expect(strip(byContext)).toEqual(strip(unknownContext));
    expect(await tasks.listTasks(bob, { contextId: sent.value.root.threadId, view: {} })).toEqual({ ok: true, value: { tasks: [], pageSize: 50, totalSize: 0 } });
    expect(await tasks.listTasks(bob, { view: {} })).toEqual({ ok: true, value: { tasks: [], pageSize: 50, totalSize: 0 } });
  });
  it("reads for another tenant's task or run exactly what it reads for an unknown id, and is handed nothing of it", async () => {
    const { store, reads } = noting(await stores.freshStore());
    const h = await harness(store);
    const sent = await h.gateway.tasks.sendMessage({ agentId: TEST_AGENT.id, principal: ALICE, message: userMessage('hi') });
    const run = await sendAs(h, ALICE, 'over AG-UI', { threadId: 'agui-thread' });
    await h.settled();
    if (!sent.ok || !run.ok) throw new Error('the runs were not started');
    const bob = { agentId: TEST_AGENT.id, principal: BOB };
    const { tasks } = h.gateway;
    const asks: [string, string, (id: string) => Promise<unknown>][] = [
      ['GetTask', sent.value.root.runId, (id) => tasks.getTask(bob, id)],
      ['CancelTask', sent.value.root.runId, (id) => tasks.cancelTask(bob, id)],
      ['SubscribeToTask', sent.value.root.runId, (id) => tasks.subscribe(bob, id, undefined)],
      ['ListTaskPushNotificationConfigs', sent.value.root.runId, (id) => tasks.listPushConfigs(bob, id)],
      ['SendMessage to a task', sent.value.root.runId, (id) => tasks.sendMessage({ ...bob, message: userMessage('mine?', { taskId: id }) })],
      ['the events of a run', run.value.run.runId, (id) => h.gateway.getRun(id, BOB)],
      ['cancel a run', run.value.run.runId, (id) => h.gateway.cancelRun(id, BOB)],
    ];
    for (const [what, id, ask] of asks) {
      reads.length = 0;
      await ask(id);
      const foreign = reads.splice(0);
      await ask('unknown-id');
      expect({ what, reads: foreign }).toEqual({ what, reads: reads.splice(0) });
      expect({ what, found: foreign.filter((read) => !read.startsWith('agents.get') && !read.endsWith('nothing')) }).toEqual({ what, found: [] });
    }
  });
});

describe("a tenant's limits", () => {
  it('refuses the sixth run of a minute with tenant_rate_limited, says when the next minute starts, and writes nothing', async () => {
    const h = await harness(await stores.freshStore(), { settings: { tenantRunsPerMinute: 5 } });
    h.clock.ms = Date.parse('2026-01-01T00:00:45.000Z');
    for (let i = 0; i < 5; i++) expect(await sendAs(h, ALICE, `run ${i}`, { threadId: `t-${i}` })).toMatchObject({ ok: true });

    const refused = await sendAs(h, ALMA, 'one more', { threadId: 'fresh' });
    expect(refused).toEqual({ ok: false, code: 'tenant_rate_limited', message: expect.stringContaining('5 runs'), retryAfterSeconds: 15 });
    expect(await h.store.threads.get({ tenant: 'acme', threadId: 'fresh' })).toBeUndefined();
    expect(await h.store.runs.get('run-6')).toBeUndefined();
    expect(await sendAs(h, BOB, 'another tenant', { threadId: 'fresh' })).toMatchObject({ ok: true });

    h.clock.ms += 15_000;
    expect(await sendAs(h, ALICE, 'next minute', { threadId: 'fresh' })).toMatchObject({ ok: true });
    await h.settled();
  });

  it("refuses a run past the tenant's unsettled runs across its threads, and takes one again when a run settles", async () => {
    const { h, gate } = await heldHarness({ settings: { tenantConcurrentRuns: 2 } });
    expect(await sendAs(h, ALICE, 'a', { threadId: 'one' })).toMatchObject({ ok: true });
    expect(await sendAs(h, ALICE, 'b', { threadId: 'two' })).toMatchObject({ ok: true });
    expect(await sendAs(h, ALICE, 'c', { threadId: 'three' })).toMatchObject({ ok: false, code: 'tenant_concurrency_limited' });
    expect(await h.store.threads.get({ tenant: 'acme', threadId: 'three' })).toBeUndefined();
    expect(await sendAs(h, BOB, 'b', { threadId: 'three' })).toMatchObject({ ok: true });

    gate.open();
    await h.settled();
    expect(await sendAs(h, ALICE, 'c again', { threadId: 'three' })).toMatchObject({ ok: true });
    await h.settled();
  });

  it('lets exactly the limit of twenty concurrent runs of a tenant in', async () => {
    const { h, gate } = await heldHarness({ settings: { tenantConcurrentRuns: 3, tenantRunsPerMinute: 10 } });
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => sendAs(h, ALICE, `r${i}`, { threadId: `c-${i}` })));
    expect(results.filter((r) => r.ok)).toHaveLength(3);
    const codes = new Set(results.flatMap((r) => (r.ok ? [] : [r.code])));
    expect([...codes].every((code) => code === 'tenant_concurrency_limited' || code === 'tenant_rate_limited')).toBe(true);
    gate.open();
    await h.settled();
  });

  it('gives the place back when a queued run is cancelled, or a run is refused after admission', async () => {
    const { h, gate } = await heldHarness({ threadQueueLimit: 1, settings: { tenantConcurrentRuns: 3 } });
    await sendAs(h, ALICE, 'running');
    await sendAs(h, ALICE, 'queued');
    expect(await sendAs(h, ALICE, 'queue full')).toMatchObject({ ok: false, code: 'thread_queue_full' });
    expect(await h.gateway.cancelRun('run-2', ALICE)).toMatchObject({ ok: true, value: { status: 'cancelled' } });

    // Two places are free again: the queue-full refusal and the cancelled run gave theirs back.
    expect(await sendAs(h, ALICE, 'elsewhere', { threadId: 'other-1' })).toMatchObject({ ok: true });
    expect(await sendAs(h, ALICE, 'elsewhere too', { threadId: 'other-2' })).toMatchObject({ ok: true });
    expect(await sendAs(h, ALICE, 'too many', { threadId: 'other-3' })).toMatchObject({ ok: false, code: 'tenant_concurrency_limited' });
    gate.open();
    await h.settled();
    expect((await h.store.runs.get('run-1'))?.tenantPlace).toBe(true);
  });

  it('counts no place for a tenant when no limit is set', async () => {
    const h = await harness(await stores.freshStore());
    await sendAs(h, ALICE, 'free');
    await h.settled();
    expect((await h.store.runs.get('run-1'))?.tenantPlace).toBeUndefined();
  });

  it('sets the tenants’ places from the queued runs on recovery', async () => {
    const h = await harness(await stores.freshStore(), { settings: { tenantConcurrentRuns: 2 } });
    // What a gateway killed at the wrong moment leaves: a queued run holding a place, and a count past it.
    const input = h.input('left queued');
    await h.store.threads.create({ ...h.thread, agentId: TEST_AGENT.id, createdAt: '2026-01-01T00:00:00.000Z', unsettled: 1, arrivals: 1 }, input.runId);
    await h.store.runs.create({
      runId: input.runId,
      threadId: input.threadId,
      agentId: TEST_AGENT.id,
      tenant: h.thread.tenant,
      principal: 'anonymous',
      door: 'agui',
      status: 'queued',
      arrival: 1,
      rootRunId: input.runId,
      input,
      createdAt: '2026-01-01T00:00:00.000Z',
      tenantPlace: true,
    });
    await h.store.tenants.admit(h.thread.tenant, input.runId, { window: 0, places: 2 });
    await h.store.tenants.admit(h.thread.tenant, 'leaked', { window: 0, places: 2 });
    expect(await h.send('refused', { threadId: 'elsewhere' })).toMatchObject({ ok: false, code: 'tenant_concurrency_limited' });

    await h.gateway.recover();
    await h.settled();

    expect((await h.store.runs.get(input.runId))?.status).toBe('completed');
    expect(await h.send('one', { threadId: 'a' })).toMatchObject({ ok: true });
    expect(await h.send('two', { threadId: 'b' })).toMatchObject({ ok: true });
    await h.settled();
  });
});
