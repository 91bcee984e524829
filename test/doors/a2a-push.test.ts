import type { TaskPushNotificationConfig } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { a2aClient, asTask, BINDINGS, send, userMessage } from '../support/a2a.js';
import { eventually } from '../support/core-harness.js';
import { LOCAL_SETTINGS, readSettings } from '../../lambdas/runtimes/settings.js';
import { startTestGateway } from '../support/gateway.js';
import { startReceiver, type Received, type Receiver } from '../support/receiver.js';

let gateway: LocalGateway;

beforeAll(async () => {
  // Test-only allowance: the receivers listen on loopback in this process.
  gateway = await startTestGateway({ pushAllowHttp: true, push: { allowLoopback: true, attempts: 3, firstRetryMs: 10, timeoutMs: 2_000 } });
});
afterAll(async () => {
  await gateway?.close();
});

function pushConfig(taskId: string, url: string, fields: Partial<TaskPushNotificationConfig> = {}): TaskPushNotificationConfig {
  return { tenant: '', id: '', taskId, url, token: '', authentication: undefined, ...fields };
}

/** What a receiver was told, as `kind:state-or-text`, in the order it was told. */
function told(received: Received[]): string[] {
  return received.map(({ body }) => {
    if (body.statusUpdate) return `status:${(body.statusUpdate as { status: { state: string } }).status.state}`;
    if (body.artifactUpdate) {
      const parts = (body.artifactUpdate as { artifact: { parts?: { text?: string }[] } }).artifact.parts ?? [];
      return `artifact:${parts.map((p) => p.text ?? '').join('')}`;
    }
    return Object.keys(body).join(',');
  });
}

describe.each(BINDINGS)('push notification configs over %s', (binding) => {
  let client: Client;
  beforeAll(async () => {
    client = await a2aClient(gateway, binding);
  });

  it('are kept per task: created, read, listed and deleted', async () => {
    const task = asTask(await client.sendMessage(send(userMessage('configure me'))));
    const created = await client.createTaskPushNotificationConfig(pushConfig(task.id, 'http://127.0.0.1:9/hook', { id: 'hook-1', token: 'secret' }));
    expect(created).toMatchObject({ id: 'hook-1', taskId: task.id, url: 'http://127.0.0.1:9/hook', token: 'secret' });
    const generated = await client.createTaskPushNotificationConfig(pushConfig(task.id, 'http://127.0.0.1:9/other'));
    expect(generated.id).not.toBe('');

    expect(await client.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'hook-1' })).toMatchObject({ url: 'http://127.0.0.1:9/hook' });
    const listed = await client.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' });
    expect(listed.configs.map((c) => c.id).sort()).toEqual(['hook-1', generated.id].sort());

    await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'hook-1' });
    await expect(client.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'hook-1' })).rejects.toMatchObject({ name: 'TaskNotFoundError' });
    await expect(client.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'hook-1' })).rejects.toMatchObject({ name: 'TaskNotFoundError' });
    await expect(client.createTaskPushNotificationConfig(pushConfig('no-such-task', 'http://127.0.0.1:9/hook'))).rejects.toMatchObject({
      name: 'TaskNotFoundError',
    });
  });
});

describe('push notification delivery', () => {
  let receiver: Receiver;
  let client: Client;
  beforeAll(async () => {
    receiver = await startReceiver();
    client = await a2aClient(gateway, 'JSONRPC');
  });
  afterAll(async () => {
    await receiver?.close();
  });

  it('posts every update of a task to the config given with the message, in order, with its token', async () => {
    const config = pushConfig('', receiver.url, { id: 'inline', token: 'let-me-in' });
    const task = asTask(await client.sendMessage(send(userMessage('/slow 4'), { taskPushNotificationConfig: config })));
    const mine = () => receiver.accepted.filter((r) => JSON.stringify(r.body).includes(task.id));
    await eventually(() => expect(told(mine()).at(-1)).toBe('status:TASK_STATE_COMPLETED'));
    expect(told(mine())).toEqual([
      'status:TASK_STATE_WORKING',
      'artifact:1 ',
      'artifact:2 ',
      'artifact:3 ',
      'artifact:4 ',
      'artifact:',
      'status:TASK_STATE_COMPLETED',
    ]);
    expect(mine()[0].headers).toMatchObject({ 'x-a2a-notification-token': 'let-me-in', 'content-type': 'application/a2a+json' });
  });

  it('pushes the answer of an interrupt to a config created while the task waits', async () => {
    const asked = asTask(await client.sendMessage(send(userMessage('/ask'))));
    await client.createTaskPushNotificationConfig(pushConfig(asked.id, receiver.url, { id: 'later' }));
    await client.sendMessage(send(userMessage('yes', { taskId: asked.id })));
    const mine = () => receiver.accepted.filter((r) => JSON.stringify(r.body).includes(asked.id));
    await eventually(() => expect(told(mine()).at(-1)).toBe('status:TASK_STATE_COMPLETED'));
    expect(told(mine())).toContain('artifact:"yes"');
  });

  it('tries again after receiver failures, and delivers in order', async () => {
    const flaky = await startReceiver((n) => (n <= 2 ? 503 : 200));
    try {
      const task = asTask(await client.sendMessage(send(userMessage('hello'), { taskPushNotificationConfig: pushConfig('', flaky.url) })));
      await eventually(() => expect(told(flaky.accepted).at(-1)).toBe('status:TASK_STATE_COMPLETED'));
      expect(flaky.received.length).toBe(flaky.accepted.length + 2);
      expect(told(flaky.accepted)[0]).toBe('status:TASK_STATE_WORKING');
      expect(JSON.stringify(flaky.accepted[0].body)).toContain(task.id);
    } finally {
      await flaky.close();
    }
  });

  it('records a dead letter on the config when no try delivers', async () => {
    const broken = await startReceiver(() => 500);
    try {
      const task = asTask(await client.sendMessage(send(userMessage('nobody hears'), { taskPushNotificationConfig: pushConfig('', broken.url, { id: 'dead' }) })));
      await eventually(async () => {
        const config = await gateway.store.pushConfigs.get(task.id, 'dead');
        expect(config?.deadLetter).toMatchObject({ attempts: 3, error: expect.stringContaining('500') });
      });
    } finally {
      await broken.close();
    }
  });

  it('does not follow a redirect', async () => {
    const moving = await startReceiver(() => 302);
    try {
      const task = asTask(await client.sendMessage(send(userMessage('go elsewhere'), { taskPushNotificationConfig: pushConfig('', moving.url, { id: 'moved' }) })));
      await eventually(async () => {
        const config = await gateway.store.pushConfigs.get(task.id, 'moved');
        expect(config?.deadLetter).toMatchObject({ attempts: 1, error: expect.stringContaining('302') });
      });
    } finally {
      await moving.close();
    }
  });
});

