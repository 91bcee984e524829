import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventType, type RunAgentResult } from '@ag-ui/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { eventually, FakeClock } from '../support/core-harness.js';
import { aguiAgent, assistantText, readSse, startTestGateway, userMessage } from '../support/gateway.js';

let gateway: LocalGateway;
const clock = new FakeClock(Date.now());

beforeAll(async () => {
  gateway = await startTestGateway({ threadQueueLimit: 2, clock });
});
afterAll(async () => {
  await gateway?.close();
});

const thread = (name: string) => `${name}-${Math.random().toString(36).slice(2)}`;

async function threadView(threadId: string) {
  const response = await fetch(`${gateway.url}/threads/${threadId}`);
  return (await response.json()) as {
    runs: { runId: string; status: string; reason?: string }[];
    queue: { runId: string }[];
    activeRun?: { runId: string };
    openAsks: { id: string; expiresAt?: string }[];
    messages: { role: string; content?: string }[];
  };
}

describe('the AG-UI door', () => {
  it('streams the demo agent to the stock HttpAgent', async () => {
    const agent = aguiAgent(gateway, thread('hello'));
    agent.messages = [userMessage('hello there')];
    const seen: string[] = [];
    const result = await agent.runAgent({}, { onEvent: ({ event }) => void seen.push(event.type) });
    expect(seen[0]).toBe(EventType.RUN_STARTED);
    expect(seen.at(-1)).toBe(EventType.RUN_FINISHED);
    expect(seen.filter((t) => t === EventType.TEXT_MESSAGE_CONTENT).length).toBeGreaterThan(1);
    expect(assistantText(result.newMessages)).toEqual(['echo: hello there']);
  });

  it('queues a run behind the running run of its thread and streams it when it starts', async () => {
    const threadId = thread('queue');
    const first = aguiAgent(gateway, threadId);
    first.messages = [userMessage('/slow 15')];
    const firstRun = first.runAgent();
    await eventually(async () => expect((await threadView(threadId)).activeRun).toBeDefined());

    const second = aguiAgent(gateway, threadId);
    second.messages = [userMessage('after you')];
    const order: string[] = [];
    const secondRun = second.runAgent().then((r) => (order.push('second'), r));
    await eventually(async () => expect((await threadView(threadId)).queue).toHaveLength(1));
    await firstRun.then(() => order.push('first'));
    const result = await secondRun;
    expect(order).toEqual(['first', 'second']);
    expect(assistantText(result.newMessages)).toEqual(['echo: after you']);
  });

  it('refuses a run past the thread queue limit with 429, Retry-After and thread_queue_full', async () => {
    const threadId = thread('full');
    const running = aguiAgent(gateway, threadId);
    running.messages = [userMessage('/slow 40')];
    const runningRun = running.runAgent();
    await eventually(async () => expect((await threadView(threadId)).activeRun).toBeDefined());
    const waiting = [aguiAgent(gateway, threadId), aguiAgent(gateway, threadId)].map((a, i) => {
      a.messages = [userMessage(`waiting ${i}`)];
      return a.runAgent();
    });
    await eventually(async () => expect((await threadView(threadId)).queue).toHaveLength(2));

    const response = await fetch(`${gateway.url}/agui/demo`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ threadId, runId: 'one-too-many', messages: [userMessage('me too')] }),
    });
    expect(response.status).toBe(429);
    expect(response.headers.get('Retry-After')).toMatch(/^\d+$/);
    expect(await response.json()).toMatchObject({ error: { code: 'thread_queue_full' } });

    const refused = aguiAgent(gateway, threadId);
    refused.messages = [userMessage('and me')];
    await expect(refused.runAgent()).rejects.toMatchObject({ status: 429 });
    await Promise.all([runningRun, ...waiting]);
    expect((await threadView(threadId)).runs.map((r) => r.runId)).not.toContain('one-too-many');
  });

  it('answers an interrupt with a resume run, and refuses the second of two answers', async () => {
    const threadId = thread('ask');
    const agent = aguiAgent(gateway, threadId);
    agent.messages = [userMessage('/ask')];
    await agent.runAgent();
    expect(agent.pendingInterrupts).toHaveLength(1);
    const [interrupt] = agent.pendingInterrupts;
    expect(interrupt.reason).toBe('confirmation');
    expect((await threadView(threadId)).openAsks.map((a) => a.id)).toEqual([interrupt.id]);

    const resume = [{ interruptId: interrupt.id, status: 'resolved' as const, payload: { approved: true } }];
    const rival = aguiAgent(gateway, threadId);
    rival.messages = [...agent.messages];
    const [mine, theirs] = await Promise.allSettled([agent.runAgent({ resume }), rival.runAgent({ resume })]);
    const outcomes = [mine, theirs].map((r) => r.status);
    expect(outcomes.sort()).toEqual(['fulfilled', 'rejected']);
    const refusal = [mine, theirs].find((r) => r.status === 'rejected') as PromiseRejectedResult;
    expect(refusal.reason).toMatchObject({ status: 409, payload: { error: { code: 'no_open_ask' } } });
    const answered = [mine, theirs].find((r) => r.status === 'fulfilled') as PromiseFulfilledResult<RunAgentResult>;
    expect(assistantText(answered.value.newMessages)).toEqual(['answer: {"approved":true}']);
    expect((await threadView(threadId)).openAsks).toEqual([]);
  });

  it('refuses an answer after the interrupt expired with 410 interrupt_expired', async () => {
    const threadId = thread('expiry');
    const agent = aguiAgent(gateway, threadId);
    agent.messages = [userMessage('/ask 60')];
    await agent.runAgent();
    const [interrupt] = agent.pendingInterrupts;
    expect(Date.parse(interrupt.expiresAt!)).toBe(clock.now() + 60_000);
    clock.ms += 61_000;
    await expect(
      agent.runAgent({ resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { approved: true } }] }),
    ).rejects.toMatchObject({ status: 410, payload: { error: { code: 'interrupt_expired' } } });
  });

  it('cancels a running run on request; the stream ends with the cancelled outcome', async () => {
    const threadId = thread('cancel');
    const agent = aguiAgent(gateway, threadId);
    agent.messages = [userMessage('/slow 500')];
    let runId = '';
    let outcome: unknown;
    const run = agent.runAgent(
      {},
      {
        onRunStartedEvent: ({ event }) => void (runId = event.runId),
        onRunFinishedEvent: (params) => void (outcome = params.outcome),
      },
    );
    await eventually(() => expect(runId).not.toBe(''));
    const response = await fetch(`${gateway.url}/agui/demo/runs/${runId}/cancel`, { method: 'POST' });
    expect(response.status).toBe(202);
    expect(await response.json()).toMatchObject({ runId, status: 'cancelling', cancelRequested: true });
    await run;
    expect(outcome).toBe('cancelled');
    expect((await threadView(threadId)).runs[0]).toMatchObject({ status: 'cancelled', reason: 'cancel_requested' });
    const again = await fetch(`${gateway.url}/agui/demo/runs/${runId}/cancel`, { method: 'POST' });
    expect(again.status).toBe(409);
  });

  it('keeps a run going when its reader disconnects, and replays it from Last-Event-ID', async () => {
    const threadId = thread('replay');
    const runId = `run-${threadId}`;
    const controller = new AbortController();
    const response = await fetch(`${gateway.url}/agui/demo`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream' },
      body: JSON.stringify({ threadId, runId, messages: [userMessage('/slow 10')] }),
      signal: controller.signal,
    });
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const reader = response.body!.getReader();
    await reader.read();
    controller.abort();

    await eventually(async () => expect((await threadView(threadId)).runs[0].status).toBe('completed'));
    const replay = await fetch(`${gateway.url}/agui/demo/runs/${runId}/events`, { headers: { 'Last-Event-ID': '2' } });
    const { events } = await readSse(replay);
    expect(events[0].id).toBe('3');
    expect(events.map((e) => Number(e.id))).toEqual(events.map((_, i) => i + 3));
    expect(events.at(-1)?.data.type).toBe(EventType.RUN_FINISHED);
    const full = await readSse(await fetch(`${gateway.url}/agui/demo/runs/${runId}/events`));
    expect(full.events).toHaveLength(events.length + 2);
  });

  it('re-attaches a repeated runId with the same input and refuses it with another (409)', async () => {
    const threadId = thread('idem');
    const body = { threadId, runId: `r-${threadId}`, messages: [userMessage('once')] };
    const post = (b: unknown) =>
      fetch(`${gateway.url}/agui/demo`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(b) });
    const first = await readSse(await post(body));
    const second = await readSse(await post(body));
    expect(second.events.map((e) => e.data)).toEqual(first.events.map((e) => e.data));
    const conflict = await post({ ...body, messages: [userMessage('twice')] });
    expect(conflict.status).toBe(409);
    expect(await conflict.json()).toMatchObject({ error: { code: 'run_id_conflict' } });
    expect((await threadView(threadId)).runs).toHaveLength(1);
  });

  it('sends heartbeat comments while a queued run waits', async () => {
    const quick = await startTestGateway({ heartbeatMs: 100 });
    try {
      const threadId = thread('beat');
      const blocker = aguiAgent(quick, threadId);
      blocker.messages = [userMessage('/slow 20')];
      const blocking = blocker.runAgent();
      await eventually(async () => {
        const view = await (await fetch(`${quick.url}/threads/${threadId}`)).json();
        expect(view.activeRun).toBeDefined();
      });
      const waiting = await fetch(`${quick.url}/agui/demo`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ threadId, runId: `w-${threadId}`, messages: [userMessage('hi')] }),
      });
      const { comments, events } = await readSse(waiting);
      await blocking;
      expect(comments.length).toBeGreaterThan(0);
      expect(events.at(-1)?.data.type).toBe(EventType.RUN_FINISHED);
    } finally {
      await quick.close();
    }
  });

  it('answers bad input with 4xx and a code, never 500', async () => {
    const post = (path: string, body: string, type = 'application/json') =>
      fetch(`${gateway.url}${path}`, { method: 'POST', headers: { 'Content-Type': type }, body });
    const cases: [Response, number, string][] = [
      [await post('/agui/demo', '{not json'), 400, 'invalid_input'],
      [await post('/agui/demo', '[]'), 400, 'invalid_input'],
      [await post('/agui/demo', JSON.stringify({ threadId: 't', runId: 'r' })), 400, 'invalid_input'],
      [await post('/agui/demo', 'hello', 'text/plain'), 400, 'invalid_input'],
      [await post('/agui/nobody', JSON.stringify({ threadId: 't', runId: 'r', messages: [] })), 404, 'agent_not_found'],
      [await post('/agui/demo/runs/nope/cancel', ''), 404, 'run_not_found'],
      [await fetch(`${gateway.url}/agui/demo/runs/nope/events`), 404, 'run_not_found'],
      [await fetch(`${gateway.url}/threads/nope`), 404, 'thread_not_found'],
      [await fetch(`${gateway.url}/nowhere`), 404, 'not_found'],
      [await post('/agui/demo', JSON.stringify({ threadId: 't', runId: 'r', messages: [], pad: 'x'.repeat(2_000_000) })), 413, 'payload_too_large'],
    ];
    for (const [response, status, code] of cases) {
      expect({ status: response.status, body: await response.json() }).toMatchObject({ status, body: { error: { code } } });
    }
    const missing = await post('/agui/demo', JSON.stringify({ threadId: 't', runId: 'r' }));
    expect(((await missing.json()) as { error: { message: string } }).error.message).toContain('messages');
  });
});

describe('the local gateway', () => {
  it('keeps its data across a restart', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'funduq-'));
    try {
      const threadId = thread('durable');
      const first = await startTestGateway({ dataDir });
      const agent = aguiAgent(first, threadId);
      agent.messages = [userMessage('remember me')];
      await agent.runAgent();
      await first.close();

      const second = await startTestGateway({ dataDir });
      try {
        const view = await (await fetch(`${second.url}/threads/${threadId}`)).json();
        expect(view.messages.map((m: { content?: string }) => m.content)).toEqual(['remember me', 'echo: remember me']);
        expect(view.runs[0].status).toBe('completed');
      } finally {
        await second.close();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
