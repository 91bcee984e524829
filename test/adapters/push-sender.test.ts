import { describe, expect, it } from 'vitest';
import { HttpPushSender } from '../../lambdas/adapters/http/push-sender.js';
import type { PushConfig } from '../../lambdas/core/model.js';
import { startReceiver } from '../support/receiver.js';

const config = (url: string): PushConfig => ({ taskId: 't', configId: 'c', tenant: 'acme', url, createdAt: '2025-01-01T00:00:00.000Z' });
const body = { payload: { $case: 'statusUpdate', value: { taskId: 't', contextId: 'x', status: { state: 2 }, metadata: undefined } } };

describe('HttpPushSender', () => {
  it('allows only https targets unless http is allowed', async () => {
    expect(await new HttpPushSender().vet('http://93.184.216.34/hook')).toContain('https');
    expect(await new HttpPushSender().vet('https://93.184.216.34/hook')).toBeUndefined();
    expect(await new HttpPushSender({ allowHttp: true }).vet('http://93.184.216.34/hook')).toBeUndefined();
    expect(await new HttpPushSender().vet('file:///etc/passwd')).toBeDefined();
  });

  it('refuses private, loopback, link-local and metadata addresses, written out or behind a name or NAT64', async () => {
    const sender = new HttpPushSender();
    for (const url of [
      'https://10.0.0.1/',
      'https://172.20.1.1/',
      'https://127.0.0.1/',
      'https://169.254.169.254/latest',
      'https://[::1]/',
      'https://[fe80::1]/',
      'https://[fd00:ec2::254]/',
      'https://[::ffff:127.0.0.1]/',
      'https://[64:ff9b::a00:1]/',
      'https://localhost/',
    ]) {
      expect(await sender.vet(url), url).toMatch(/private, loopback/);
    }
    expect(await sender.vet('https://[64:ff9b::5db8:d822]/')).toBeUndefined();
  });

  it('allows loopback only with the test-only allowance', async () => {
    expect(await new HttpPushSender({ allowLoopback: true }).vet('https://127.0.0.1/')).toBeUndefined();
    expect(await new HttpPushSender({ allowLoopback: true }).vet('https://10.0.0.1/')).toBeDefined();
  });

  it('refuses at send time, without retrying, a target it may not call', async () => {
    const receiver = await startReceiver();
    try {
      const sender = new HttpPushSender({ allowHttp: true, firstRetryMs: 1 });
      const result = await sender.send({ config: config(receiver.url), body });
      expect(result).toMatchObject({ delivered: false, attempts: 1, error: expect.stringContaining('loopback') });
      const named = await sender.send({ config: config(receiver.url.replace('127.0.0.1', 'localhost')), body });
      expect(named).toMatchObject({ delivered: false, attempts: 1 });
      expect(receiver.received).toEqual([]);
    } finally {
      await receiver.close();
    }
  });

  it('posts the StreamResponse as A2A JSON with the config\'s credentials', async () => {
    const receiver = await startReceiver();
    try {
      const sender = new HttpPushSender({ allowHttp: true, allowLoopback: true });
      const result = await sender.send({ config: { ...config(receiver.url), token: 'tok', authentication: { scheme: 'Bearer', credentials: 'abc' } }, body });
      expect(result).toEqual({ delivered: true });
      expect(receiver.received[0].headers).toMatchObject({ authorization: 'Bearer abc', 'x-a2a-notification-token': 'tok' });
      expect(receiver.received[0].body).toEqual({ statusUpdate: { taskId: 't', contextId: 'x', status: { state: 'TASK_STATE_WORKING' } } });
    } finally {
      await receiver.close();
    }
  });
});
