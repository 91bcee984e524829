import type { Task } from '@a2a-js/sdk';
import { ClientFactory, type Client } from '@a2a-js/sdk/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT, type LocalGateway } from '../../lambdas/runtimes/local.js';
import { ADDRESSED_RUN_ID_KEY } from '../../lambdas/core/interjection.js';
import { ANONYMOUS } from '../../lambdas/core/model.js';
import {
  a2aClient,
  artifactTexts,
  asTask,
  BINDINGS,
  collect,
  data,
  funduq,
  partText,
  send,
  stateName,
  summarise,
  text,
  userMessage,
} from '../support/a2a.js';
import { eventually, FakeClock } from '../support/core-harness.js';
import { aguiAgent, assistantText, readSse, startTestGateway, userMessage as aguiMessage } from '../support/gateway.js';

let gateway: LocalGateway;
const clock = new FakeClock(Date.now());

beforeAll(async () => {
  gateway = await startTestGateway({ threadQueueLimit: 2, clock });
  await gateway.store.agents.put({ ...DEMO_AGENT, id: 'other', description: 'another demo agent' });
});
afterAll(async () => {
  await gateway?.close();
});

const rpc = (body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${gateway.url}/a2a/demo`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'A2A-Version': '1.0', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });

describe('the A2A agent card', () => {
  it('is A2A 1.0 shaped, with both bindings at absolute URLs and the capabilities funduq has', async () => {
    const response = await fetch(`${gateway.url}/a2a/demo/.well-known/agent-card.json`, { headers: { 'A2A-Version': '1.0' } });
    expect(response.status).toBe(200);
    const card = await response.json();
    expect(card).toMatchObject({
      name: 'demo',
      description: DEMO_AGENT.description,
      capabilities: { streaming: true, pushNotifications: true },
      supportedInterfaces: expect.arrayContaining([
        { url: `${gateway.url}/a2a/demo/`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
        { url: `${gateway.url}/a2a/demo/rest`, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' },
      ]),
    });
    expect(card.version).toEqual(expect.any(String));
    expect(card.skills.length).toBeGreaterThan(0);
  });

  it("is found by the stock ClientFactory from the agent's URL as the gateway shows it, and from every URL the card names", async () => {
    const shown = `${gateway.url}/a2a/demo/`;
    const card = await (await fetch(`${shown}.well-known/agent-card.json`, { headers: { 'A2A-Version': '1.0' } })).json();
    const legacyCard = await (await fetch(`${shown}.well-known/agent-card.json`)).json();
    const urls = new Set([shown, legacyCard.url, ...card.supportedInterfaces.map((i: { url: string }) => i.url)]);
    expect(urls).toEqual(new Set([shown, `${shown}rest`]));
    for (const url of urls) {
      const client = await new ClientFactory().createFromUrl(url);
      const task = asTask(await client.sendMessage(send(userMessage(`found from ${url}`))));
      expect(artifactTexts(task)).toEqual([`echo: found from ${url}`]);
    }
  });

  it('answers a client given the agent\'s URL without its "/" with a 404 that says where the card is', async () => {
    await expect(new ClientFactory().createFromUrl(`${gateway.url}/a2a/demo`)).rejects.toThrow(/a2a\/\.well-known\/agent-card\.json: 404/);
    const response = await fetch(`${gateway.url}/a2a/.well-known/agent-card.json`);
    expect(response.status).toBe(404);
    expect((await response.json()).error.message).toContain('/a2a/{agentId}/.well-known/agent-card.json');
    // The URL without its "/" is still the agent's JSON-RPC endpoint.
    const answer = await rpc({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 'nope' } });
    expect((await answer.json()).error.code).toBe(-32001);
  });

  it('lists the skills the registry gives an agent, and the interjection extension when it takes interjections', async () => {
    await gateway.store.agents.put({
      ...DEMO_AGENT,
      id: 'skilled',
      takesInterjections: true,
      skills: [{ id: 'echo', name: 'Echo', description: 'says it back', tags: ['demo'], examples: ['hello'] }],
    });
    const card = await (await fetch(`${gateway.url}/a2a/skilled/.well-known/agent-card.json`, { headers: { 'A2A-Version': '1.0' } })).json();
    expect(card.skills).toEqual([{ id: 'echo', name: 'Echo', description: 'says it back', tags: ['demo'], examples: ['hello'] }]);
    expect(card.capabilities.extensions.map((e: { uri: string }) => e.uri)).toEqual([
      'https://github.com/hukaichun/funduq/ext/interjection/v1',
      'https://github.com/hukaichun/funduq/ext/push-signing/v1',
    ]);
  });

  it('takes its URLs from the public URL setting when one is given', async () => {
    const behindProxy = await startTestGateway({ publicUrl: 'https://agents.example.com/' });
    try {
      const card = await (await fetch(`${behindProxy.url}/a2a/demo/.well-known/agent-card.json`, { headers: { 'A2A-Version': '1.0' } })).json();
      expect(card.supportedInterfaces.map((i: { url: string }) => i.url)).toContain('https://agents.example.com/a2a/demo/');
    } finally {
      await behindProxy.close();
    }
  });

  it('answers 404 for an agent that does not exist', async () => {
    const response = await fetch(`${gateway.url}/a2a/nobody/.well-known/agent-card.json`);
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ error: { code: 'agent_not_found' } });
  });
});

describe.each(BINDINGS)('the A2A door over %s', (binding) => {
  let client: Client;
  beforeAll(async () => {
    client = await a2aClient(gateway, binding);
  });

  it('answers a message with the completed task: its text as an artifact, both messages in its history', async () => {
    const message = userMessage('hello there');
    const task = asTask(await client.sendMessage(send(message)));
    expect(stateName(task.status?.state)).toBe('TASK_STATE_COMPLETED');
    expect(artifactTexts(task)).toEqual(['echo: hello there']);
    expect(task.history.map((m) => [m.role, m.parts.map(partText).join('')])).toEqual([
      [1, 'hello there'],
      [2, 'echo: hello there'],
    ]);
    expect(task.history[0].messageId).toBe(message.messageId);
    expect(task.contextId).not.toBe('');
  });

  it('returns at once with returnImmediately, and GetTask later reads the task done', async () => {
    const task = asTask(await client.sendMessage(send(userMessage('/slow 5'), { returnImmediately: true })));
    expect(['TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING']).toContain(stateName(task.status?.state));
    await eventually(async () => {
      const later = await client.getTask({ id: task.id, tenant: '' });
      expect(stateName(later.status?.state)).toBe('TASK_STATE_COMPLETED');
    });
  });

  it('keeps only the last historyLength messages', async () => {
    const task = asTask(await client.sendMessage(send(userMessage('count me'), { historyLength: 1 })));
    expect(task.history.map((m) => m.parts.map(partText).join(''))).toEqual(['echo: count me']);
    expect((await client.getTask({ id: task.id, tenant: '', historyLength: 0 })).history).toEqual([]);
  });

  it('continues a context: the agent is given the earlier messages, and the task is new', async () => {
    const first = asTask(await client.sendMessage(send(userMessage('one'))));
    const second = asTask(await client.sendMessage(send(userMessage('two', { contextId: first.contextId }))));
    expect(second.contextId).toBe(first.contextId);
    expect(second.id).not.toBe(first.id);
    const run = await gateway.gateway.getRun(second.id, ANONYMOUS);
    expect(run?.input.messages.map((m) => m.content)).toEqual(['two']);
    expect(artifactTexts(second)).toEqual(['echo: two']);
  });

  it('streams the Task first, then status and artifact updates, and the final status last; GetTask agrees', async () => {
    const events = await collect(client.sendMessageStream(send(userMessage('stream me please'))));
    const { kinds, states, text: texts } = summarise(events);
    expect(kinds[0]).toBe('task');
    expect(kinds.at(-1)).toBe('statusUpdate');
    expect(states.at(-1)).toBe('TASK_STATE_COMPLETED');
    expect(states).toContain('TASK_STATE_WORKING');
    expect(kinds.filter((k) => k === 'artifactUpdate').length).toBeGreaterThan(1);
    const first = events[0].payload!.value as Task;
    const read = await client.getTask({ id: first.id, tenant: '' });
    expect([...texts.values()]).toEqual(artifactTexts(read));
    expect(stateName(read.status?.state)).toBe(states.at(-1));
  });

  it('carries the request metadata to the agent as forwardedProps, and the message metadata on the message', async () => {
    const message = userMessage('with metadata', { metadata: { mood: 'curious' } });
    const task = asTask(await client.sendMessage(send(message, {}, { caller: 'tests', funduq: { forged: true } })));
    const run = await gateway.gateway.getRun(task.id, ANONYMOUS);
    expect(run?.input.forwardedProps).toEqual({ caller: 'tests' });
    expect(run?.input.messages[0]).toMatchObject({ metadata: { mood: 'curious' } });
    expect(task.history[0].metadata).toEqual({ mood: 'curious' });
  });

  it('hands a file part to the agent as an AG-UI content part', async () => {
    const image = { content: { $case: 'url' as const, value: 'https://example.com/cat.png' }, metadata: undefined, filename: 'cat.png', mediaType: 'image/png' };
    const task = asTask(await client.sendMessage(send(userMessage([text('look'), image]))));
    const run = await gateway.gateway.getRun(task.id, ANONYMOUS);
    expect(run?.input.messages[0].content).toEqual([
      { type: 'text', text: 'look' },
      { type: 'image', source: { type: 'url', value: 'https://example.com/cat.png', mimeType: 'image/png' }, metadata: { filename: 'cat.png' } },
    ]);
    expect(task.history[0].parts[1]).toMatchObject({ content: { $case: 'url', value: 'https://example.com/cat.png' }, mediaType: 'image/png' });
  });

  it('leaves an interrupt as INPUT_REQUIRED with the open ask, and a text reply answers it with the text', async () => {
    const asked = asTask(await client.sendMessage(send(userMessage('/ask'))));
    expect(stateName(asked.status?.state)).toBe('TASK_STATE_INPUT_REQUIRED');
    expect(asked.status?.message?.parts.map(partText)).toEqual(['Confirm?']);
    const [ask] = funduq(asked).openAsks as { id: string; kind: string; reason: string; responseSchema: unknown }[];
    expect(ask).toMatchObject({ kind: 'interrupt', reason: 'confirmation', responseSchema: { type: 'object' } });

    const answered = asTask(await client.sendMessage(send(userMessage('yes please', { taskId: asked.id }))));
    expect(answered.id).toBe(asked.id);
    expect(stateName(answered.status?.state)).toBe('TASK_STATE_COMPLETED');
    expect(artifactTexts(answered)).toEqual(['I need your confirmation.', 'answer: "yes please"']);
    expect(funduq(answered).openAsks).toBeUndefined();
    const runs = funduq(answered).runs as { runId: string }[];
    expect(runs).toHaveLength(2);
    const answer = await gateway.gateway.getRun(runs[1].runId, ANONYMOUS);
    expect(answer?.input.resume).toEqual([{ interruptId: ask.id, status: 'resolved', payload: 'yes please' }]);
  });

  it('answers an interrupt with a data reply, and a tool call with a text reply', async () => {
    const asked = asTask(await client.sendMessage(send(userMessage('/ask'))));
    const answered = asTask(await client.sendMessage(send(userMessage([data({ approved: true })], { taskId: asked.id }))));
    expect(artifactTexts(answered).at(-1)).toBe('answer: {"approved":true}');

    const tool = asTask(await client.sendMessage(send(userMessage('/tool'))));
    expect(stateName(tool.status?.state)).toBe('TASK_STATE_INPUT_REQUIRED');
    expect(funduq(tool).openAsks).toEqual([expect.objectContaining({ kind: 'tool_call', toolCallName: 'confirm_action' })]);
    expect(funduq(tool).agui_events).toEqual(expect.arrayContaining([expect.objectContaining({ event: expect.objectContaining({ type: 'TOOL_CALL_START' }) })]));
    const done = asTask(await client.sendMessage(send(userMessage('did it', { taskId: tool.id }))));
    expect(stateName(done.status?.state)).toBe('TASK_STATE_COMPLETED');
    expect(artifactTexts(done).at(-1)).toBe('tool result: did it');
  });

  it('refuses a second answer to a task that no longer waits with UnsupportedOperation', async () => {
    const asked = asTask(await client.sendMessage(send(userMessage('/ask'))));
    await client.sendMessage(send(userMessage('first', { taskId: asked.id })));
    await expect(client.sendMessage(send(userMessage('second', { taskId: asked.id })))).rejects.toMatchObject({
      name: 'UnsupportedOperationError',
      message: expect.stringContaining('not waiting'),
    });
  });

  it('refuses an answer after the ask expired, and reads the task FAILED naming the expiry', async () => {
    const asked = asTask(await client.sendMessage(send(userMessage('/ask 60'))));
    const [ask] = funduq(asked).openAsks as { expiresAt: string }[];
    expect(Date.parse(ask.expiresAt)).toBe(clock.now() + 60_000);
    clock.ms += 61_000;
    await expect(client.sendMessage(send(userMessage('too late', { taskId: asked.id })))).rejects.toMatchObject({
      name: 'UnsupportedOperationError',
      message: expect.stringContaining('expired'),
    });
    const read = await client.getTask({ id: asked.id, tenant: '' });
    expect(stateName(read.status?.state)).toBe('TASK_STATE_FAILED');
    expect(read.status?.message?.parts.map(partText).join('')).toContain('expired');
  });

  it('cancels a queued task at once, a running one by request, a waiting one with its asks, and refuses a finished one', async () => {
    const running = asTask(await client.sendMessage(send(userMessage('/slow 200'), { returnImmediately: true })));
    await eventually(async () => expect(stateName((await client.getTask({ id: running.id, tenant: '' })).status?.state)).toBe('TASK_STATE_WORKING'));
    const queued = asTask(await client.sendMessage(send(userMessage('wait', { contextId: running.contextId }), { returnImmediately: true })));
    expect(stateName(queued.status?.state)).toBe('TASK_STATE_SUBMITTED');

    const cancelledQueued = await client.cancelTask({ id: queued.id, tenant: '', metadata: {} });
    expect(stateName(cancelledQueued.status?.state)).toBe('TASK_STATE_CANCELED');

    // A cancel is a request: the task reads WORKING with the request noted until its agent stops,
    // which on a busy machine can be before the answer is read.
    const cancelling = await client.cancelTask({ id: running.id, tenant: '', metadata: {} });
    const state = stateName(cancelling.status?.state);
    expect(['TASK_STATE_WORKING', 'TASK_STATE_CANCELED']).toContain(state);
    if (state === 'TASK_STATE_WORKING') expect(funduq(cancelling).cancelRequested).toBe(true);
    await eventually(async () => expect(stateName((await client.getTask({ id: running.id, tenant: '' })).status?.state)).toBe('TASK_STATE_CANCELED'));

    const waiting = asTask(await client.sendMessage(send(userMessage('/ask'))));
    const cancelledWaiting = await client.cancelTask({ id: waiting.id, tenant: '', metadata: {} });
    expect(stateName(cancelledWaiting.status?.state)).toBe('TASK_STATE_CANCELED');
    expect(funduq(cancelledWaiting).openAsks).toBeUndefined();

    await expect(client.cancelTask({ id: waiting.id, tenant: '', metadata: {} })).rejects.toMatchObject({ name: 'TaskNotCancelableError' });
  });

  it('reads a failed run as FAILED with the reason in the status message', async () => {
    const task = asTask(await client.sendMessage(send(userMessage('/fail'))));
    expect(stateName(task.status?.state)).toBe('TASK_STATE_FAILED');
    expect(task.status?.message?.parts.map(partText).join('')).toContain('failed, as asked');
  });

  it('names unknown tasks, other agents\' tasks and unknown contexts with the A2A errors', async () => {
    const mine = asTask(await client.sendMessage(send(userMessage('mine'))));
    const other = await a2aClient(gateway, binding, 'other');
    await expect(client.getTask({ id: 'no-such-task', tenant: '' })).rejects.toMatchObject({ name: 'TaskNotFoundError' });
    await expect(other.getTask({ id: mine.id, tenant: '' })).rejects.toMatchObject({ name: 'TaskNotFoundError' });
    await expect(other.sendMessage(send(userMessage('hi', { taskId: mine.id })))).rejects.toMatchObject({ name: 'TaskNotFoundError' });
    await expect(client.sendMessage(send(userMessage('hi', { contextId: 'no-such-context' })))).rejects.toMatchObject({
      name: 'RequestMalformedError',
    });
    await expect(client.sendMessage(send(userMessage('hi', { taskId: mine.id, contextId: 'elsewhere' })))).rejects.toMatchObject({
      name: 'RequestMalformedError',
    });
    await expect(other.sendMessage(send(userMessage('hi', { contextId: mine.contextId })))).rejects.toMatchObject({
      name: 'RequestMalformedError',
    });
    await expect(client.sendMessage(send(userMessage([data({ a: 1 })])))).rejects.toMatchObject({ name: 'ContentTypeNotSupportedError' });
    const zip = { content: { $case: 'url' as const, value: 'https://example.com/a.zip' }, metadata: undefined, filename: '', mediaType: 'application/zip' };
    await expect(client.sendMessage(send(userMessage([zip])))).rejects.toMatchObject({ name: 'ContentTypeNotSupportedError' });
    const v1 = { serviceParameters: { 'A2A-Version': '1.0' } };
    await expect(client.transport.getExtendedAgentCard({ tenant: '' }, v1)).rejects.toMatchObject({ name: 'UnsupportedOperationError' });
  });

  it('refuses a message past the thread queue limit with an overload error, then takes it when there is room', async () => {
    const running = asTask(await client.sendMessage(send(userMessage('/slow 30'), { returnImmediately: true })));
    const contextId = running.contextId;
    for (const n of [1, 2]) await client.sendMessage(send(userMessage(`wait ${n}`, { contextId }), { returnImmediately: true }));
    const refusal = await client.sendMessage(send(userMessage('one too many', { contextId }), { returnImmediately: true })).catch((e: unknown) => e);
    if (binding === 'JSONRPC') expect(refusal).toMatchObject({ envelopeCode: -32000, message: expect.stringContaining('retry after') });
    else expect(refusal).toMatchObject({ statusCode: 429, headers: { 'retry-after': expect.stringMatching(/^\d+$/) } });
    await eventually(async () => expect(stateName((await client.getTask({ id: running.id, tenant: '' })).status?.state)).toBe('TASK_STATE_COMPLETED'), 10_000);
    const later = asTask(await client.sendMessage(send(userMessage('now there is room', { contextId }))));
    expect(artifactTexts(later)).toEqual(['echo: now there is room']);
  });
});

describe('an interjection through A2A', () => {
  it('is dispatched beside the running task it names by request metadata, which keeps running', async () => {
    await gateway.store.agents.put({ ...DEMO_AGENT, id: 'joiner', takesInterjections: true });
    const client = await a2aClient(gateway, 'JSONRPC', 'joiner');
    const running = asTask(await client.sendMessage(send(userMessage('/slow 300'), { returnImmediately: true })));
    await eventually(async () => expect(stateName((await client.getTask({ id: running.id, tenant: '' })).status?.state)).toBe('TASK_STATE_WORKING'));

    const joined = asTask(
      await client.sendMessage(send(userMessage('also this', { contextId: running.contextId }), {}, { [ADDRESSED_RUN_ID_KEY]: running.id })),
    );
    expect(stateName(joined.status?.state)).toBe('TASK_STATE_COMPLETED');
    expect(artifactTexts(joined)).toEqual(['echo: also this']);
    expect(stateName((await client.getTask({ id: running.id, tenant: '' })).status?.state)).toBe('TASK_STATE_WORKING');
    await client.cancelTask({ id: running.id, tenant: '', metadata: {} });
    await eventually(async () => expect(stateName((await client.getTask({ id: running.id, tenant: '' })).status?.state)).toBe('TASK_STATE_CANCELED'));
  });
});

describe('one record, two exits', () => {
  it('reads a run started through AG-UI as a task through A2A', async () => {
    const threadId = `agui-${Math.random().toString(36).slice(2)}`;
    const agent = aguiAgent(gateway, threadId);
    agent.messages = [aguiMessage('hello from AG-UI')];
    let runId = '';
    const result = await agent.runAgent({}, { onRunStartedEvent: ({ event }) => void (runId = event.runId) });
    const client = await a2aClient(gateway, 'JSONRPC');
    const task = await client.getTask({ id: runId, tenant: '' });
    expect(task.contextId).toBe(threadId);
    expect(stateName(task.status?.state)).toBe('TASK_STATE_COMPLETED');
    expect(artifactTexts(task)).toEqual(assistantText(result.newMessages));
    expect(task.history[0].parts.map(partText)).toEqual(['hello from AG-UI']);
  });

  it("reads a task's events through the AG-UI replay route", async () => {
    const client = await a2aClient(gateway, 'HTTP+JSON');
    const task = asTask(await client.sendMessage(send(userMessage('hello from A2A'))));
    const { events } = await readSse(await fetch(`${gateway.url}/agui/demo/runs/${task.id}/events`));
    expect(events[0].data.type).toBe('RUN_STARTED');
    expect(events.at(-1)?.data.type).toBe('RUN_FINISHED');
    const said = events.filter((e) => e.data.type === 'TEXT_MESSAGE_CONTENT').map((e) => e.data.delta).join('');
    expect(said).toBe(artifactTexts(task)[0]);
    expect(events.map((e) => Number(e.id))).toEqual(events.map((_, i) => i + 1));
  });
});

describe('the A2A wire', () => {
  it('answers malformed JSON-RPC with the SDK\'s JSON-RPC error codes, never a 500', async () => {
    // The SDK's transport answers an invalid envelope with INVALID_PARAMS (-32602), as its Express adapter does.
    const cases: [Response, number][] = [
      [await rpc('{not json'), -32700],
      [await rpc({ jsonrpc: '1.0', id: 1, method: 'GetTask', params: { id: 'x' } }), -32602],
      [await rpc([1, 2]), -32602],
      [await rpc({ jsonrpc: '2.0', id: 2, method: 'NoSuchMethod', params: {} }), -32601],
      [await rpc({ jsonrpc: '2.0', id: 3, method: 'GetTask', params: 'nope' }), -32602],
      [await rpc({ jsonrpc: '2.0', id: 4, method: 'SendMessage', params: {} }), -32602],
      [await rpc({ jsonrpc: '2.0', id: 5, method: 'GetTask', params: { id: 'x' } }, { 'Content-Type': 'text/plain' }), -32005],
      [await rpc({ jsonrpc: '2.0', id: 6, method: 'GetTask', params: { id: 'x' } }, { 'A2A-Version': '9.9' }), -32009],
      [await rpc({ jsonrpc: '2.0', id: 7, method: 'ListTasks', params: { pageToken: 'forged' } }), -32602],
      [await rpc({ jsonrpc: '2.0', id: 8, method: 'ListTasks', params: { pageSize: 1000 } }), -32602],
      [await rpc({ jsonrpc: '2.0', id: 9, method: 'GetTask', params: { id: 'x', historyLength: -1 } }), -32602],
    ];
    for (const [response, code] of cases) {
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ jsonrpc: '2.0', error: { code } });
    }
  });

  it('answers bad HTTP+JSON requests with 4xx and the A2A error body', async () => {
    const rest = (path: string, init: RequestInit = {}) =>
      fetch(`${gateway.url}/a2a/demo/rest${path}`, { ...init, headers: { 'A2A-Version': '1.0', 'Content-Type': 'application/json', ...init.headers } });
    const cases: [Response, number, string][] = [
      [await rest('/message:send', { method: 'POST', body: '{oops' }), 400, 'INVALID_ARGUMENT'],
      [await rest('/message:send', { method: 'POST', body: '{}' }), 400, 'INVALID_ARGUMENT'],
      [await rest('/tasks/nope'), 404, 'NOT_FOUND'],
      [await rest('/tasks/nope?historyLength=x'), 400, 'INVALID_ARGUMENT'],
      [await rest('/tasks?pageToken=forged'), 400, 'INVALID_ARGUMENT'],
      [await rest('/tasks/nope:cancel', { method: 'POST' }), 404, 'NOT_FOUND'],
      [await rest('/message:send', { method: 'POST', body: 'x', headers: { 'Content-Type': 'text/plain' } }), 400, 'INVALID_ARGUMENT'],
      [await rest('/tasks', { headers: { 'A2A-Version': '7.0' } }), 400, 'FAILED_PRECONDITION'],
    ];
    for (const [response, status, name] of cases) {
      expect({ status: response.status, body: await response.json() }).toMatchObject({ status, body: { error: { status: name } } });
    }
    const nowhere = await rest('/tasks/a/b/c');
    expect(nowhere.status).toBe(404);
  });

  it('frames every streamed update as an SSE event whose id is its cursor', async () => {
    const response = await rpc({ jsonrpc: '2.0', id: 'stream', method: 'SendStreamingMessage', params: { message: { messageId: `wire-${Date.now()}`, role: 'ROLE_USER', parts: [{ text: 'ids please' }] } } });
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const { events } = await readSse(response);
    const updates = events.slice(1);
    expect(updates.every((e) => e.id !== undefined && /^\d+@/.test(e.id))).toBe(true);
    expect(updates.map((e) => e.id)).toEqual(
      updates.map((e) => {
        const result = e.data.result as Record<string, { metadata: { funduq: { cursor: string } } }>;
        return (result.statusUpdate ?? result.artifactUpdate).metadata.funduq.cursor;
      }),
    );
    expect(events.at(-1)?.data).toMatchObject({ id: 'stream', result: { statusUpdate: { status: { state: 'TASK_STATE_COMPLETED' } } } });
  });

  it('keeps a task running when its stream reader goes away', async () => {
    const controller = new AbortController();
    const client = await a2aClient(gateway, 'JSONRPC');
    let taskId = '';
    const stream = client.sendMessageStream(send(userMessage('/slow 10')), { signal: controller.signal });
    for await (const event of stream) {
      if (event.payload?.$case === 'task') taskId = event.payload.value.id;
      if (event.payload?.$case === 'artifactUpdate') break;
    }
    controller.abort();
    await eventually(async () => expect(stateName((await client.getTask({ id: taskId, tenant: '' })).status?.state)).toBe('TASK_STATE_COMPLETED'));
  });
});
