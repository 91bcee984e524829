import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventType, type RunAgentInput } from '@ag-ui/client';
import { serve, type HttpBindings } from '@hono/node-server';
import { Hono } from 'hono';
import { streamSSE, type SSEStreamingApi } from 'hono/streaming';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { ANONYMOUS } from '../../lambdas/core/model.js';
import { eventually } from '../support/core-harness.js';
import { aguiAgent, assistantText, startTestGateway, userMessage } from '../support/gateway.js';

const SECRET = 'sk-agent-secret-7d41c0';
const URL_SECRET = 'url-secret-93be2a';
const LIMITS = { idleTimeoutSeconds: 0.3, timeoutSeconds: 5 };

type Event = { type: string } & Record<string, unknown>;

interface Deferred {
  promise: Promise<void>;
  resolve(): void;
}

function deferred(): Deferred {
  let resolve!: () => void;
  const promise = new Promise<void>((settle) => (resolve = settle));
  return { promise, resolve };
}

/** What the scripted agents saw: each request's headers and RunAgentInput, and which requests were closed on them. */
const received: { path: string; headers: Headers; input: RunAgentInput }[] = [];
const closedRuns = new Map<string, Deferred>();
const closedRun = (runId: string) => closedRuns.get(runId) ?? closedRuns.set(runId, deferred()).get(runId)!;

const reply = (input: RunAgentInput, text: string): Event[] => [
  { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId },
  { type: 'TEXT_MESSAGE_START', messageId: `m-${input.runId}`, role: 'assistant' },
  { type: 'TEXT_MESSAGE_CONTENT', messageId: `m-${input.runId}`, delta: text },
  { type: 'TEXT_MESSAGE_END', messageId: `m-${input.runId}` },
  { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId },
];

const lastText = (input: RunAgentInput) => {
  const last = input.messages.at(-1);
  return typeof last?.content === 'string' ? last.content : '';
};

const send = (stream: SSEStreamingApi, event: Event) => stream.writeSSE({ data: JSON.stringify(event) });

/**
 * Stock AG-UI agents on loopback, one per path, each playing a script: the well-behaved and
 * the failures that real networks bring.
 */
function scriptedAgents() {
  const app = new Hono<{ Bindings: HttpBindings; Variables: { input: RunAgentInput } }>();
  app.use('*', async (c, next) => {
    const input = (await c.req.json()) as RunAgentInput;
    received.push({ path: c.req.path, headers: c.req.raw.headers, input });
    c.set('input', input);
    c.req.raw.signal.addEventListener('abort', () => closedRun(input.runId).resolve());
    await next();
  });
  const input = (c: { get(key: 'input'): RunAgentInput }) => c.get('input');

  app.post('/echo', (c) => streamSSE(c, async (s) => {
    for (const event of reply(input(c), `echo: ${lastText(input(c))}`)) await send(s, event);
  }));
  app.post('/slow', (c) => streamSSE(c, async (s) => {
    // Every pause is shorter than the 0.3 s idle limit; the whole run is longer.
    for (const event of reply(input(c), 'slow and steady')) {
      await send(s, event);
      await s.sleep(100);
    }
  }));
  app.post('/agent-error', (c) => streamSSE(c, async (s) => {
    await send(s, { type: 'RUN_STARTED', threadId: input(c).threadId, runId: input(c).runId });
    await send(s, { type: 'RUN_ERROR', message: 'the model refused', code: 'model_refused' });
    await send(s, { type: 'RUN_ERROR', message: 'and said so twice', code: 'model_refused_again' });
  }));
  app.post('/hold', (c) => streamSSE(c, async (s) => {
    const [started, opened, content] = reply(input(c), 'thinking…');
    for (const event of [started, opened, content]) await send(s, event);
    await new Promise<void>((resolve) => s.onAbort(resolve));
  }));
  app.post('/malformed', (c) => streamSSE(c, async (s) => {
    await send(s, { type: 'RUN_STARTED', threadId: input(c).threadId, runId: input(c).runId });
    await send(s, { type: 'TEXT_MESSAGE_START', role: 'assistant' });
  }));
  app.post('/not-json', (c) => streamSSE(c, async (s) => {
    await send(s, { type: 'RUN_STARTED', threadId: input(c).threadId, runId: input(c).runId });
    await s.writeSSE({ data: '{"type": "TEXT_MESSAGE_START", ' });
  }));
  app.post('/truncated', (c) => streamSSE(c, async (s) => {
    for (const event of reply(input(c), 'cut off').slice(0, 3)) await send(s, event);
  }));
  app.post('/dropped', (c) => streamSSE(c, async (s) => {
    await send(s, { type: 'RUN_STARTED', threadId: input(c).threadId, runId: input(c).runId });
    c.env.outgoing.destroy();
  }));
  app.post('/not-sse', (c) => c.json({ messages: [] }));
  app.post('/http-500', (c) => c.text(`upstream exploded ${'x'.repeat(5_000)}`, 500));
  app.post('/silent', () => new Promise<Response>(() => undefined));
  app.post('/too-long', (c) => streamSSE(c, async (s) => {
    const [started, opened] = reply(input(c), '');
    for (const event of [started, opened]) await send(s, event);
    // Never idle, never done: a chunk every 50 ms for as long as the gateway listens.
    while (!s.aborted) {
      await send(s, { type: 'TEXT_MESSAGE_CONTENT', messageId: opened.messageId as string, delta: '.' });
      await s.sleep(50);
    }
  }));
  return app;
}

