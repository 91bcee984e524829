import { TaskState, type ListTasksRequest, type StreamResponse, type Task } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT, type LocalGateway } from '../../lambdas/runtimes/local.js';
import { a2aClient, artifactTexts, asTask, BINDINGS, collect, funduq, send, stateName, summarise, userMessage } from '../support/a2a.js';
import { readSse, startTestGateway } from '../support/gateway.js';

let gateway: LocalGateway;

beforeAll(async () => {
  gateway = await startTestGateway();
  await gateway.store.agents.put({ ...DEMO_AGENT, id: 'other', description: 'another demo agent' });
});
afterAll(async () => {
  await gateway?.close();
});

const listRequest = (fields: Partial<Parameters<Client['listTasks']>[0]> = {}) => ({
  tenant: '',
  contextId: '',
  status: TaskState.TASK_STATE_UNSPECIFIED,
  pageToken: '',
  statusTimestampAfter: undefined,
  ...fields,
});

/** The cursor an update carries, as a subscriber reads it. */
function cursorOf(event: StreamResponse): string | undefined {
  const payload = event.payload;
  if (!payload || payload.$case === 'message') return undefined;
  return funduq(payload.value).cursor as string | undefined;
}

describe.each(BINDINGS)('listing tasks over %s', (binding) => {
  let client: Client;
  beforeAll(async () => {
    client = await a2aClient(gateway, binding);
  });

  it('lists the tasks of a context newest first, filtered by state, page by page', async () => {
    const first = asTask(await client.sendMessage(send(userMessage('one'))));
    const contextId = first.contextId;
    const asking = asTask(await client.sendMessage(send(userMessage('/ask', { contextId }))));
    const third = asTask(await client.sendMessage(send(userMessage('three', { contextId }))));

    const all = await client.listTasks(listRequest({ contextId }));
    expect(all.tasks.map((t) => t.id)).toEqual([third.id, asking.id, first.id]);
    expect(all.totalSize).toBe(3);
    expect(all.nextPageToken).toBe('');
    expect(all.tasks.every((t) => t.artifacts.length === 0)).toBe(true);

    const waiting = await client.listTasks(listRequest({ contextId, status: TaskState.TASK_STATE_INPUT_REQUIRED }));
    expect(waiting.tasks.map((t) => t.id)).toEqual([asking.id]);

    const page1 = await client.listTasks(listRequest({ contextId, pageSize: 2, historyLength: 0, includeArtifacts: true }));
    expect(page1.tasks.map((t) => t.id)).toEqual([third.id, asking.id]);
    expect(page1.tasks[0].history).toEqual([]);
    expect(artifactTexts(page1.tasks[0])).toEqual(['echo: three']);
    expect(page1.nextPageToken).not.toBe('');
    const page2 = await client.listTasks(listRequest({ contextId, pageSize: 2, pageToken: page1.nextPageToken }));
    expect(page2.tasks.map((t) => t.id)).toEqual([first.id]);
    expect(page2.nextPageToken).toBe('');
  });

  it("pages through all of an agent's tasks with the store's cursor, and leaves other agents' out", async () => {
    const other = await a2aClient(gateway, binding, 'other');
    const elsewhere = asTask(await other.sendMessage(send(userMessage('not listed at demo'))));
    const mine = [];
    for (const n of [1, 2, 3]) mine.push(asTask(await client.sendMessage(send(userMessage(`mine ${n}`)))));
    const seen: string[] = [];
    let pageToken = '';
    do {
      const page = await client.listTasks(listRequest({ pageSize: 2, pageToken }));
      expect(page.tasks.length).toBeLessThanOrEqual(2);
      seen.push(...page.tasks.map((t) => t.id));
      pageToken = page.nextPageToken;
    } while (pageToken !== '');
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toEqual(expect.arrayContaining(mine.map((t) => t.id)));
    expect(seen).not.toContain(elsewhere.id);
    expect(seen.indexOf(mine[2].id)).toBeLessThan(seen.indexOf(mine[0].id));
  });

  it('lists a context with exactly the arguments a user passes, { contextId }, and reads a status it does not know as no filter', async () => {
    const first = asTask(await client.sendMessage(send(userMessage('listed by its context'))));
    const { contextId } = first;
    const second = asTask(await client.sendMessage(send(userMessage('/ask', { contextId }))));
    // What a JavaScript caller writes; the stock JSON-RPC transport sends the status it left out as "UNRECOGNIZED".
    const listed = await client.listTasks({ contextId } as ListTasksRequest);
    expect(listed.tasks.map((t) => t.id)).toEqual([second.id, first.id]);
    expect(listed.totalSize).toBe(2);
    const unknown = await client.listTasks({ contextId, status: TaskState.UNRECOGNIZED } as ListTasksRequest);
    expect(unknown.tasks.map((t) => t.id)).toEqual([second.id, first.id]);
  });

  it('refuses a page token it did not issue with InvalidParams, not a 500', async () => {
    await expect(client.listTasks(listRequest({ pageToken: 't.bm90LWEtY3Vyc29y' }))).rejects.toMatchObject({ name: 'RequestMalformedError' });
    await expect(client.listTasks(listRequest({ contextId: 'any', pageToken: 'c.x' }))).rejects.toMatchObject({ name: 'RequestMalformedError' });
  });
});

