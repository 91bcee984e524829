import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RunAgentInput } from '@ag-ui/core';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { aguiAgent, readSse, startTestGateway, userMessage } from '../support/gateway.js';

let gateway: LocalGateway;
let limited: LocalGateway;
let agentServer: Server;

/**
 * An AG-UI agent on loopback that misbehaves as its last message asks: `big-event` (100 small
 * events with one of 500 KB at the fifth place), `huge-event` (one of 10 MB), `restart` (a second
 * RUN_STARTED, and a message closed twice), `bad-order` (content for a message never started),
 * `three-asks` (an interrupt of three asks); anything else is answered politely.
 */
async function startHostileAgent(): Promise<string> {
  const app = new Hono().post('/', async (c) => {
    const input = (await c.req.json()) as RunAgentInput;
    const said = String(input.messages.findLast((m) => m.role === 'user')?.content ?? '');
    const { threadId, runId } = input;
    return streamSSE(c, async (stream) => {
      const send = (event: Record<string, unknown>) => stream.writeSSE({ data: JSON.stringify(event) });
      await send({ type: 'RUN_STARTED', threadId, runId });
      if ((input.resume ?? []).length > 0) {
        await send({ type: 'RUN_FINISHED', threadId, runId });
        return;
      }
      switch (said) {
        case 'big-event':
          await send({ type: 'TEXT_MESSAGE_START', messageId: 'm', role: 'assistant' });
          for (let i = 0; i < 100; i++) await send({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: i === 4 ? 'x'.repeat(500 * 1024) : `${i} ` });
          await send({ type: 'TEXT_MESSAGE_END', messageId: 'm' });
          break;
        case 'huge-event':
          await send({ type: 'CUSTOM', name: 'blob', value: 'x'.repeat(10 * 1024 * 1024) });
          break;
        case 'restart':
          await send({ type: 'RUN_STARTED', threadId, runId });
          await send({ type: 'TEXT_MESSAGE_START', messageId: 'm', role: 'assistant' });
          await send({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: 'still here' });
          await send({ type: 'TEXT_MESSAGE_END', messageId: 'm' });
          await send({ type: 'TEXT_MESSAGE_END', messageId: 'm' });
          break;
        case 'bad-order':
          await send({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'never-started', delta: 'orphan' });
          break;
        case 'wide-ask':
          // An interrupt of 100 KB: it fits beside a small input, not beside one of 300 KB.
          await send({
            type: 'RUN_FINISHED',
            threadId,
            runId,
            outcome: { type: 'interrupt', interrupts: [{ id: 'wide', reason: 'confirm', payload: { plan: 'p'.repeat(100 * 1024) } }] },
          });
          return;
        case 'three-asks':
          await send({
            type: 'RUN_FINISHED',
            threadId,
            runId,
            outcome: { type: 'interrupt', interrupts: ['a', 'b', 'c'].map((id) => ({ id, reason: 'confirm' })) },
          });
          return;
      }
      await send({ type: 'RUN_FINISHED', threadId, runId });
    });
  });
  agentServer = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s as Server));
  });
  return `http://127.0.0.1:${(agentServer.address() as AddressInfo).port}/`;
}

beforeAll(async () => {
  const url = await startHostileAgent();
  gateway = await startTestGateway();
  limited = await startTestGateway({ tenantConcurrentRuns: 20 });
  for (const g of [gateway, limited]) {
    await g.gateway.putAgent({ id: 'hostile', description: 'misbehaves', provider: { kind: 'agui-http', url }, takesInterjections: false, timeoutSeconds: 60, idleTimeoutSeconds: 60 });
  }
});
afterAll(async () => {
  await gateway?.close();
  await limited?.close();
  agentServer?.closeAllConnections();
  await new Promise((resolve) => agentServer?.close(resolve));
});

