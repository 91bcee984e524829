import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { eventually } from '../support/core-harness.js';
import { startHeldAgent, type HeldAgent } from '../support/held-agent.js';
import { readSse, startTestGateway, userMessage } from '../support/gateway.js';

let gateway: LocalGateway;
let held: HeldAgent;

beforeAll(async () => {
  held = await startHeldAgent();
  gateway = await startTestGateway({ threadQueueLimit: 8 });
  const admin = await fetch(`${gateway.url}/admin/agents/held`, {
    method: 'PUT',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ url: held.url, description: 'holds every run until the test lets go', timeoutSeconds: 60, idleTimeoutSeconds: 60 }),
  });
  expect(admin.status).toBe(201);
});
afterAll(async () => {
  held?.release();
  await gateway?.close();
  await held?.close();
});

type View = {
  runs: { runId: string; status: string; parentRunId?: string; reason?: string }[];
  activeRun?: { runId: string };
  queue: { runId: string }[];
};

async function view(threadId: string): Promise<View> {
  return (await fetch(`${gateway.url}/threads/${threadId}`)).json() as Promise<View>;
}

function post(agentId: string, body: object): Promise<Response> {
  return fetch(`${gateway.url}/agui/${agentId}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
}

describe('concurrent callers over HTTP', () => {
  it('takes one running and eight queued of a hundred concurrent sends to one thread, refuses the rest with 429, and runs every accepted one in arrival order', async () => {
    const threadId = `burst-${randomUUID()}`;
    const responses = await Promise.all(
      Array.from({ length: 100 }, (_, i) => post('held', { threadId, runId: `burst-${i}-${randomUUID()}`, messages: [userMessage(`send ${i}`)] })),
    );

    const accepted = responses.filter((response) => response.status === 200);
    const refused = responses.filter((response) => response.status === 429);
    expect(accepted).toHaveLength(9);
    expect(refused).toHaveLength(91);
    for (const response of refused) {
      expect(response.headers.get('Retry-After')).toMatch(/^\d+$/);
      expect(await response.json()).toMatchObject({ error: { code: 'thread_queue_full' } });
    }
    const before = await eventually(async () => {
      const now = await view(threadId);
      expect(now.runs.filter((run) => run.status === 'running')).toHaveLength(1);
      expect(now.queue).toHaveLength(8);
      return now;
    });
    expect(before.runs).toHaveLength(9);
    const ids = accepted.map((response) => response.headers.get('X-Funduq-Run-Id'));
    expect(new Set(before.runs.map((run) => run.runId))).toEqual(new Set(ids));

    held.release();
    const streams = await Promise.all(accepted.map((response) => readSse(response)));
    for (const { events } of streams) expect(events.at(-1)?.data.type).toBe('RUN_FINISHED');
    const after = await view(threadId);
    expect(after.runs.map((run) => run.status)).toEqual(Array(9).fill('completed'));
    // The thread's runs are listed in arrival order; the agent saw them in that order, one at a time.
    const order = held.received.filter((input) => input.threadId === threadId).map((input) => input.runId);
    expect(order).toEqual(after.runs.map((run) => run.runId));
  });

  it('makes exactly one of fifty concurrent answers to one ask the answer', async () => {
    const threadId = `answers-${randomUUID()}`;
    const asked = await readSse(await post('demo', { threadId, runId: randomUUID(), messages: [userMessage('/ask')] }));
    const finished = asked.events.at(-1)?.data as { outcome: { type: string; interrupts: { id: string }[] } };
    expect(finished.outcome.type).toBe('interrupt');
    const resume = [{ interruptId: finished.outcome.interrupts[0].id, status: 'resolved', payload: { approved: true } }];

    const responses = await Promise.all(
      Array.from({ length: 50 }, () => post('demo', { threadId, runId: randomUUID(), messages: [], resume })),
    );

    expect(responses.filter((response) => response.status === 200)).toHaveLength(1);
    const refusals = responses.filter((response) => response.status !== 200);
    expect(refusals).toHaveLength(49);
    for (const response of refusals) expect(await response.json()).toMatchObject({ error: { code: 'no_open_ask' } });
    await readSse(responses.find((response) => response.status === 200)!);
    const children = (await view(threadId)).runs.filter((run) => run.parentRunId !== undefined);
    expect(children).toHaveLength(1);
    expect(children[0].status).toBe('completed');
  });

  it('records one cancel of twenty concurrent cancels of a queued run: one 202, the others 409 task_not_cancelable', async () => {
    const threadId = `cancel-queued-${randomUUID()}`;
    const [runningId, queuedId] = [randomUUID(), randomUUID()];
    const running = await post('demo', { threadId, runId: runningId, messages: [userMessage('/slow 50')] });
    const queued = await post('demo', { threadId, runId: queuedId, messages: [userMessage('wait for me')] });
    expect((await view(threadId)).queue.map((run) => run.runId)).toEqual([queuedId]);

    const responses = await Promise.all(
      Array.from({ length: 20 }, () => fetch(`${gateway.url}/agui/demo/runs/${queuedId}/cancel`, { method: 'POST' })),
    );

    expect(responses.filter((response) => response.status === 202)).toHaveLength(1);
    const refusals = responses.filter((response) => response.status !== 202);
    expect(refusals).toHaveLength(19);
    for (const response of refusals) expect(await response.json()).toMatchObject({ error: { code: 'task_not_cancelable' } });
    const { events } = await readSse(queued);
    expect(events.map((event) => [event.id, event.data.type])).toEqual([
      ['1', 'RUN_STARTED'],
      ['2', 'RUN_FINISHED'],
    ]);
    expect(events[1].data.outcome).toEqual({ type: 'cancelled' });
    await fetch(`${gateway.url}/agui/demo/runs/${runningId}/cancel`, { method: 'POST' });
    await readSse(running);
    expect((await view(threadId)).runs.map((run) => [run.status, run.reason])).toEqual([
      ['cancelled', 'cancel_requested'],
      ['cancelled', 'cancelled_while_queued'],
    ]);
  });

  it('records one cancel of twenty concurrent cancels of a running run: the agent is asked to stop once, the run ends once', async () => {
    const threadId = `cancel-running-${randomUUID()}`;
    const runId = randomUUID();
    const running = await post('demo', { threadId, runId, messages: [userMessage('/slow 200')] });
    await eventually(async () => expect((await view(threadId)).activeRun?.runId).toBe(runId));

    const responses = await Promise.all(
      Array.from({ length: 20 }, () => fetch(`${gateway.url}/agui/demo/runs/${runId}/cancel`, { method: 'POST' })),
    );

    // A cancel that arrives once the run has ended is refused as for any ended run; the ones before
    // it are the same request (cancelling), and none changes what the first one did.
    const answers = await Promise.all(responses.map(async (response) => [response.status, await response.json()] as const));
    const accepted = answers.filter(([status]) => status === 202);
    expect(accepted.length).toBeGreaterThan(0);
    for (const [, body] of accepted) expect(body).toMatchObject({ runId, status: 'cancelling', cancelRequested: true });
    for (const [status, body] of answers.filter(([code]) => code !== 202)) {
      expect([status, body]).toMatchObject([409, { error: { code: 'task_not_cancelable' } }]);
    }
    const { events } = await readSse(running);
    const closing = events.filter((event) => event.data.type === 'RUN_FINISHED' || event.data.type === 'RUN_ERROR');
    expect(closing.map((event) => event.data)).toEqual([{ type: 'RUN_FINISHED', threadId, runId, outcome: { type: 'cancelled' } }]);
    expect((await view(threadId)).runs).toMatchObject([{ runId, status: 'cancelled', reason: 'cancel_requested' }]);
  });
});
