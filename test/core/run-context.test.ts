import { describe, expect, it } from 'vitest';
import { answerContext, contextOfHeaders, MAX_CONTEXT_BYTES, MAX_CONTEXT_ENTRIES, runContextProblem, traceIdOf } from '../../lambdas/core/run-context.js';
import { harness } from '../support/core-harness.js';
import { useStore } from '../support/stores.js';
import { ANONYMOUS } from '../../lambdas/core/model.js';

const stores = useStore();
const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

describe("a run's context", () => {
  it('is names to strings within its limits', () => {
    expect(runContextProblem({ traceparent: TRACEPARENT, tracestate: 'congo=t61rcWkgMzE' })).toBeUndefined();
    expect(runContextProblem({})).toBeUndefined();
    expect(runContextProblem([])).toMatch(/object of names to strings/);
    expect(runContextProblem({ Traceparent: 'x' })).toMatch(/lowercase token/);
    expect(runContextProblem({ 'a b': 'x' })).toMatch(/lowercase token/);
    expect(runContextProblem({ n: 7 })).toMatch(/string of visible ASCII/);
    expect(runContextProblem({ n: 'line\nbreak' })).toMatch(/string of visible ASCII/);
    expect(runContextProblem(Object.fromEntries(Array.from({ length: MAX_CONTEXT_ENTRIES + 1 }, (_, i) => [`k${i}`, 'v'])))).toMatch(/at most 16/);
    expect(runContextProblem({ big: 'x'.repeat(MAX_CONTEXT_BYTES) })).toMatch(/at most 4096/);
  });

  it("is taken at a door from the caller's trace headers, dropping one that would break its limits rather than refusing the request", () => {
    const headers: Record<string, string> = { traceparent: ` ${TRACEPARENT} `, tracestate: 'x'.repeat(MAX_CONTEXT_BYTES), other: 'not carried' };
    expect(contextOfHeaders((name) => headers[name])).toEqual({ traceparent: TRACEPARENT });
    expect(contextOfHeaders(() => undefined)).toBeUndefined();
  });

  it('names its trace by its traceparent, and none for one W3C Trace Context would not take', () => {
    expect(traceIdOf({ traceparent: TRACEPARENT })).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(traceIdOf({ traceparent: `${TRACEPARENT}-later-field` })).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(traceIdOf(undefined)).toBeUndefined();
    expect(traceIdOf({ tracestate: 'a=b' })).toBeUndefined();
    expect(traceIdOf({ traceparent: `00-${'0'.repeat(32)}-00f067aa0ba902b7-01` })).toBeUndefined();
    expect(traceIdOf({ traceparent: 'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' })).toBeUndefined();
    expect(traceIdOf({ traceparent: '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01' })).toBeUndefined();
  });

  it("of an answer names the asking run's traceparent, within its limits", () => {
    const asking = { context: { traceparent: TRACEPARENT } };
    expect(answerContext({ traceparent: 'mine' }, asking)).toEqual({ traceparent: 'mine', 'funduq-answers': TRACEPARENT });
    expect(answerContext(undefined, asking)).toEqual({ 'funduq-answers': TRACEPARENT });
    expect(answerContext({ 'funduq-answers': 'forged' }, {})).toBeUndefined();
    const full = { tracestate: 'x'.repeat(MAX_CONTEXT_BYTES - 20) };
    expect(answerContext(full, asking)).toEqual(full);
  });

  it('given outside its limits, refuses the run invalid_input with nothing written', async () => {
    const h = await harness(await stores.freshStore());
    const refused = await h.gateway.startRun({ agentId: 'scripted', input: h.input('hi'), door: 'agui', principal: ANONYMOUS, context: { 'Bad Name': 'x' } });
    expect(refused).toMatchObject({ ok: false, code: 'invalid_input', message: expect.stringContaining('context name') });
    expect(await h.store.runs.get('run-1')).toBeUndefined();
    expect(await h.store.threads.get(h.thread)).toBeUndefined();
  });

  it('is kept on the run, and given to a queued run again after a restart, on its thread-queue message and at its start', async () => {
    const store = await stores.freshStore();
    const first = await harness(store);
    // A run left queued by a process that stopped: recorded, its message lost with the process.
    await first.store.threads.create({ threadId: 'thread-1', agentId: 'scripted', tenant: 'anonymous', createdAt: '2026-01-01T00:00:00.000Z', unsettled: 1, arrivals: 1 }, 'r1');
    await first.store.runs.create({
      runId: 'r1',
      threadId: 'thread-1',
      agentId: 'scripted',
      tenant: 'anonymous',
      principal: 'anonymous',
      door: 'agui',
      status: 'queued',
      arrival: 1,
      rootRunId: 'r1',
      input: { threadId: 'thread-1', runId: 'r1', messages: [{ id: 'm1', role: 'user', content: 'hi' }], tools: [], context: [] },
      createdAt: '2026-01-01T00:00:00.000Z',
      context: { traceparent: TRACEPARENT },
    });
    const seen: { delivered?: unknown; started?: unknown; settled?: unknown }[] = [];
    const restarted = await harness(store, {
      life: {
        dispatched: ({ context }) => seen.push({ delivered: context }),
        started: (run) => seen.push({ started: run.context }),
        settled: (run) => seen.push({ settled: run.context }),
      },
    });
    expect(await restarted.gateway.recover()).toMatchObject({ requeued: 1 });
    await restarted.settled();
    const context = { traceparent: TRACEPARENT };
    expect(seen).toEqual([{ started: context }, { settled: context }, { delivered: context }]);
    expect(await store.runs.get('r1')).toMatchObject({ status: 'completed', context });
  });
});
