import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import type { Principal } from '../../lambdas/core/model.js';
import { a2aClient, asTask, send, stateName, userMessage as a2aMessage } from '../support/a2a.js';
import { eventually } from '../support/core-harness.js';
import { startHeldAgent, type HeldAgent } from '../support/held-agent.js';
import { readSse, startTestGateway, userMessage } from '../support/gateway.js';

/**
 * Tenant B names tenant A's threads, runs, tasks and push configs on every route of both doors.
 * Each probe is sent twice, once with A's id and once with an id nobody has: B must get the same
 * answer (the probed id written out of it), and A's record must not change.
 */
const A_KEY = 'key-tenant-a-7f3e91';
const B_KEY = 'key-tenant-b-0c55d2';
const KEYS = new Map<string, Principal>([
  [A_KEY, { id: 'alice', tenant: 'tenant-a' }],
  [B_KEY, { id: 'bob', tenant: 'tenant-b' }],
]);
/** Text only tenant A ever sent: seen in an answer to B, it is a leak. */
const SECRET = 'only-tenant-a-knows-this';

let gateway: LocalGateway;
let held: HeldAgent;
const a = {
  thread: `a-thread-${randomUUID()}`,
  busyThread: `a-busy-${randomUUID()}`,
  done: `a-done-${randomUUID()}`,
  ask: `a-ask-${randomUUID()}`,
  running: `a-running-${randomUUID()}`,
  queued: `a-queued-${randomUUID()}`,
  interruptId: '',
  task: '',
  context: '',
  waitingTask: '',
  hook: 'a-hook',
};

const probes: { route: string; door: string; leak: boolean }[] = [];

beforeAll(async () => {
  held = await startHeldAgent();
  gateway = await startTestGateway({ apiKeys: KEYS, pushAllowHttp: true, push: { allowLoopback: true, attempts: 1, timeoutMs: 500 } });
  await gateway.gateway.putAgent({
    id: 'held',
    description: 'holds its runs',
    provider: { kind: 'agui-http', url: held.url },
    takesInterjections: false,
    timeoutSeconds: 60,
    idleTimeoutSeconds: 60,
  });

  // Tenant A's record: a finished run and a waiting one on one thread, a running and a queued run
  // on another, a finished A2A task with a push config, and an A2A task waiting for an answer.
  const aguiA = (agentId: string, body: object) => aPost(`/agui/${agentId}`, body);
  await readSse(await aguiA('demo', { threadId: a.thread, runId: a.done, messages: [userMessage(SECRET)] }));
  const asked = await readSse(await aguiA('demo', { threadId: a.thread, runId: a.ask, messages: [userMessage('/ask')] }));
  a.interruptId = (asked.events.at(-1)?.data.outcome as { interrupts: { id: string }[] }).interrupts[0].id;
  void aguiA('held', { threadId: a.busyThread, runId: a.running, messages: [userMessage(SECRET)] });
  await eventually(async () => expect((await gateway.store.runs.get(a.running))?.status).toBe('running'));
  await aguiA('held', { threadId: a.busyThread, runId: a.queued, messages: [userMessage(SECRET)] });

  const client = await a2aClient(gateway, 'JSONRPC', 'demo', A_KEY);
  const task = asTask(await client.sendMessage(send(a2aMessage(SECRET))));
  a.task = task.id;
  a.context = task.contextId;
  await client.createTaskPushNotificationConfig({ tenant: '', id: a.hook, taskId: a.task, url: 'http://127.0.0.1:9/hook', token: '', authentication: undefined });
  a.waitingTask = asTask(await client.sendMessage(send(a2aMessage('/ask')))).id;
});

afterAll(async () => {
  held?.release();
  await gateway?.close();
  await held?.close();
});

function aPost(path: string, body: object) {
  return request('POST', path, A_KEY, body);
}