async function listen(fetch: Parameters<typeof serve>[0]['fetch']): Promise<{ server: Server; url: string }> {
  return new Promise((resolve) => {
    const server = serve({ fetch, hostname: '127.0.0.1', port: 0 }, (info: AddressInfo) =>
      resolve({ server, url: `http://127.0.0.1:${info.port}` }),
    ) as Server;
  });
}

let gateway: LocalGateway;
let agents: { server: Server; url: string };
let closedPort: number;
const logs: string[] = [];

beforeAll(async () => {
  agents = await listen(scriptedAgents().fetch);
  const spare = await listen(() => new Response());
  closedPort = (spare.server.address() as AddressInfo).port;
  await new Promise((resolve) => spare.server.close(resolve));
  gateway = await startTestGateway({ log: (line) => logs.push(line) });
});

afterAll(async () => {
  await gateway?.close();
  agents?.server.closeAllConnections();
  await new Promise((resolve) => agents?.server.close(resolve));
});

const thread = (name: string) => `${name}-${Math.random().toString(36).slice(2)}`;

function admin(base: { url: string }, path: string, init: RequestInit & { json?: unknown } = {}): Promise<Response> {
  const { json, ...rest } = init;
  return fetch(`${base.url}/admin${path}`, {
    ...rest,
    ...(json !== undefined ? { body: JSON.stringify(json), headers: { 'Content-Type': 'application/json', ...rest.headers } } : {}),
  });
}

/** Registers an agent through the admin API, as an operator would. */
async function register(id: string, definition: Record<string, unknown>, base: { url: string } = gateway): Promise<void> {
  const response = await admin(base, `/agents/${id}`, { method: 'PUT', json: { description: `the ${id} agent`, ...LIMITS, ...definition } });
  expect(response.status, await response.clone().text()).toBeLessThan(300);
}

async function threadView(threadId: string, base: { url: string } = gateway) {
  const response = await fetch(`${base.url}/threads/${threadId}`);
  return (await response.json()) as {
    runs: { runId: string; status: string; reason?: string }[];
    messages: { role: string; content?: string }[];
  };
}

/** One run through funduq with the stock HttpAgent: what it saw, and whether runAgent threw. */
async function runThrough(agentId: string, text = 'hello', base: { url: string } = gateway) {
  const threadId = thread(agentId);
  const agent = aguiAgent(base, threadId, agentId);
  agent.messages = [userMessage(text)];
  const types: string[] = [];
  const errors: { code?: string; message: string }[] = [];
  let thrown: unknown;
  let newMessages: Parameters<typeof assistantText>[0] = [];
  try {
    ({ newMessages } = await agent.runAgent(
      {},
      {
        onEvent: ({ event }) => void types.push(event.type),
        onRunErrorEvent: ({ event }) => void errors.push(event),
      },
    ));
  } catch (error) {
    thrown = error;
  }
  const [run] = (await threadView(threadId, base)).runs;
  return { threadId, run, types, errors, thrown, newMessages };
}