function postRaw(g: LocalGateway, agentId: string, body: string): Promise<Response> {
  return fetch(`${g.url}/agui/${agentId}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
}
const input = (threadId: string, runId: string, extra = '') =>
  `{"threadId":${JSON.stringify(threadId)},"runId":${JSON.stringify(runId)},"messages":[{"id":"${runId}-m","role":"user","content":"hi"}]${extra}}`;
const thread = async (g: LocalGateway, threadId: string) => fetch(`${g.url}/threads/${encodeURIComponent(threadId)}`);

describe('a request that cannot be stored', () => {
  const unstorable: [string, string, number, RegExp][] = [
    ['a number past a double (1e400 reads as Infinity)', ',"state":{"score":1e400}', 400, /RunAgentInput\.state\.score: a number must be finite/],
    ['10,000 levels of nesting', `,"state":${'['.repeat(10_000)}${']'.repeat(10_000)}`, 400, /nested more than 30 levels/],
    ['a __proto__ key', ',"state":{"__proto__":{"admin":true}}', 400, /the key "__proto__" cannot be stored/],
    ['a constructor key (DynamoDB\'s marshaller reads it as the type)', ',"state":{"shape":{"constructor":{"name":"Set"}}}', 400, /state\.shape: the key "constructor" cannot be stored/],
    ['a number past DynamoDB\'s range', ',"forwardedProps":{"big":1.5e300}', 400, /forwardedProps\.big: a number must be .*DynamoDB's numbers/],
    ['a number below DynamoDB\'s range', ',"state":[5e-324]', 400, /DynamoDB's numbers/],
    // DynamoDB's largest, 9.99…9e125 with 38 nines, is 1e126 as a double: the first number too large (found by the fuzz).
    ['1e126, the double of DynamoDB\'s largest number', ',"state":{"edge":1e126}', 400, /state\.edge: a number must be .*DynamoDB's numbers/],
    ['~112k empty arrays: under 350 KB as JSON, over 400 KB once stored', `,"state":[${Array.from({ length: 112_000 }, () => '[]').join(',')}]`, 413, /KB of the record/],
  ];

  it.each(unstorable)('is refused before anything is written: %s', async (_what, extra, status, message) => {
    const response = await postRaw(gateway, 'demo', input(`bad-${status}-${extra.length}`, `r-${extra.length}`, extra));
    expect(response.status).toBe(status);
    expect((await response.json()).error.message).toMatch(message);
    // The first message of a thread opened nothing.
    expect((await thread(gateway, `bad-${status}-${extra.length}`)).status).toBe(404);
  });

  it('leaves a thread its places after nine of them, and a limited tenant its places after twenty', async () => {
    const [extra] = unstorable[0].slice(1);
    expect((await readSse(await postRaw(gateway, 'demo', input('kept', 'kept-0')))).events.at(-1)?.data.type).toBe('RUN_FINISHED');
    for (let i = 1; i <= 9; i++) expect((await postRaw(gateway, 'demo', input('kept', `kept-bad-${i}`, extra as string))).status).toBe(400);
    const queued = await Promise.all(Array.from({ length: 9 }, (_, i) => postRaw(gateway, 'demo', input('kept', `kept-ok-${i}`))));
    expect(queued.map((response) => response.status)).toEqual(Array(9).fill(200));
    await Promise.all(queued.map(readSse));
    expect((await (await thread(gateway, 'kept')).json()).runs).toHaveLength(10);

    for (let i = 0; i < 20; i++) expect((await postRaw(limited, 'demo', input(`lim-${i}`, `lim-bad-${i}`, extra as string))).status).toBe(400);
    const ok = await postRaw(limited, 'demo', input('lim-ok', 'lim-ok'));
    expect(ok.status).toBe(200);
    await readSse(ok);
  });
});

describe('an A2A request nested far past what the record takes', () => {
  const deep = `{"a":`.repeat(20_000) + '0' + '}'.repeat(20_000);
  const message = (version: '1.0' | '0.3') =>
    version === '1.0'
      ? `{"messageId":"deep-${Math.random()}","role":"ROLE_USER","parts":[{"text":"hi"}],"metadata":${deep}}`
      : `{"kind":"message","messageId":"deep-${Math.random()}","role":"user","parts":[{"kind":"text","text":"hi"}],"metadata":${deep}}`;
  const post = (path: string, body: string, version?: string) =>
    fetch(`${gateway.url}/a2a/demo${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...(version ? { 'A2A-Version': version } : {}) }, body });

  it('is refused as invalid params on every binding, not a stack overflow', async () => {
    for (const method of ['SendMessage', 'SendStreamingMessage']) {
      const answer = await (await post('', `{"jsonrpc":"2.0","id":1,"method":"${method}","params":{"message":${message('1.0')}}}`, '1.0')).json();
      expect(answer.error, method).toMatchObject({ code: -32602, message: expect.stringContaining('levels deep') });
    }
    for (const method of ['message/send', 'message/stream']) {
      const answer = await (await post('', `{"jsonrpc":"2.0","id":1,"method":"${method}","params":{"message":${message('0.3')}}}`)).json();
      expect(answer.error, method).toMatchObject({ code: -32602, message: expect.stringContaining('levels deep') });
    }
    for (const path of ['/rest/message:send', '/rest/message:stream']) {
      const response = await post(path, `{"message":${message('1.0')},"configuration":{"historyLength":${'['.repeat(20_000)}${']'.repeat(20_000)}}}`, '1.0');
      expect(response.status, path).toBe(400);
      expect((await response.json()).error.message, path).toContain('levels deep');
    }
  });
});