function request(method: string, path: string, key: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${gateway.url}${path}`, {
    method,
    headers: { 'x-api-key': key, 'A2A-Version': '1.0', ...(body === undefined ? {} : { 'Content-Type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(5_000),
  });
}

/** The answer as B sees it, with the probed id written out: what must not depend on whose the id is. */
async function answer(response: Response, id: string): Promise<{ status: number; body: string }> {
  const type = response.headers.get('content-type') ?? '';
  if (type.includes('event-stream')) {
    await response.body?.cancel();
    return { status: response.status, body: 'an event stream' };
  }
  const text = await response.text();
  return { status: response.status, body: text.split(id).join('<id>') };
}

/**
 * One probe: B's request naming A's id against the same request naming an id nobody has. A leak
 * is any difference, or anything of A's in B's answer.
 */
async function probe(door: string, route: string, send: (id: string) => Promise<Response>, id: string): Promise<{ status: number; body: string }> {
  const theirs = await answer(await send(id), id);
  const unknownId = randomUUID();
  const unknown = await answer(await send(unknownId), unknownId);
  const leak = JSON.stringify(theirs) !== JSON.stringify(unknown) || theirs.body.includes(SECRET);
  probes.push({ route, door, leak });
  expect(theirs, `${route} answers tenant B about tenant A's id as about an unknown one`).toEqual(unknown);
  expect(theirs.body).not.toContain(SECRET);
  return theirs;
}

const b = (method: string, path: string, body?: unknown) => request(method, path, B_KEY, body);
const rpc = (method: string, params: object) => b('POST', '/a2a/demo', { jsonrpc: '2.0', id: 1, method, params });
const message = (fields: object = {}) => ({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'from b' }], ...fields });

