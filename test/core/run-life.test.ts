import { HttpAgent } from '@ag-ui/client';
import { afterEach, describe, expect, it } from 'vitest';
import type { Run, RunContext } from '../../lambdas/core/model.js';
import { composeRunLife, type RunLife } from '../../lambdas/core/run-life.js';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { eventually, harness, type Harness } from '../support/core-harness.js';
import { startTestGateway, userMessage } from '../support/gateway.js';
import { startHeldAgent, type HeldAgent } from '../support/held-agent.js';
import { useStore } from '../support/stores.js';

const stores = useStore();
const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

/** An observer that writes down every moment it is told of, as `moment runId`, with what the moments carried. */
class Watcher implements RunLife {
  readonly moments: string[] = [];
  readonly contexts = new Map<string, (RunContext | undefined)[]>();
  readonly runs: Run[] = [];
  /** Events told stored, by run. */
  readonly storedEvents = new Map<string, number>();

  of(runId: string): string[] {
    return this.moments.filter((line) => line.endsWith(` ${runId}`)).map((line) => line.split(' ')[0]);
  }

  private note(moment: string, runId: string, context?: RunContext): void {
    this.moments.push(`${moment} ${runId}`);
    this.contexts.set(moment, [...(this.contexts.get(moment) ?? []), context]);
  }

  queued(run: Run) {
    this.note('queued', run.runId, run.context);
  }
  refused(refusal: { code: string; runId?: string; context?: RunContext }) {
    this.note(`refused:${refusal.code}`, refusal.runId ?? '-', refusal.context);
  }
  started(run: Run) {
    this.note('started', run.runId, run.context);
  }
  dispatched(dispatch: { runId: string; result?: string; context?: RunContext }) {
    this.note(`dispatched:${dispatch.result ?? 'threw'}`, dispatch.runId, dispatch.context);
  }
  providerCall({ run }: { run: Run }) {
    this.note('providerCall', run.runId, run.context);
    return {
      // What a tracer does: the run's context goes on with the call.
      ...(run.context ? { headers: { ...run.context } } : {}),
      ended: (failure?: { code: string }) => this.note(failure ? `callEnded:${failure.code}` : 'callEnded', run.runId),
    };
  }
  stored(run: { runId: string; context?: RunContext }, events: readonly unknown[]) {
    this.note('stored', run.runId, run.context);
    this.storedEvents.set(run.runId, (this.storedEvents.get(run.runId) ?? 0) + events.length);
  }
  settled(run: Run) {
    this.runs.push(run);
    this.note(`settled:${run.status}`, run.runId, run.context);
  }
  cancelRequested(run: Run) {
    this.note('cancelRequested', run.runId, run.context);
  }
  answered(waiting: Run, answer: { runId: string; askIds: string[] }) {
    this.note(`answered:${answer.askIds.join(',')}`, waiting.runId, waiting.context);
    this.moments.push(`answeredBy:${answer.runId}`);
  }
  expired(run: Run, askIds: string[]) {
    this.note(`expired:${askIds.join(',')}`, run.runId, run.context);
  }
}

/**
 * A run's moments, checked against the order of its life, with `stored` left out: batches of its
 * events are stored from the first event on, one or more before its end (the settle stores what
 * its log holds first) and its closing events after, however the store's writes group them. What
 * the batches held adds up to the run's whole log, each event told once.
 */
async function lifeOf(watcher: Watcher, store: Pick<Harness['store'], 'runs'>, runId: string): Promise<string[]> {
  const moments = watcher.of(runId);
  const settled = moments.findIndex((moment) => moment.startsWith('settled:'));
  expect(moments.indexOf('stored'), 'a batch stored after the call began').toBeGreaterThan(moments.indexOf('providerCall'));
  expect(moments.slice(0, settled).includes('stored'), 'a batch stored before the end').toBe(true);
  expect(moments.slice(settled).includes('stored'), 'the closing events stored after it').toBe(true);
  expect(watcher.storedEvents.get(runId)).toBe((await store.runs.get(runId))?.lastSeq);
  return moments.filter((moment) => moment !== 'stored');
}