describe('an answer that cannot be stored', () => {
  it('leaves the asks open for the proper answer, on AG-UI', async () => {
    const asked = await readSse(await postRaw(gateway, 'demo', `{"threadId":"ans","runId":"ans-1","messages":[{"id":"a1","role":"user","content":"/ask 60"}]}`));
    const interrupt = (asked.events.at(-1)?.data.outcome as { interrupts: { id: string }[] }).interrupts[0].id;
    const resume = (payload: string) => `{"threadId":"ans","runId":"ans-${payload.length}","messages":[],"resume":[{"interruptId":"${interrupt}","status":"resolved","payload":${payload}}]}`;
    expect((await postRaw(gateway, 'demo', resume('{"approved":1e400}'))).status).toBe(400);
    const proper = await postRaw(gateway, 'demo', resume('{"approved":true}'));
    expect(proper.status).toBe(200);
    expect((await readSse(proper)).events.at(-1)?.data.type).toBe('RUN_FINISHED');
  });

  it('is refused whole on A2A when its copies (one per ask) would not fit, and a smaller one is taken', async () => {
    const rpc = (params: Record<string, unknown>) =>
      fetch(`${gateway.url}/a2a/hostile`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'A2A-Version': '1.0' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params }),
      }).then((response) => response.json());
    const asked = await rpc({ message: { messageId: 'three-1', role: 'ROLE_USER', parts: [{ text: 'three-asks' }] } });
    const taskId = asked.result.task.id as string;
    expect(asked.result.task.status.state).toBe('TASK_STATE_INPUT_REQUIRED');
    const reply = (messageId: string, text: string) => rpc({ message: { messageId, taskId, role: 'ROLE_USER', parts: [{ text }] } });
    // 150 KB, copied into each of three resume entries: 450 KB.
    const big = await reply('three-2', 'y'.repeat(150 * 1024));
    expect(big.error).toMatchObject({ message: expect.stringMatching(/KB of the record/) });
    // Sent as text: a client's JSON.stringify would turn Infinity into null.
    const infinite = await fetch(`${gateway.url}/a2a/hostile`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'A2A-Version': '1.0' },
      body: `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"three-3","taskId":"${taskId}","role":"ROLE_USER","parts":[{"data":{"approved":1e400}}]}}}`,
    }).then((response) => response.json());
    expect(infinite.error).toMatchObject({ message: expect.stringMatching(/message\.parts\[0\]\.data\.approved: a number must be finite/) });
    const small = await reply('three-4', 'yes');
    expect(small.result.task.status.state).toBe('TASK_STATE_COMPLETED');
  });
});