describe('push notification targets', () => {
  it('take a loopback http target with FUNDUQ_PUSH_ALLOW_LOOPBACK and FUNDUQ_PUSH_ALLOW_HTTP, which npm start warns of, and still refuse private ones', async () => {
    const lines: string[] = [];
    // As npm start reads them (only those settings are taken: the test gateway keeps its port and memory store).
    const env: Record<string, string> = { FUNDUQ_PUSH_ALLOW_LOOPBACK: 'true', FUNDUQ_PUSH_ALLOW_HTTP: 'true' };
    const { pushAllowLoopback, pushAllowHttp } = readSettings(LOCAL_SETTINGS, 'env', (name) => env[name]);
    expect(readSettings(LOCAL_SETTINGS, 'env', () => undefined)).toMatchObject({ pushAllowLoopback: false, pushAllowHttp: false });
    const local = await startTestGateway({ pushAllowLoopback, pushAllowHttp, log: (line) => lines.push(line) });
    const receiver = await startReceiver();
    try {
      for (const name of Object.keys(env)) {
        expect(lines.filter((line) => line.includes(name))).toEqual([expect.stringMatching(/^warning: .*for development only/)]);
      }
      const client = await a2aClient(local, 'JSONRPC');
      const task = asTask(await client.sendMessage(send(userMessage('/slow 3'), { returnImmediately: true, taskPushNotificationConfig: pushConfig('', receiver.url) })));
      await eventually(() => expect(receiver.accepted.map(({ body }) => JSON.stringify(body)).some((b) => b.includes(task.id) && b.includes('TASK_STATE_COMPLETED'))).toBe(true));
      await expect(client.createTaskPushNotificationConfig(pushConfig(task.id, 'http://10.0.0.7/hook'))).rejects.toMatchObject({ name: 'RequestMalformedError' });
    } finally {
      await receiver.close();
      await local.close();
    }
  });

  it('refuses private, loopback, link-local, IPv4-carrying IPv6, http and non-http targets by default', async () => {
    const strict = await startTestGateway();
    try {
      const client = await a2aClient(strict, 'HTTP+JSON');
      const task = asTask(await client.sendMessage(send(userMessage('guard me'))));
      const targets = [
        'https://127.0.0.1:8080/hook',
        'https://localhost:8080/hook',
        'https://10.0.0.7/hook',
        'https://192.168.1.1/hook',
        'https://169.254.169.254/latest/meta-data',
        'https://[::1]/hook',
        'https://[fd00:ec2::254]/hook',
        'https://[::169.254.169.254]/latest',
        'https://[::127.0.0.1]/hook',
        'https://[::ffff:0:7f00:1]/hook',
        'https://[2002:7f00:1::1]/hook',
        'https://[64:ff9b::10.0.0.1]/hook',
        'http://93.184.216.34/hook',
        'ftp://example.com/hook',
        'not a url',
      ];
      for (const url of targets) {
        await expect(client.createTaskPushNotificationConfig(pushConfig(task.id, url)), url).rejects.toMatchObject({
          name: 'RequestMalformedError',
        });
      }
      await expect(
        client.sendMessage(send(userMessage('inline'), { taskPushNotificationConfig: pushConfig('', 'https://10.1.2.3/hook') })),
      ).rejects.toMatchObject({ name: 'RequestMalformedError', message: expect.stringContaining('private') });
      await expect(
        client.sendMessage(send(userMessage('inline'), { taskPushNotificationConfig: pushConfig('', 'http://93.184.216.34/hook') })),
      ).rejects.toMatchObject({ name: 'RequestMalformedError', message: expect.stringContaining('only https') });
    } finally {
      await strict.close();
    }
  });
});