const RAN = ['queued', 'started', 'providerCall', 'callEnded', 'settled:completed', 'dispatched:ran'];

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const thing of open.splice(0)) await thing.close();
});

async function gatewayWatched(watcher: Watcher): Promise<LocalGateway> {
  const gateway = await startTestGateway({ observers: [watcher] });
  open.push(gateway);
  return gateway;
}

async function heldAgentAt(gateway: LocalGateway, id: string): Promise<HeldAgent> {
  const agent = await startHeldAgent();
  open.push({ close: async () => (agent.release(), await agent.close()) });
  const put = await fetch(`${gateway.url}/admin/agents/${id}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ url: agent.url, description: 'holds its runs' }) });
  expect(put.status).toBe(201);
  return agent;
}

describe("an observer of runs' lives", () => {
  it('sees a run driven through the AG-UI door by the stock client queued, started, called, stored, settled and dispatched, in that order', async () => {
    const watcher = new Watcher();
    const gateway = await gatewayWatched(watcher);
    const agent = new HttpAgent({ url: `${gateway.url}/agui/demo`, threadId: 'life-1', headers: { traceparent: TRACEPARENT } });
    agent.messages = [userMessage('hello')];
    await agent.runAgent({ runId: 'life-run-1' });
    await eventually(() => expect(watcher.of('life-run-1')).toContain('dispatched:ran'));
    expect(await lifeOf(watcher, gateway.store, 'life-run-1')).toEqual(RAN);
    // Every moment carried the context the door took from the caller's header.
    for (const moment of ['queued', 'started', 'providerCall', 'stored', 'settled:completed', 'dispatched:ran']) {
      expect(watcher.contexts.get(moment), moment).toEqual(expect.arrayContaining([{ traceparent: TRACEPARENT }]));
    }
  });

  it('sees a cancel of a running run requested, then the run settle cancelled', async () => {
    const watcher = new Watcher();
    const gateway = await gatewayWatched(watcher);
    const held = await heldAgentAt(gateway, 'held');
    const body = JSON.stringify({ threadId: 'life-2', runId: 'life-run-2', messages: [userMessage('hold')], tools: [], context: [], state: {}, forwardedProps: {} });
    const stop = new AbortController();
    const response = await fetch(`${gateway.url}/agui/held`, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: stop.signal });
    expect(response.status).toBe(200);
    await eventually(() => expect(held.received.map((input) => input.runId)).toContain('life-run-2'));
    const cancel = await fetch(`${gateway.url}/agui/held/runs/life-run-2/cancel`, { method: 'POST' });
    expect(cancel.status).toBe(202);
    await eventually(() => expect(watcher.of('life-run-2')).toContain('dispatched:ran'));
    stop.abort();
    expect(await lifeOf(watcher, gateway.store, 'life-run-2')).toEqual(['queued', 'started', 'providerCall', 'cancelRequested', 'callEnded', 'settled:cancelled', 'dispatched:ran']);
  });

  it("sends an agui-http agent the headers its call's observers give, carrying the context the caller's door took", async () => {
    const watcher = new Watcher();
    const gateway = await gatewayWatched(watcher);
    const held = await heldAgentAt(gateway, 'traced');
    held.release();
    const agent = new HttpAgent({ url: `${gateway.url}/agui/traced`, threadId: 'life-4', headers: { traceparent: TRACEPARENT, tracestate: 'congo=t61rcWkgMzE' } });
    agent.messages = [userMessage('hello')];
    await agent.runAgent({ runId: 'life-run-4' });
    expect(held.headers[0]).toMatchObject({ traceparent: TRACEPARENT, tracestate: 'congo=t61rcWkgMzE', accept: 'text/event-stream' });
    expect(await gateway.store.runs.get('life-run-4')).toMatchObject({ context: { traceparent: TRACEPARENT, tracestate: 'congo=t61rcWkgMzE' } });
  });

  it('sees a submission refused with its code, and the context it came with', async () => {
    const watcher = new Watcher();
    const gateway = await gatewayWatched(watcher);
    const response = await fetch(`${gateway.url}/agui/nobody`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: TRACEPARENT },
      body: JSON.stringify({ threadId: 'life-3', runId: 'life-run-3', messages: [userMessage('hi')], tools: [], context: [], state: {}, forwardedProps: {} }),
    });
    expect(response.status).toBe(404);
    expect(watcher.moments).toEqual(['refused:agent_not_found -']);
    expect(watcher.contexts.get('refused:agent_not_found')).toEqual([{ traceparent: TRACEPARENT }]);
  });
});

/** An agent that ends with one interrupt, expiring in a minute, unless it is answered. */
function interrupting(h: Harness): void {
  h.provider.script = async function* (input) {
    yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
    if ((input.resume ?? []).length > 0) {
      yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId };
      return;
    }
    const expiresAt = new Date(h.clock.now() + 60_000).toISOString();
    yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId, outcome: { type: 'interrupt', interrupts: [{ id: 'i1', reason: 'confirm', expiresAt }] } };
  };
}

describe("an observer of an interrupt's life", () => {
  it('sees the ask answered by the run that resumes it, which is queued and runs as any other', async () => {
    const watcher = new Watcher();
    const h = await harness(await stores.freshStore(), { life: watcher });
    interrupting(h);
    await h.send('/ask');
    await h.settled();
    const answer = await h.send('yes', { resume: [{ interruptId: 'i1', status: 'resolved', payload: { approved: true } }] });
    expect(answer.ok).toBe(true);
    await h.settled();
    expect(await lifeOf(watcher, h.store, 'run-1')).toEqual([...RAN, 'answered:i1']);
    // The asks are answered (closed for the answer) before the answer's run is recorded.
    expect(watcher.moments.indexOf('answeredBy:run-2')).toBeLessThan(watcher.moments.indexOf('queued run-2'));
    expect(await lifeOf(watcher, h.store, 'run-2')).toEqual(RAN);
  });

  it('sees the ask expire when its timer fires past its expiresAt, and an answer after it refused interrupt_expired', async () => {
    const watcher = new Watcher();
    const h = await harness(await stores.freshStore(), { life: watcher });
    interrupting(h);
    await h.gateway.startRun({ agentId: 'scripted', input: h.input('/ask'), door: 'agui', principal: { tenant: 'anonymous', id: 'anonymous' }, context: { traceparent: TRACEPARENT } });
    await h.settled();
    h.clock.advance(61_000);
    await h.gateway.expireAsks('run-1');
    expect(watcher.of('run-1').at(-1)).toBe('expired:i1');
    expect(watcher.contexts.get('expired:i1')).toEqual([{ traceparent: TRACEPARENT }]);
    const late = await h.send('yes', { resume: [{ interruptId: 'i1', status: 'resolved', payload: {} }] });
    expect(late).toMatchObject({ ok: false, code: 'interrupt_expired' });
    expect(watcher.moments.at(-1)).toBe('refused:interrupt_expired -');
  });
});

describe("observers of runs' lives, composed", () => {
  it('are each told of every moment, in order, and one that throws breaks neither the run nor the others', async () => {
    const faults: string[] = [];
    const watcher = new Watcher();
    const throwing: RunLife = {
      started() {
        throw new Error('an observer that fails');
      },
      providerCall() {
        throw new Error('and fails again');
      },
    };
    const h = await harness(await stores.freshStore(), { life: composeRunLife([throwing, watcher], (error, moment) => faults.push(`${moment}: ${(error as Error).message}`)) });
    await h.send('hi');
    await h.settled();
    expect(await h.store.runs.get('run-1')).toMatchObject({ status: 'completed' });
    expect(await lifeOf(watcher, h.store, 'run-1')).toEqual(RAN);
    expect(faults).toEqual(['started: an observer that fails', 'providerCall: and fails again']);
  });

  it('give a provider call the headers of every observer', () => {
    const life = composeRunLife([{ providerCall: () => ({ headers: { traceparent: 'a' } }) }, { providerCall: () => ({ headers: { baggage: 'b' } }) }, {}]);
    const scope = life.providerCall?.({ run: {} as Run, agent: {} as never });
    expect(scope?.headers).toEqual({ traceparent: 'a', baggage: 'b' });
  });
});