describe.each(BINDINGS)('subscribing to a task over %s', (binding) => {
  let client: Client;
  beforeAll(async () => {
    client = await a2aClient(gateway, binding);
  });

  it('lets two subscribers watch one task, each from the Task to the final status', async () => {
    const task = asTask(await client.sendMessage(send(userMessage('/slow 15'), { returnImmediately: true })));
    const [a, b] = await Promise.all([
      collect(client.resubscribeTask({ id: task.id, tenant: '' })),
      collect(client.resubscribeTask({ id: task.id, tenant: '' })),
    ]);
    for (const events of [a, b]) {
      const { kinds, states, text } = summarise(events);
      expect(kinds[0]).toBe('task');
      expect(states.at(-1)).toBe('TASK_STATE_COMPLETED');
      const snapshot = events[0].payload!.value as Task;
      const before = artifactTexts(snapshot)[0] ?? '';
      const streamed = [...text.values()][0] ?? '';
      // Each subscriber has the whole text: what the Task held when it joined, then the chunks after.
      expect((before + streamed).replace(/\s+$/, '')).toContain('15');
    }
    const read = await client.getTask({ id: task.id, tenant: '' });
    expect(artifactTexts(read)).toEqual([Array.from({ length: 15 }, (_, i) => `${i + 1} `).join('')]);
  });

  it('resumes a subscriber from the cursor it last saw: the Task as it stood there, then what came after', async () => {
    const original = await collect(client.sendMessageStream(send(userMessage('/slow 6'))));
    const taskId = (original[0].payload!.value as Task).id;
    const at = 3;
    const cursor = cursorOf(original[at])!;
    expect(cursor).toMatch(/^\d+@/);

    const resumed = await collect(client.resubscribeTask({ id: taskId, tenant: '' }, { serviceParameters: { 'Last-Event-ID': cursor } }));
    expect(resumed[0].payload?.$case).toBe('task');
    expect(funduq(resumed[0].payload!.value as Task).cursor).toBe(cursor);
    expect(resumed.slice(1).map(cursorOf)).toEqual(original.slice(at + 1).map(cursorOf));
    expect(summarise(resumed).states.at(-1)).toBe('TASK_STATE_COMPLETED');
  });

  it('refuses to subscribe to a finished task without a cursor, and refuses a cursor of another task', async () => {
    const done = asTask(await client.sendMessage(send(userMessage('finished'))));
    await expect(collect(client.resubscribeTask({ id: done.id, tenant: '' }))).rejects.toMatchObject({ name: 'UnsupportedOperationError' });
    await expect(
      collect(client.resubscribeTask({ id: done.id, tenant: '' }, { serviceParameters: { 'Last-Event-ID': '3@someone-else' } })),
    ).rejects.toMatchObject({ name: 'RequestMalformedError' });
    await expect(collect(client.resubscribeTask({ id: 'no-such-task', tenant: '' }))).rejects.toMatchObject({ name: 'TaskNotFoundError' });
  });
});

describe('a subscriber cursor in request metadata', () => {
  it('is honoured by JSON-RPC SubscribeToTask', async () => {
    const client = await a2aClient(gateway, 'JSONRPC');
    const original = await collect(client.sendMessageStream(send(userMessage('/slow 4'))));
    const taskId = (original[0].payload!.value as Task).id;
    const cursor = cursorOf(original[2])!;
    const response = await fetch(`${gateway.url}/a2a/demo`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'A2A-Version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SubscribeToTask', params: { id: taskId, metadata: { funduq: { cursor } } } }),
    });
    const { events } = await readSse(response);
    expect(events.slice(1).map((e) => e.id)).toEqual(original.slice(3).map(cursorOf));
  });
});

describe.each(BINDINGS)('a repeated message id over %s', (binding) => {
  let client: Client;
  beforeAll(async () => {
    client = await a2aClient(gateway, binding);
  });

  it('returns the task the first message created, and starts no second run', async () => {
    const message = userMessage('only once');
    const first = asTask(await client.sendMessage(send(message)));
    const again = asTask(await client.sendMessage(send(message)));
    expect(again.id).toBe(first.id);
    const inContext = userMessage('once in this context', { contextId: first.contextId });
    const a = asTask(await client.sendMessage(send(inContext)));
    const b = asTask(await client.sendMessage(send(inContext)));
    expect(b.id).toBe(a.id);
    const view = await (await fetch(`${gateway.url}/threads/${first.contextId}`)).json();
    expect(view.runs).toHaveLength(2);
  });

  it('treats the same message id in another context as a new message', async () => {
    const first = asTask(await client.sendMessage(send(userMessage('context one'))));
    const second = asTask(await client.sendMessage(send(userMessage('context two'))));
    const shared = `shared-${Date.now()}-${binding}`;
    const a = asTask(await client.sendMessage(send(userMessage('hi', { messageId: shared, contextId: first.contextId }))));
    const b = asTask(await client.sendMessage(send(userMessage('hi', { messageId: shared, contextId: second.contextId }))));
    expect(a.id).not.toBe(b.id);
  });

  it('returns the same task for a repeated answer, with one answer run', async () => {
    const asked = asTask(await client.sendMessage(send(userMessage('/ask'))));
    const answer = userMessage('yes', { taskId: asked.id });
    const first = asTask(await client.sendMessage(send(answer)));
    const again = asTask(await client.sendMessage(send(answer)));
    expect(stateName(again.status?.state)).toBe('TASK_STATE_COMPLETED');
    expect(again.id).toBe(first.id);
    expect(funduq(again).runs).toHaveLength(2);
  });
});
