import type { LookupAddress } from 'node:dns';
import { createServer as createTlsServer } from 'node:tls';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { HttpPushSender, type Resolve } from '../../lambdas/adapters/http/push-sender.js';
import type { PushConfig } from '../../lambdas/core/model.js';
import { startReceiver } from '../support/receiver.js';

const config = (url: string): PushConfig => ({ taskId: 't', configId: 'c', tenant: 'acme', url, createdAt: '2025-01-01T00:00:00.000Z' });
/** A DNS that gives each answer in turn (the last one for ever after), and counts the questions. */
function rebinding(...answers: string[][]): Resolve & { asked: string[] } {
  const asked: string[] = [];
  const resolve = async (host: string): Promise<LookupAddress[]> => {
    asked.push(host);
    return answers[Math.min(asked.length, answers.length) - 1].map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return Object.assign(resolve, { asked });
}

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

  it('refuses every IPv6 form that carries a refused IPv4 address, in hex or dotted spelling, written out or behind a name', async () => {
    const sender = new HttpPushSender();
    const carriers = [
      '::169.254.169.254', // IPv4-compatible
      '::127.0.0.1',
      '::7f00:1',
      '0:0:0:0:0:0:a00:1',
      '::ffff:127.0.0.1', // IPv4-mapped
      '::ffff:a9fe:a9fe',
      '0000:0000:0000:0000:0000:FFFF:0A00:0001',
      '::ffff:0:7f00:1', // SIIT
      '::ffff:0:169.254.169.254',
      '2002:7f00:1::1', // 6to4
      '2002:a9fe:a9fe:1234::5',
      '2002:0a00:0001::',
      '64:ff9b::127.0.0.1', // NAT64
      '64:ff9b::a9fe:a9fe',
      '2001:0:a00:1::5db8:d822', // Teredo: its server in 10/8
      '2001:0:5db8:d822::80ff:fefe', // Teredo: its client 127.0.1.1 (bits inverted)
    ];
    for (const address of carriers) {
      expect(await sender.vet(`https://[${address}]/hook`), address).toMatch(/private, loopback/);
      const named = new HttpPushSender({}, undefined, rebinding([address]));
      expect(await named.vet('https://hooks.test/hook'), `hooks.test → ${address}`).toMatch(/private, loopback/);
    }
    for (const address of ['::ffff:93.184.216.34', '2002:5db8:d822::1', '64:ff9b::93.184.216.34', '2606:4700:4700::1111']) {
      expect(await sender.vet(`https://[${address}]/hook`), address).toBeUndefined();
    }
    expect(await new HttpPushSender({ allowLoopback: true }).vet('https://[::ffff:127.0.0.1]/')).toBeUndefined();
    expect(await new HttpPushSender({ allowLoopback: true }).vet('https://[2002:a00:1::1]/')).toMatch(/private, loopback/);
  });

  it('refuses at send time a name that resolved to a public address when vetted and resolves to a private one now', async () => {
    const receiver = await startReceiver();
    try {
      const dns = rebinding(['93.184.216.34'], ['127.0.0.1']);
      const sender = new HttpPushSender({ allowHttp: true, firstRetryMs: 1 }, undefined, dns);
      const url = receiver.url.replace('127.0.0.1', 'hooks.test');
      expect(await sender.vet(url)).toBeUndefined();
      expect(await sender.send({ config: config(url), body })).toMatchObject({ delivered: false, attempts: 1, error: expect.stringContaining('loopback') });
      expect(receiver.received).toEqual([]);
    } finally {
      await receiver.close();
    }
  });

  it('connects to the address it vetted, with no second lookup between the check and the call', async () => {
    const receiver = await startReceiver();
    try {
      // Asked again, the name would lead to a private address: a second lookup would fail the try.
      const dns = rebinding(['127.0.0.1'], ['10.0.0.1']);
      const sender = new HttpPushSender({ allowHttp: true, allowLoopback: true, attempts: 1 }, undefined, dns);
      const url = receiver.url.replace('127.0.0.1', 'hooks.test');
      expect(await sender.send({ config: config(url), body })).toEqual({ delivered: true });
      expect(dns.asked).toEqual(['hooks.test']);
      expect(receiver.received[0].headers.host).toBe(`hooks.test:${new URL(url).port}`);
    } finally {
      await receiver.close();
    }
  });

  it('names the host in TLS (SNI) while connecting to the vetted address', async () => {
    const named: string[] = [];
    // No certificate: the handshake stops after the client's hello, which is what is looked at.
    const server = createTlsServer({ SNICallback: (servername, callback) => (named.push(servername), callback(new Error('no certificate'))) });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const dns = rebinding(['127.0.0.1'], ['10.0.0.1']);
      const sender = new HttpPushSender({ allowLoopback: true, attempts: 1 }, undefined, dns);
      const result = await sender.send({ config: config(`https://hooks.test:${(server.address() as AddressInfo).port}/hook`), body });
      expect(result).toMatchObject({ delivered: false });
      expect(named).toEqual(['hooks.test']);
      expect(dns.asked).toEqual(['hooks.test']);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
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
