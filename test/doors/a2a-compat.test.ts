import { AgentCard } from '@a2a-js/sdk';
import { Client } from '@a2a-js/sdk/client';
import { LegacyJsonRpcTransport } from '@a2a-js/sdk/compat/v0_3/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalGateway } from '../../lambdas/adapters/local/runtime.js';
import { artifactTexts, asTask, collect, send, stateName, summarise, userMessage } from '../support/a2a.js';
import { startTestGateway } from '../support/gateway.js';

let gateway: LocalGateway;
let client: Client;

beforeAll(async () => {
  gateway = await startTestGateway({ push: { allowLoopback: true } });
  const card = AgentCard.fromJSON(await (await fetch(`${gateway.url}/a2a/demo/.well-known/agent-card.json`, { headers: { 'A2A-Version': '1.0' } })).json());
  // The SDK's 0.3 client transport: `A2A-Version: 0.3`, 0.3 method names and shapes on the wire.
  client = new Client(new LegacyJsonRpcTransport({ endpoint: `${gateway.url}/a2a/demo` }), card);
});
afterAll(async () => {
  await gateway?.close();
});

describe('an A2A 0.3 client', () => {
  it('reads a 0.3 agent card when it asks without a version, with the 1.0 interfaces alongside', async () => {
    const card = await (await fetch(`${gateway.url}/a2a/demo/.well-known/agent-card.json`)).json();
    expect(card).toMatchObject({
      name: 'demo',
      url: `${gateway.url}/a2a/demo`,
      preferredTransport: 'JSONRPC',
      protocolVersion: '0.3',
      capabilities: { streaming: true, pushNotifications: true },
    });
    expect(card.supportedInterfaces).toEqual(expect.arrayContaining([expect.objectContaining({ protocolVersion: '1.0' })]));
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
});