/** A settled run's log, once its settle has appended the closing events its record held (a caller may read them from there first). */
async function storedEvents(runId: string): Promise<Event[]> {
  await eventually(async () => expect((await gateway.store.runs.get(runId))?.closingEvents).toBeUndefined());
  return (await gateway.store.events.read(runId, 0)).map((stored) => stored.event);
}

describe('an AG-UI agent registered by its URL', () => {
  it('streams a well-behaved agent to the stock HttpAgent, with its headers sent and the caller messages as sent', async () => {
    await register('echo', { url: `${agents.url}/echo`, headers: { Authorization: `Bearer ${SECRET}` } });

    const { run, types, newMessages } = await runThrough('echo', 'hello agent');

    expect(types[0]).toBe(EventType.RUN_STARTED);
    expect(types.at(-1)).toBe(EventType.RUN_FINISHED);
    expect(assistantText(newMessages)).toEqual(['echo: hello agent']);
    expect(run).toMatchObject({ status: 'completed' });
    const request = received.find((r) => r.input.runId === run.runId)!;
    expect(request.headers.get('authorization')).toBe(`Bearer ${SECRET}`);
    expect(request.headers.get('accept')).toBe('text/event-stream');
    expect(request.input.messages.map((m) => m.content)).toEqual(['hello agent']);
  });

  it('keeps relaying a slow agent whose every silence is shorter than its idle limit', async () => {
    await register('slow', { url: `${agents.url}/slow` });

    const { run, newMessages } = await runThrough('slow');

    expect(run).toMatchObject({ status: 'completed' });
    expect(assistantText(newMessages)).toEqual(['slow and steady']);
  });

  it('passes the caller forwardedProps untouched, strips a caller funduq key and adds funduq annotations', async () => {
    await register('props', { url: `${agents.url}/echo` });
    const threadId = thread('props');
    const agent = aguiAgent(gateway, threadId, 'props');
    agent.messages = [userMessage('first'), { id: 'a-0', role: 'assistant', content: 'earlier answer' }, userMessage('second')];

    await agent.runAgent({ forwardedProps: { mine: { deep: [1, 2] }, funduq: { principal: 'forged' } } });

    const { input } = received.find((r) => r.input.threadId === threadId)!;
    expect(input.messages.map((m) => m.content)).toEqual(['first', 'earlier answer', 'second']);
    expect(input.forwardedProps.mine).toEqual({ deep: [1, 2] });
    expect(input.forwardedProps.funduq).toEqual({ caller: { principal: 'anonymous', tenant: 'anonymous' }, door: 'agui' });
  });

  it('gives a run that came without the history (an A2A message) the thread history folded before it', async () => {
    await register('history', { url: `${agents.url}/echo` });
    const threadId = thread('history');
    const agent = aguiAgent(gateway, threadId, 'history');
    agent.messages = [userMessage('one')];
    await agent.runAgent();

    const started = await gateway.gateway.startRun({
      agentId: 'history',
      door: 'a2a',
      principal: ANONYMOUS,
      input: { threadId, runId: `a2a-${threadId}`, messages: [userMessage('two')], tools: [], context: [] },
    });
    expect(started.ok).toBe(true);
    await eventually(async () => expect((await threadView(threadId)).runs[1]?.status).toBe('completed'));

    const { input } = received.find((r) => r.input.runId === `a2a-${threadId}`)!;
    expect(input.messages.map((m) => m.content)).toEqual(['one', 'echo: one', 'two']);
  });

  it('relays the agent RUN_ERROR once and stores its code as the reason', async () => {
    await register('agent-error', { url: `${agents.url}/agent-error` });

    const { run, errors, types } = await runThrough('agent-error');

    expect(errors).toMatchObject([{ code: 'model_refused', message: 'the model refused' }]);
    expect(types.filter((t) => t === EventType.RUN_ERROR)).toHaveLength(1);
    expect(run).toMatchObject({ status: 'failed', reason: 'model_refused' });
    expect((await storedEvents(run.runId)).filter((e) => e.type === EventType.RUN_ERROR)).toHaveLength(1);
  });

  const failures: [code: string, what: string, url: () => string, limits?: Record<string, number>][] = [
    ['provider_unreachable', 'refuses the connection', () => `http://127.0.0.1:${closedPort}/?token=${URL_SECRET}`],
    ['provider_http_500', 'answers HTTP 500', () => `${agents.url}/http-500`],
    ['provider_not_agui', 'answers JSON instead of an event stream', () => `${agents.url}/not-sse`],
    ['provider_stream_ended_without_finishing', 'ends its stream without RUN_FINISHED', () => `${agents.url}/truncated`],
    ['provider_sent_malformed_event', 'sends a known event that breaks its schema', () => `${agents.url}/malformed`],
    ['provider_sent_malformed_event', 'sends data that is not JSON', () => `${agents.url}/not-json`],
    ['provider_disconnected', 'drops the connection mid-stream', () => `${agents.url}/dropped`],
    ['provider_idle', 'never answers', () => `${agents.url}/silent`],
    ['provider_timeout', 'streams past its time limit', () => `${agents.url}/too-long`, { timeoutSeconds: 0.5 }],
  ];

  it.each(failures)('fails the run with %s when the agent %s; the caller sees it as RUN_ERROR', async (code, _what, url, limits) => {
    const id = `fails-${Math.random().toString(36).slice(2, 8)}`;
    await register(id, { url: url(), headers: { 'X-Api-Key': SECRET }, ...limits });

    const { run, errors, types } = await runThrough(id);

    expect(errors).toHaveLength(1);
    expect(errors[0].code).toBe(code);
    expect(types.at(-1)).toBe(EventType.RUN_ERROR);
    expect(run).toMatchObject({ status: 'failed', reason: code });
    const stored = await storedEvents(run.runId);
    expect(stored.filter((e) => e.type === EventType.RUN_ERROR)).toEqual([expect.objectContaining({ code })]);
    expect(JSON.stringify(stored)).not.toContain(SECRET);
    expect(JSON.stringify(stored)).not.toContain(URL_SECRET);
  });

  it('aborts the request to the agent on cancel, and the run ends cancelled', async () => {
    await register('hold', { url: `${agents.url}/hold`, idleTimeoutSeconds: 30 });
    const threadId = thread('cancel');
    const agent = aguiAgent(gateway, threadId, 'hold');
    agent.messages = [userMessage('take your time')];
    let runId = '';
    let outcome: unknown;
    const running = agent.runAgent(
      {},
      {
        onRunStartedEvent: ({ event }) => void (runId = event.runId),
        onRunFinishedEvent: (params) => void (outcome = params.outcome),
      },
    );
    await eventually(() => expect(runId).not.toBe(''));

    const cancel = await fetch(`${gateway.url}/agui/hold/runs/${runId}/cancel`, { method: 'POST' });
    expect(cancel.status).toBe(202);

    await closedRun(runId).promise;
    await running;
    expect(outcome).toBe('cancelled');
    expect((await threadView(threadId)).runs[0]).toMatchObject({ status: 'cancelled', reason: 'cancel_requested' });
  });
});

