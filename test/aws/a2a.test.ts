import { createHash } from 'node:crypto';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { TaskState, type StreamResponse, type TaskPushNotificationConfig } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { artifactTexts, asTask, collect, send, stateName, summarise, userMessage } from '../support/a2a.js';
import { useAwsBox } from '../support/aws-box/box.js';
import { eventually } from '../support/core-harness.js';
import { startHeldAgent, type HeldAgent } from '../support/held-agent.js';
import { startReceiver, type Receiver } from '../support/receiver.js';

/**
 * The A2A door on the deployed shape, spoken by the stock A2A client: it reads the agent card the
 * bundled buffered function serves (whose URLs name the stage's public host, which the box answers
 * for), then speaks JSON-RPC and HTTP+JSON through API Gateway to the streaming function.
 */
const aws = useAwsBox();
/** Agents that hold each run after RUN_STARTED until their test lets go: one per test that holds. */
const held: Record<'cancel' | 'subscribe', HeldAgent> = {} as never;
let receiver: Receiver;

beforeAll(async () => {
  const { box } = aws;
  held.cancel = await startHeldAgent();
  held.subscribe = await startHeldAgent();
  receiver = await startReceiver();
  for (const [id, definition] of Object.entries({
    demo: { provider: 'demo', description: 'the demo agent' },
    'held-cancel': { url: held.cancel.url, description: 'holds its runs' },
    'held-subscribe': { url: held.subscribe.url, description: 'holds its runs' },
  })) {
    expect((await box.admin('PUT', `agents/${id}`, definition)).status).toBe(201);
  }
});

afterAll(async () => {
  for (const agent of Object.values(held)) {
    agent.release();
    await agent.close();
  }
  await receiver.close();
});

const listRequest = (contextId: string) => ({
  tenant: '',
  contextId,
  status: TaskState.TASK_STATE_UNSPECIFIED,
  pageToken: '',
  statusTimestampAfter: undefined,
});

describe.concurrent('the A2A door on AWS', { timeout: 90_000 }, () => {
  for (const binding of ['JSONRPC', 'HTTP+JSON'] as const) {
    it(`answers SendMessage over ${binding} with the task run to its end, and GetTask and ListTasks read it back`, async () => {
      const client = await aws.box.a2a(binding);
      const task = asTask(await client.sendMessage(send(userMessage('hello there'))));
      expect(stateName(task.status?.state)).toBe('TASK_STATE_COMPLETED');
      expect(artifactTexts(task).join('')).toBe('echo: hello there');
      const read = await client.getTask({ id: task.id, tenant: '' });
      expect(artifactTexts(read)).toEqual(artifactTexts(task));
      const listed = await client.listTasks(listRequest(task.contextId));
      expect(listed.tasks.map((t) => t.id)).toEqual([task.id]);
    });
  }

  it('streams SendStreamingMessage from submitted to completed, with the agent’s text as artifact chunks', async () => {
    const client = await aws.box.a2a('JSONRPC');
    const events = await collect(client.sendMessageStream(send(userMessage('stream this'))));
    const { states, text } = summarise(events);
    expect(states.at(-1)).toBe('TASK_STATE_COMPLETED');
    expect([...text.values()].join('')).toBe('echo: stream this');
  });

  it('cancels a working task, and a subscriber to it sees it end cancelled', async () => {
    const client = await aws.box.a2a('HTTP+JSON', 'held-cancel');
    const task = asTask(await client.sendMessage(send(userMessage('hold on'), { returnImmediately: true })));
    await eventually(() => expect(held.cancel.received.map((input) => input.runId)).toContain(task.id), 20_000);
    const subscribed = collect(client.resubscribeTask({ id: task.id, tenant: '' }));
    const cancelled = await client.cancelTask({ id: task.id, tenant: '', metadata: {} });
    expect(['TASK_STATE_CANCELED', 'TASK_STATE_WORKING']).toContain(stateName(cancelled.status?.state));
    const { states } = summarise(await subscribed);
    expect(states.at(-1)).toBe('TASK_STATE_CANCELED');
    expect(stateName((await client.getTask({ id: task.id, tenant: '' })).status?.state)).toBe('TASK_STATE_CANCELED');
  });

  it('follows a working task with SubscribeToTask until it completes', async () => {
    const client: Client = await aws.box.a2a('JSONRPC', 'held-subscribe');
    const task = asTask(await client.sendMessage(send(userMessage('subscribe to me'), { returnImmediately: true })));
    await eventually(() => expect(held.subscribe.received.map((input) => input.runId)).toContain(task.id), 20_000);
    const subscription = client.resubscribeTask({ id: task.id, tenant: '' })[Symbol.asyncIterator]();
    // The subscription opens with the task as it stands; only then does the agent go on.
    const first = await subscription.next();
    held.subscribe.release();
    const rest = await collect({ [Symbol.asyncIterator]: () => subscription });
    const { states } = summarise([first.value as StreamResponse, ...rest]);
    expect(states.at(-1)).toBe('TASK_STATE_COMPLETED');
    expect(artifactTexts(await client.getTask({ id: task.id, tenant: '' }))).toEqual([`done: ${task.id}`]);
  });

  it('delivers a task’s push notifications through the stream handler, from both tables’ streams, to its receiver, signed with the published keys', async () => {
    const client = await aws.box.a2a('JSONRPC');
    const config: TaskPushNotificationConfig = { tenant: '', id: 'hook', taskId: '', url: receiver.url, token: 'let-me-in', authentication: undefined };
    const task = asTask(await client.sendMessage(send(userMessage('push me'), { taskPushNotificationConfig: config })));
    const mine = () => receiver.accepted.filter((r) => JSON.stringify(r.body).includes(task.id));
    const text = () =>
      mine()
        .flatMap(({ body }) => ((body.artifactUpdate as { artifact?: { parts?: Array<{ text?: string }> } } | undefined)?.artifact?.parts ?? []).map((p) => p.text ?? ''))
        .join('');
    // Events and status changes travel on two streams: the final state may come before the last chunk.
    await eventually(() => {
      expect(mine().some((r) => JSON.stringify(r.body).includes('TASK_STATE_COMPLETED'))).toBe(true);
      expect(text()).toBe('echo: push me');
    }, 30_000);
    expect(mine()[0].headers).toMatchObject({ 'x-a2a-notification-token': 'let-me-in' });
    // Signed by the stream handler with the keys the doors publish, both from the stack's seed secret.
    const card = await (await aws.box.fetch(`${aws.box.url}/a2a/demo/.well-known/agent-card.json`, { headers: { 'a2a-version': '1.0' } })).json();
    const { jwksUrl } = card.capabilities.extensions.find((e: { uri: string }) => e.uri.endsWith('/ext/push-signing/v1')).params;
    const keys = createLocalJWKSet(await (await aws.box.fetch(jwksUrl)).json());
    for (const push of mine()) {
      const { payload } = await jwtVerify(String(push.headers['x-funduq-notification-jwt']), keys, { algorithms: ['ES256'], audience: receiver.url });
      expect(payload.request_body_sha256).toBe(createHash('sha256').update(push.raw).digest('hex'));
    }
    expect(aws.box.eventSources.batches.filter((b) => b.handler === 'stream-handler' && b.outcome === 'ok').length).toBeGreaterThan(0);
  });
});