describe("tenant B naming tenant A's ids", () => {
  it('gets on every AG-UI route what an unknown id gets, and changes nothing of A', async () => {
    await probe('agui', 'GET /agui/{agent}/runs/{runId}/events (finished run)', (id) => b('GET', `/agui/demo/runs/${id}/events`), a.done);
    await probe('agui', 'GET /agui/{agent}/runs/{runId}/events (running run)', (id) => b('GET', `/agui/held/runs/${id}/events`), a.running);
    await probe('agui', 'GET /agui/{agent}/runs/{runId}/events?after=1', (id) => b('GET', `/agui/demo/runs/${id}/events?after=1`), a.done);
    await probe('agui', 'POST /agui/{agent}/runs/{runId}/cancel (running run)', (id) => b('POST', `/agui/held/runs/${id}/cancel`), a.running);
    await probe('agui', 'POST /agui/{agent}/runs/{runId}/cancel (queued run)', (id) => b('POST', `/agui/held/runs/${id}/cancel`), a.queued);
    await probe('agui', 'POST /agui/{agent}/runs/{runId}/cancel (waiting run)', (id) => b('POST', `/agui/demo/runs/${id}/cancel`), a.ask);
    await probe('agui', 'GET /threads/{threadId}', (id) => b('GET', `/threads/${id}`), a.thread);
    const resume = [{ interruptId: a.interruptId, status: 'resolved', payload: { approved: true } }];
    await probe('agui', 'POST /agui/{agent} answering the thread’s open ask', (id) => b('POST', '/agui/demo', { threadId: id, runId: randomUUID(), messages: [], resume }), a.thread);

    // A message on A's thread id opens B's own thread, as on any new id; A's thread is untouched.
    const own = await b('POST', '/agui/demo', { threadId: a.thread, runId: randomUUID(), messages: [userMessage('from b')] });
    expect(own.status).toBe(200);
    await readSse(own);
    const bView = await (await b('GET', `/threads/${a.thread}`)).json();
    expect(JSON.stringify(bView)).not.toContain(SECRET);
    expect(bView.messages.map((m: { content: string }) => m.content)).toEqual(['from b', 'echo: from b']);
    probes.push({ route: 'POST /agui/{agent} on the thread id', door: 'agui', leak: JSON.stringify(bView).includes(SECRET) });

    // A run id is one namespace (it keys the events): B learns only that the id is taken, nothing of the run.
    const taken = await b('POST', '/agui/demo', { threadId: randomUUID(), runId: a.done, messages: [userMessage('from b')] });
    const refusal = await taken.text();
    expect(taken.status).toBe(409);
    expect(JSON.parse(refusal)).toEqual({ error: { code: 'run_id_conflict', message: `runId "${a.done}" is taken` } });
    probes.push({ route: 'POST /agui/{agent} with the run id', door: 'agui', leak: refusal.includes(SECRET) || refusal.includes(a.thread) });

    const store = gateway.store;
    expect((await store.runs.get(a.running))?.status).toBe('running');
    expect((await store.runs.get(a.queued))?.status).toBe('queued');
    expect(Object.values((await store.runs.get(a.ask))?.asks ?? {}).map((ask) => ask.state)).toEqual(['open']);
    const aView = await (await request('GET', `/threads/${a.thread}`, A_KEY)).json();
    expect(aView.runs.map((run: { runId: string }) => run.runId)).toEqual([a.done, a.ask]);
  });

  it('gets on every A2A JSON-RPC method what an unknown id gets (TaskNotFound, an empty page), and changes nothing of A', async () => {
    await probe('a2a-jsonrpc', 'GetTask', (id) => rpc('GetTask', { id }), a.task);
    await probe('a2a-jsonrpc', 'CancelTask', (id) => rpc('CancelTask', { id }), a.waitingTask);
    await probe('a2a-jsonrpc', 'SubscribeToTask', (id) => rpc('SubscribeToTask', { id }), a.waitingTask);
    await probe('a2a-jsonrpc', 'SubscribeToTask with a cursor', (id) => rpc('SubscribeToTask', { id, metadata: { funduq: { cursor: `1@${id}` } } }), a.task);
    await probe('a2a-jsonrpc', 'ListTasks by contextId', (id) => rpc('ListTasks', { contextId: id }), a.context);
    await probe('a2a-jsonrpc', 'SendMessage answering the task', (id) => rpc('SendMessage', { message: message({ taskId: id }) }), a.waitingTask);
    await probe('a2a-jsonrpc', 'SendMessage in the context', (id) => rpc('SendMessage', { message: message({ contextId: id }) }), a.context);
    await probe('a2a-jsonrpc', 'SendStreamingMessage answering the task', (id) => rpc('SendStreamingMessage', { message: message({ taskId: id }) }), a.waitingTask);
    await probe('a2a-jsonrpc', 'CreateTaskPushNotificationConfig', (id) => rpc('CreateTaskPushNotificationConfig', { taskId: id, id: 'b-hook', url: 'http://127.0.0.1:9/b' }), a.task);
    await probe('a2a-jsonrpc', 'GetTaskPushNotificationConfig', (id) => rpc('GetTaskPushNotificationConfig', { taskId: id, id: a.hook }), a.task);
    await probe('a2a-jsonrpc', 'ListTaskPushNotificationConfigs', (id) => rpc('ListTaskPushNotificationConfigs', { taskId: id }), a.task);
    await probe('a2a-jsonrpc', 'DeleteTaskPushNotificationConfig', (id) => rpc('DeleteTaskPushNotificationConfig', { taskId: id, id: a.hook }), a.task);

    const listed = await (await rpc('ListTasks', {})).json();
    expect(JSON.stringify(listed)).not.toContain(a.task);
    probes.push({ route: 'ListTasks', door: 'a2a-jsonrpc', leak: JSON.stringify(listed).includes(a.task) });
    await expectAUntouched();
  });

  it('gets on every A2A HTTP+JSON route what an unknown id gets, and changes nothing of A', async () => {
    const rest = '/a2a/demo/rest';
    await probe('a2a-rest', 'GET tasks/{id}', (id) => b('GET', `${rest}/tasks/${id}`), a.task);
    await probe('a2a-rest', 'POST tasks/{id}:cancel', (id) => b('POST', `${rest}/tasks/${id}:cancel`, {}), a.waitingTask);
    await probe('a2a-rest', 'GET tasks/{id}:subscribe', (id) => b('GET', `${rest}/tasks/${id}:subscribe`), a.waitingTask);
    await probe('a2a-rest', 'POST tasks/{id}:subscribe with Last-Event-ID', (id) => request('POST', `${rest}/tasks/${id}:subscribe`, B_KEY, {}, { 'Last-Event-ID': `1@${id}` }), a.task);
    await probe('a2a-rest', 'GET tasks?contextId=', (id) => b('GET', `${rest}/tasks?contextId=${id}`), a.context);
    await probe('a2a-rest', 'POST message:send answering the task', (id) => b('POST', `${rest}/message:send`, { message: message({ taskId: id }) }), a.waitingTask);
    await probe('a2a-rest', 'POST message:send in the context', (id) => b('POST', `${rest}/message:send`, { message: message({ contextId: id }) }), a.context);
    await probe('a2a-rest', 'POST message:stream answering the task', (id) => b('POST', `${rest}/message:stream`, { message: message({ taskId: id }) }), a.waitingTask);
    await probe('a2a-rest', 'POST tasks/{id}/pushNotificationConfigs', (id) => b('POST', `${rest}/tasks/${id}/pushNotificationConfigs`, { id: 'b-hook', url: 'http://127.0.0.1:9/b' }), a.task);
    await probe('a2a-rest', 'GET tasks/{id}/pushNotificationConfigs', (id) => b('GET', `${rest}/tasks/${id}/pushNotificationConfigs`), a.task);
    await probe('a2a-rest', 'GET tasks/{id}/pushNotificationConfigs/{configId}', (id) => b('GET', `${rest}/tasks/${id}/pushNotificationConfigs/${a.hook}`), a.task);
    await probe('a2a-rest', 'DELETE tasks/{id}/pushNotificationConfigs/{configId}', (id) => b('DELETE', `${rest}/tasks/${id}/pushNotificationConfigs/${a.hook}`), a.task);

    const listed = await (await b('GET', `${rest}/tasks`)).text();
    expect(listed).not.toContain(a.task);
    probes.push({ route: 'GET tasks', door: 'a2a-rest', leak: listed.includes(a.task) });

    // A repeated message id is a repeat only within its tenant: B's message starts B's own task.
    const aMessage = await gateway.store.runs.get(a.task);
    const repeated = await b('POST', `${rest}/message:send`, { message: message({ messageId: aMessage?.input.messages[0].id, parts: [{ text: 'b too' }] }) });
    const task = await repeated.json();
    expect(task.task.id).not.toBe(a.task);
    probes.push({ route: 'POST message:send with the message id', door: 'a2a-rest', leak: task.task.id === a.task });
    await expectAUntouched();
  });
});