describe('a hostile agent', () => {
  async function run(said: string, runId: string) {
    const body = `{"threadId":${JSON.stringify(`h-${runId}`)},"runId":"${runId}","messages":[{"id":"${runId}-m","role":"user","content":"${said}"}]}`;
    const live = await readSse(await postRaw(gateway, 'hostile', body));
    const replay = await readSse(await fetch(`${gateway.url}/agui/hostile/runs/${runId}/events`));
    const view = await (await thread(gateway, `h-${runId}`)).json();
    return { live: live.events, replay: replay.events, run: view.runs[0] };
  }
  const seqs = (events: { id?: string }[]) => events.map((event) => Number(event.id));
  const contiguous = (events: { id?: string }[]) => seqs(events).every((seq, i) => seq === i + 1);

  it('sending an event too large to store fails the run provider_event_too_large, with no holes in its log', async () => {
    const { live, replay, run: ended } = await run('big-event', 'big');
    expect(ended).toMatchObject({ status: 'failed', reason: 'provider_event_too_large' });
    expect(contiguous(live) && contiguous(replay)).toBe(true);
    expect(seqs(replay)).toEqual(seqs(live));
    expect(live.map((event) => event.data.type).filter((type) => type === 'RUN_FINISHED' || type === 'RUN_ERROR')).toEqual(['RUN_ERROR']);

    const huge = await run('huge-event', 'huge');
    expect(huge.run).toMatchObject({ status: 'failed', reason: 'provider_event_too_large' });
  });

  it('ending with asks that do not fit beside the run\'s input fails the run provider_event_too_large; small asks fit beside any input', async () => {
    const ending = async (runId: string, said: string, padding: number) => {
      // The agent reads the last user message: the padding goes before it.
      const messages = [{ id: `${runId}-pad`, role: 'user', content: 'x'.repeat(padding) }, { id: `${runId}-m`, role: 'user', content: said }];
      await readSse(await postRaw(gateway, 'hostile', JSON.stringify({ threadId: `h-${runId}`, runId, messages })));
      return gateway.store.runs.get(runId);
    };
    expect(await ending('wide-small-input', 'wide-ask', 10)).toMatchObject({ status: 'completed', outcome: 'interrupt', asks: { wide: { state: 'open' } } });
    expect(await ending('wide-large-input', 'wide-ask', 300 * 1024)).toMatchObject({ status: 'failed', reason: 'provider_event_too_large' });
    expect(await ending('small-large-input', 'three-asks', 340 * 1024)).toMatchObject({ status: 'completed', outcome: 'interrupt', asks: { a: { state: 'open' }, c: { state: 'open' } } });
  });

  it('sending a second RUN_STARTED and closing a message twice: both left out and noted, the stock client is content', async () => {
    const { live, run: ended } = await run('restart', 'restart');
    expect(live.filter((event) => event.data.type === 'RUN_STARTED')).toHaveLength(1);
    expect(live.filter((event) => event.data.type === 'TEXT_MESSAGE_END')).toHaveLength(1);
    expect(ended).toMatchObject({ status: 'completed' });
    const stored = await gateway.store.runs.get('restart');
    expect(stored?.droppedEvents).toEqual({ count: 2, first: 'a second RUN_STARTED' });

    const agent = aguiAgent(gateway, 'h-stock', 'hostile');
    agent.messages = [userMessage('restart')];
    const { newMessages } = await agent.runAgent();
    expect(newMessages.at(-1)).toMatchObject({ role: 'assistant', content: 'still here' });
  });

  it('breaking the event order fails the run provider_sent_malformed_event, so no stock client gets a stream it refuses', async () => {
    const { live, run: ended } = await run('bad-order', 'bad-order');
    expect(ended).toMatchObject({ status: 'failed', reason: 'provider_sent_malformed_event' });
    expect(live.map((event) => event.data.type)).toEqual(['RUN_STARTED', 'RUN_ERROR']);
    const agent = aguiAgent(gateway, 'h-stock-2', 'hostile');
    agent.messages = [userMessage('bad-order')];
    // The stock client reads the run's RUN_ERROR as the run's end, not a stream it refuses.
    await expect(agent.runAgent()).resolves.toMatchObject({ newMessages: [] });
  });
});

describe('ids outside Latin-1', () => {
  it.each([
    ['a thread id', { threadId: 'waits-\ud800', runId: 'fine' }, 'threadId'],
    ['a run id', { threadId: 'fine', runId: 'asks-\udc00' }, 'runId'],
  ])('refuse %s holding a lone surrogate with 400 naming it: it has no UTF-8 form, so two such ids would be one key', async (_what, ids, field) => {
    const response = await postRaw(gateway, 'demo', JSON.stringify({ ...ids, messages: [userMessage('hello')] }));
    expect(response.status).toBe(400);
    const { error } = (await response.json()) as { error: { code: string; message: string } };
    expect(error).toMatchObject({ code: 'invalid_input', message: `${field} must be well-formed Unicode (it holds a lone surrogate)` });
    expect(await gateway.store.runs.get(ids.runId)).toBeUndefined();
  });

  it.each([
    ['Cyrillic', 'тред-1'],
    ['CJK', '线程-1'],
    ['emoji', 'thread-🧵'],
    ['a BOM', '\uFEFFthread'],
    ['a combining mark', 'thre\u0301ad'],
  ])('work on the run, its stream and its replay: %s', async (_what, threadId) => {
    const runId = `${threadId}-run`;
    const response = await postRaw(gateway, 'demo', JSON.stringify({ threadId, runId, messages: [userMessage('hello')] }));
    expect(response.status).toBe(200);
    expect(response.headers.get('x-funduq-thread-id')).toBeNull();
    const { events } = await readSse(response);
    expect(events[0].data).toMatchObject({ type: 'RUN_STARTED', threadId, runId });
    expect(events.at(-1)?.data.type).toBe('RUN_FINISHED');
    expect((await gateway.store.runs.get(runId))?.status).toBe('completed');
  });
});
