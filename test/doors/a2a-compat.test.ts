import type { AddressInfo } from 'node:net';
import { AgentCard } from '@a2a-js/sdk';
import { Client } from '@a2a-js/sdk/client';
import { LegacyJsonRpcTransport, LegacyRestTransport } from '@a2a-js/sdk/compat/v0_3/client';
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT, type LocalGateway } from '../../lambdas/runtimes/local.js';
import { artifactTexts, asTask, collect, data, send, stateName, summarise, text, userMessage } from '../support/a2a.js';
import { readSse, startTestGateway } from '../support/gateway.js';

let gateway: LocalGateway;
const clients: Record<string, Client> = {};
let lockedAgent: ServerType;

/** A stock AG-UI agent whose every run ends asking for credentials (an interrupt whose reason is auth). */
async function startLockedAgent(): Promise<{ server: ServerType; url: string }> {
  const app = new Hono();
  app.post('/', (c) =>
    streamSSE(c, async (sse) => {
      const { threadId, runId } = await c.req.json();
      const send = (event: object) => sse.writeSSE({ data: JSON.stringify(event) });
      await send({ type: 'RUN_STARTED', threadId, runId });
      await send({ type: 'TEXT_MESSAGE_START', messageId: `${runId}-m`, role: 'assistant' });
      await send({ type: 'TEXT_MESSAGE_CONTENT', messageId: `${runId}-m`, delta: 'sign in first' });
      await send({ type: 'TEXT_MESSAGE_END', messageId: `${runId}-m` });
      await send({ type: 'RUN_FINISHED', threadId, runId, outcome: { type: 'interrupt', interrupts: [{ id: `${runId}-i`, reason: 'auth', message: 'Sign in' }] } });
    }),
  );
  const server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/` };
}

/** What a 0.3 stream update says, the same on both bindings' wires. */
interface LegacyUpdate {
  kind: string;
  taskId?: string;
  final?: boolean;
  state?: string;
  parts?: { text?: string }[];
}

/** A 0.3 streaming call on the wire: a JSON-RPC method (JSON-schema shapes in envelopes), or an HTTP+JSON route under `/v1` (0.3 protobuf JSON). */
async function legacyCall(binding: string, agentId: string, rpc: { method: string; params: unknown }, rest: { path: string; body?: unknown }): Promise<LegacyUpdate[]> {
  const [url, body] =
    binding === 'JSON-RPC' ? [`${gateway.url}/a2a/${agentId}/`, { jsonrpc: '2.0', id: 1, ...rpc }] : [`${gateway.url}/a2a/${agentId}/rest/v1/${rest.path}`, rest.body];
  const init: RequestInit = { method: 'POST', ...(body !== undefined ? { headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) } : {}) };
  return legacyUpdates(binding, await fetch(url, init));
}

/** A 0.3 SendStreamingMessage: JSON-RPC's `message/stream` or HTTP+JSON's `POST /v1/message:stream`. */
function legacyStream(binding: string, agentId: string, text: string): Promise<LegacyUpdate[]> {
  const messageId = `m-${Date.now()}-${Math.random()}`;
  return legacyCall(
    binding,
    agentId,
    { method: 'message/stream', params: { message: { kind: 'message', messageId, role: 'user', parts: [{ kind: 'text', text }] } } },
    { path: 'message:stream', body: { message: { messageId, role: 'ROLE_USER', content: [{ text }] } } },
  );
}

/** A 0.3 resubscription: JSON-RPC's `tasks/resubscribe`, or HTTP+JSON's `POST /v1/tasks/{id}:subscribe`. */
function legacySubscription(binding: string, agentId: string, taskId: string): Promise<LegacyUpdate[]> {
  return legacyCall(binding, agentId, { method: 'tasks/resubscribe', params: { id: taskId } }, { path: `tasks/${taskId}:subscribe` });
}

/** A 0.3 stream's updates, each read as one, the same on both bindings' wires. */
async function legacyUpdates(binding: string, response: Response): Promise<LegacyUpdate[]> {
  expect(response.headers.get('content-type')).toContain('text/event-stream');
  const STATES: Record<string, string> = { TASK_STATE_INPUT_REQUIRED: 'input-required', TASK_STATE_AUTH_REQUIRED: 'auth-required', TASK_STATE_COMPLETED: 'completed', TASK_STATE_WORKING: 'working' };
  return (await readSse(response)).events.map(({ data }) => {
    if (binding === 'JSON-RPC') {
      const result = data.result as { kind: string; id?: string; taskId?: string; final?: boolean; status?: { state: string }; artifact?: { parts: { text?: string }[] }; artifacts?: { parts: { text?: string }[] }[] };
      return { kind: result.kind, taskId: result.taskId ?? result.id, final: result.final, state: result.status?.state, parts: result.artifact?.parts ?? result.artifacts?.flatMap((artifact) => artifact.parts) };
    }
    const { statusUpdate, artifactUpdate } = data as { statusUpdate?: { final?: boolean; status: { state: string } }; artifactUpdate?: { artifact: { parts: { text?: string }[] } } };
    if (statusUpdate) return { kind: 'status-update', final: statusUpdate.final, state: STATES[statusUpdate.status.state] ?? statusUpdate.status.state };
    if (artifactUpdate) return { kind: 'artifact-update', parts: artifactUpdate.artifact.parts };
    const { task } = data as { task?: { id: string; artifacts?: { parts: { text?: string }[] }[] } };
    return { kind: 'task', taskId: task?.id, parts: task?.artifacts?.flatMap((artifact) => artifact.parts) };
  });
}

beforeAll(async () => {
  gateway = await startTestGateway({ pushAllowHttp: true, push: { allowLoopback: true } });
  const locked = await startLockedAgent();
  lockedAgent = locked.server;
  await gateway.store.agents.put({ ...DEMO_AGENT, id: 'locked', description: 'asks for credentials', provider: { kind: 'agui-http', url: locked.url } });
  // As a 0.3 client finds the agent: its 0.3 card, JSON-RPC at `url`, HTTP+JSON in `additionalInterfaces`.
  const legacyCard = await (await fetch(`${gateway.url}/a2a/demo/.well-known/agent-card.json`)).json();
  const card = AgentCard.fromJSON(await (await fetch(`${gateway.url}/a2a/demo/.well-known/agent-card.json`, { headers: { 'A2A-Version': '1.0' } })).json());
  const restUrl = legacyCard.additionalInterfaces.find((i: { transport: string }) => i.transport === 'HTTP+JSON').url;
  // The SDK's 0.3 client transports: `A2A-Version: 0.3`, 0.3 method names, routes and shapes on the wire.
  clients['JSON-RPC'] = new Client(new LegacyJsonRpcTransport({ endpoint: legacyCard.url }), card);
  clients['HTTP+JSON'] = new Client(new LegacyRestTransport({ endpoint: restUrl }), card);
});
afterAll(async () => {
  await gateway?.close();
  lockedAgent?.close();
});

describe('the agent card an A2A 0.3 client reads', () => {
  it('is 0.3 shaped when asked for without a version: JSON-RPC as its url, HTTP+JSON beside it, the 1.0 interfaces alongside', async () => {
    const card = await (await fetch(`${gateway.url}/a2a/demo/.well-known/agent-card.json`)).json();
    expect(card).toMatchObject({
      name: 'demo',
      url: `${gateway.url}/a2a/demo/`,
      preferredTransport: 'JSONRPC',
      additionalInterfaces: [{ transport: 'HTTP+JSON', url: `${gateway.url}/a2a/demo/rest` }],
      protocolVersion: '0.3',
      capabilities: { streaming: true, pushNotifications: true },
    });
    expect(card.supportedInterfaces).toEqual(expect.arrayContaining([expect.objectContaining({ protocolVersion: '1.0' })]));
  });
});

describe.each(['JSON-RPC', 'HTTP+JSON'])('an A2A 0.3 client over %s', (binding) => {
  let client: Client;
  beforeAll(() => {
    client = clients[binding];
  });

  it('sends a message, streams one, reads and cancels tasks through the compat layer', async () => {
    expect(client.protocolVersion).toBe('0.3');
    const task = asTask(await client.sendMessage(send(userMessage('hello from 0.3'))));
    expect(stateName(task.status?.state)).toBe('TASK_STATE_COMPLETED');
    expect(artifactTexts(task)).toEqual(['echo: hello from 0.3']);

    const events = await collect(client.sendMessageStream(send(userMessage('/ask'))));
    const { kinds, states } = summarise(events);
    expect(kinds[0]).toBe('task');
    expect(states.at(-1)).toBe('TASK_STATE_INPUT_REQUIRED');
    const asked = events[0].payload!.value as { id: string };

    const answered = asTask(await client.sendMessage(send(userMessage('sure', { taskId: asked.id }))));
    expect(artifactTexts(answered).at(-1)).toBe('answer: "sure"');
    expect((await client.getTask({ id: asked.id, tenant: '' })).id).toBe(asked.id);

    const waiting = asTask(await client.sendMessage(send(userMessage('/ask'))));
    expect(stateName((await client.cancelTask({ id: waiting.id, tenant: '', metadata: {} })).status?.state)).toBe('TASK_STATE_CANCELED');
    await expect(client.getTask({ id: 'no-such-task', tenant: '' })).rejects.toMatchObject({ name: 'TaskNotFoundError' });
  });

  it('subscribes to a running task and keeps push configs', async () => {
    const task = asTask(await client.sendMessage(send(userMessage('/slow 5'), { returnImmediately: true })));
    const events = await collect(client.resubscribeTask({ id: task.id, tenant: '' }));
    expect(summarise(events).states.at(-1)).toBe('TASK_STATE_COMPLETED');

    const config = { tenant: '', id: 'compat-hook', taskId: task.id, url: 'http://127.0.0.1:9/hook', token: 't', authentication: undefined };
    expect(await client.createTaskPushNotificationConfig(config)).toMatchObject({ id: 'compat-hook', url: config.url });
    expect(await client.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'compat-hook' })).toMatchObject({ id: 'compat-hook' });
  });

  it("keeps what it sends as it was sent: a file part, a data answer, a push config's authentication", async () => {
    const picture = { content: { $case: 'url' as const, value: 'https://example.com/cat.png' }, metadata: undefined, filename: '', mediaType: 'image/png' };
    const asked = asTask(await client.sendMessage(send(userMessage([text('/ask'), picture]))));
    expect(stateName(asked.status?.state)).toBe('TASK_STATE_INPUT_REQUIRED');
    const history = (await client.getTask({ id: asked.id, tenant: '' })).history;
    expect(history[0].parts.map((part) => part.content)).toEqual([
      { $case: 'text', value: '/ask' },
      { $case: 'url', value: 'https://example.com/cat.png' },
    ]);
    expect(history[0].parts[1].mediaType).toBe('image/png');
    const answered = asTask(await client.sendMessage(send(userMessage([data({ approved: true })], { taskId: asked.id }))));
    expect(artifactTexts(answered).at(-1)).toBe('answer: {"approved":true}');

    const config = { tenant: '', id: 'kept', taskId: asked.id, url: 'http://127.0.0.1:9/kept', token: 'tok', authentication: { scheme: 'Bearer', credentials: 'secret' } };
    await client.createTaskPushNotificationConfig(config);
    const [listed] = (await client.listTaskPushNotificationConfig({ tenant: '', taskId: asked.id, pageSize: 0, pageToken: '' })).configs;
    expect(listed).toMatchObject({ id: 'kept', taskId: asked.id, url: config.url, token: 'tok', authentication: { scheme: 'Bearer', credentials: 'secret' } });
    await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: asked.id, id: 'kept' });
    await expect(client.getTaskPushNotificationConfig({ tenant: '', taskId: asked.id, id: 'kept' })).rejects.toMatchObject({ name: 'TaskNotFoundError' });
  });
});

describe.each(['JSON-RPC', 'HTTP+JSON'])('an A2A 0.3 stream over %s', (binding) => {
  it.each([
    ['demo', '/ask', 'input-required'],
    ['locked', 'let me in', 'auth-required'],
  ])('that ends waiting for its caller (%s: %s) says final: true on its last event, %s', async (agentId, text, state) => {
    const updates = await legacyStream(binding, agentId, text);
    expect(updates.at(-1)).toMatchObject({ kind: 'status-update', final: true, state });
    expect(updates.slice(0, -1).filter((update) => update.final === true)).toEqual([]);
  });

  it('that subscribes to a task waiting for its caller says the task, then final: true', async () => {
    const [opening] = await legacyStream(binding, 'demo', '/ask');
    const subscribed = await legacySubscription(binding, 'demo', opening.taskId!);
    expect(subscribed.map((update) => update.kind)).toEqual(['task', 'status-update']);
    expect(subscribed.at(-1)).toMatchObject({ final: true, state: 'input-required' });
  });

  it('says final: true on its last event when the task completes, and sends no artifact update without parts', async () => {
    const updates = await legacyStream(binding, 'demo', 'chunked for 0.3');
    expect(updates.at(-1)).toMatchObject({ kind: 'status-update', final: true, state: 'completed' });
    const chunks = updates.filter((update) => update.kind === 'artifact-update');
    expect(chunks.filter((chunk) => chunk.parts?.length === 0)).toEqual([]);
    // The stream opens with the Task as the record has it: text the agent sent before the caller's
    // first read is in its artifacts, the rest comes in artifact updates (a busy machine moves the line).
    const [opening] = updates;
    expect(opening.kind).toBe('task');
    const said = [opening, ...chunks].map((update) => (update.parts ?? []).map((part) => part.text).join('')).join('');
    expect(said).toBe('echo: chunked for 0.3');
  });
});