async function expectAUntouched(): Promise<void> {
  const client = await a2aClient(gateway, 'JSONRPC', 'demo', A_KEY);
  expect(stateName((await client.getTask({ id: a.waitingTask, tenant: '' })).status?.state)).toBe('TASK_STATE_INPUT_REQUIRED');
  expect(stateName((await client.getTask({ id: a.task, tenant: '' })).status?.state)).toBe('TASK_STATE_COMPLETED');
  expect(await client.getTaskPushNotificationConfig({ tenant: '', taskId: a.task, id: a.hook })).toMatchObject({ url: 'http://127.0.0.1:9/hook' });
  expect((await gateway.store.pushConfigs.list(a.task)).map((config) => config.configId)).toEqual([a.hook]);
}

// The figures, in a test of their own after the probes, printed when asked (FUNDUQ_TEST_FIGURES=1).
it('probed every route it names, and none leaked', () => {
  const leaks = probes.filter((probe) => probe.leak).length;
  const doors = [...new Set(probes.map((probe) => probe.door))];
  if (process.env.FUNDUQ_TEST_FIGURES) report(doors, leaks);
  expect(new Set(probes.map((p) => p.route)).size).toBeGreaterThan(30);
  expect(leaks).toBe(0);
});

function report(doors: string[], leaks: number): void {
  console.log(`\nisolation: tenant B named tenant A's ids on ${new Set(probes.map((p) => p.route)).size} routes`);
  console.table(
    [...doors, 'all'].map((door) => {
      const these = probes.filter((probe) => door === 'all' || probe.door === door);
      return { door, probes: these.length, leaks: these.filter((probe) => probe.leak).length };
    }),
  );
  console.log(`isolation: leaks = ${leaks}`);
}