describe('the admin routes', () => {
  it('show headers masked and URL credentials hidden; the public roster shows no headers at all', async () => {
    await register('secretive', {
      url: `https://user:${URL_SECRET}@agent.example/run?key=${URL_SECRET}`,
      headers: { Authorization: `Bearer ${SECRET}` },
      skills: [{ id: 'answer', name: 'Answer', description: 'answers questions', tags: ['qa'] }],
    });

    const one = await (await admin(gateway, '/agents/secretive')).text();
    const all = await (await admin(gateway, '/agents')).text();
    const roster = await (await fetch(`${gateway.url}/agents`)).text();

    for (const text of [one, all, roster]) {
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain(URL_SECRET);
    }
    expect(JSON.parse(one)).toMatchObject({
      id: 'secretive',
      provider: 'agui-http',
      url: 'https://***@agent.example/run?key=***',
      headers: { Authorization: '***' },
      timeoutSeconds: LIMITS.timeoutSeconds,
      takesInterjections: false,
      status: 'enabled',
    });
    const entry = (JSON.parse(roster) as { agents: Record<string, unknown>[] }).agents.find((a) => a.id === 'secretive');
    expect(entry).toEqual({
      id: 'secretive',
      description: 'the secretive agent',
      skills: [{ id: 'answer', name: 'Answer', description: 'answers questions', tags: ['qa'] }],
      takesInterjections: false,
      agui: '/agui/secretive',
    });
  });

  it('creates with 201, replaces with 200 and applies the defaults', async () => {
    const put = (json: unknown) => admin(gateway, '/agents/replaced', { method: 'PUT', json });
    const created = await put({ url: `${agents.url}/echo`, description: 'first' });
    expect(created.status).toBe(201);
    expect(await created.json()).toMatchObject({ timeoutSeconds: 900, idleTimeoutSeconds: 300, takesInterjections: false, status: 'enabled' });
    const replaced = await put({ id: 'replaced', url: `${agents.url}/echo`, description: 'second', takesInterjections: true });
    expect(replaced.status).toBe(200);
    expect(await (await admin(gateway, '/agents/replaced')).json()).toMatchObject({ description: 'second', takesInterjections: true });
  });

  it.each([
    ['url', { url: 'ftp://agent.example/' }],
    ['url', { url: 'not a url' }],
    ['description', { description: undefined }],
    ['id', { id: 'another-agent' }],
    ['timeoutSeconds', { timeoutSeconds: -1 }],
    ['idleTimeoutSeconds', { idleTimeoutSeconds: 'soon' }],
    // Numbers no store keeps (DynamoDB: 1e-130 to 1e125) or no timer holds (Node: 24.8 days), found by the fuzz.
    ['timeoutSeconds', { timeoutSeconds: 1.1394047562949023e-197 }],
    ['idleTimeoutSeconds', { idleTimeoutSeconds: 1e300 }],
    ['timeoutSeconds', { timeoutSeconds: 30 * 86_400 }],
    ['prices.perRun', { prices: { currency: 'USD', perRun: 1e-200 } }],
    ['prices.perThousandTokens.*.input', { prices: { currency: 'USD', perThousandTokens: { '*': { input: 1e200 } } } }],
    ['headers.bad header', { headers: { 'bad header': 'x' } }],
    ['headers.X-Injected', { headers: { 'X-Injected': 'a\r\nSet-Cookie: b' } }],
    // What a README might show as a placeholder: "…" has no byte in an HTTP header.
    ['headers.Authorization', { headers: { Authorization: 'Bearer sk-…' } }],
    // Headers of the connection, which fetch refuses to send (every run would fail provider_unreachable).
    ['headers.Upgrade', { headers: { Upgrade: 'websocket' } }],
    ['headers.transfer-encoding', { headers: { 'transfer-encoding': 'chunked' } }],
    ['skills.0.name', { skills: [{ id: 'x', description: 'd', tags: [] }] }],
    ['status', { status: 'paused' }],
    ['timeoutSecond', { timeoutSecond: 30 }],
  ])('refuses a definition with a bad %s with 400 naming the field', async (field, change) => {
    const response = await admin(gateway, '/agents/bad-one', {
      method: 'PUT',
      json: { url: `${agents.url}/echo`, description: 'bad', ...change },
    });
    expect(response.status).toBe(400);
    const { error } = (await response.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('invalid_input');
    expect(error.message).toContain(field);
    expect(error.message).not.toContain('Set-Cookie');
    expect((await admin(gateway, '/agents/bad-one')).status).toBe(404);
  });

  it('refuses a bad agent id in the path and a body that is not JSON with 400', async () => {
    const badId = await admin(gateway, '/agents/no%20spaces', { method: 'PUT', json: { url: `${agents.url}/echo`, description: 'd' } });
    expect(badId.status).toBe(400);
    expect(((await badId.json()) as { error: { message: string } }).error.message).toContain('id');
    const notJson = await admin(gateway, '/agents/fine', { method: 'PUT', body: '{nope', headers: { 'Content-Type': 'application/json' } });
    expect(notJson.status).toBe(400);
  });

  it('refuses to delete an agent with a running run (409 agent_in_use), and deletes it once the run settled (204)', async () => {
    await register('busy', { url: `${agents.url}/hold`, idleTimeoutSeconds: 30 });
    const agent = aguiAgent(gateway, thread('busy'), 'busy');
    agent.messages = [userMessage('hold on')];
    let runId = '';
    const running = agent.runAgent({}, { onRunStartedEvent: ({ event }) => void (runId = event.runId) });
    await eventually(() => expect(runId).not.toBe(''));

    const refused = await admin(gateway, '/agents/busy', { method: 'DELETE' });
    expect(refused.status).toBe(409);
    expect(await refused.json()).toMatchObject({ error: { code: 'agent_in_use' } });

    await fetch(`${gateway.url}/agui/busy/runs/${runId}/cancel`, { method: 'POST' });
    await running;
    const deleted = await admin(gateway, '/agents/busy', { method: 'DELETE' });
    expect(deleted.status).toBe(204);
    expect((await admin(gateway, '/agents/busy')).status).toBe(404);
    expect((await admin(gateway, '/agents/busy', { method: 'DELETE' })).status).toBe(404);
  });

  it('hides a disabled agent from the roster and refuses it new runs with 409 agent_disabled', async () => {
    await register('resting', { url: `${agents.url}/echo`, status: 'disabled' });

    const roster = (await (await fetch(`${gateway.url}/agents`)).json()) as { agents: { id: string }[] };
    expect(roster.agents.map((a) => a.id)).not.toContain('resting');
    const agent = aguiAgent(gateway, thread('resting'), 'resting');
    agent.messages = [userMessage('anyone there?')];
    await expect(agent.runAgent()).rejects.toMatchObject({ status: 409, payload: { error: { code: 'agent_disabled' } } });
  });

  it('requires the admin token as a bearer when one is set: 401 without it or with another, 200 with it', async () => {
    const guarded = await startTestGateway({ adminToken: 'admin-token-1' });
    try {
      const definition = { url: `${agents.url}/echo`, description: 'guarded' };
      const none = await admin(guarded, '/agents/guarded', { method: 'PUT', json: definition });
      const wrong = await admin(guarded, '/agents', { headers: { Authorization: 'Bearer admin-token-2' } });
      expect([none.status, wrong.status]).toEqual([401, 401]);
      expect(await none.json()).toMatchObject({ error: { code: 'unauthorized' } });
      expect(none.headers.get('WWW-Authenticate')).toContain('Bearer');

      const auth = { Authorization: 'Bearer admin-token-1' };
      expect((await admin(guarded, '/agents/guarded', { method: 'PUT', json: definition, headers: auth })).status).toBe(201);
      expect((await admin(guarded, '/agents', { headers: auth })).status).toBe(200);
      // The doors for callers take no admin token.
      expect((await fetch(`${guarded.url}/agents`)).status).toBe(200);
      expect(assistantText((await runThrough('guarded', 'hi', guarded)).newMessages)).toEqual(['echo: hi']);
    } finally {
      await guarded.close();
    }
  });

  it('warns at start when no admin token is set', async () => {
    expect(logs.some((line) => /warning: FUNDUQ_ADMIN_TOKEN is not set/.test(line))).toBe(true);
  });

  it('keeps a registered agent across a restart of the local gateway', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'funduq-agents-'));
    try {
      const first = await startTestGateway({ dataDir });
      await register('durable', { url: `${agents.url}/echo`, headers: { Authorization: `Bearer ${SECRET}` } }, first);
      await first.close();

      const second = await startTestGateway({ dataDir });
      try {
        expect(await (await admin(second, '/agents/durable')).json()).toMatchObject({ headers: { Authorization: '***' } });
        const { run, newMessages } = await runThrough('durable', 'still there?', second);
        expect(run.status).toBe('completed');
        expect(assistantText(newMessages)).toEqual(['echo: still there?']);
        const request = received.find((r) => r.input.runId === run.runId)!;
        expect(request.headers.get('authorization')).toBe(`Bearer ${SECRET}`);
      } finally {
        await second.close();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('never writes an agent secret to the log', () => {
    expect(logs.length).toBeGreaterThan(0);
    expect(logs.join('\n')).not.toContain(SECRET);
    expect(logs.join('\n')).not.toContain(URL_SECRET);
  });
});
