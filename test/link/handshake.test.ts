import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, generateKeyPair, LinkRefused } from '../../packages/provider/src/index.js';
import { LINK_PROOF_HEADER } from '../../packages/provider/src/wire.js';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { eventually } from '../support/core-harness.js';
import { startTestGateway } from '../support/gateway.js';
import { echoAgent, handshake, proofHeader, registerProvider } from '../support/link.js';

let gateway: LocalGateway;
const keys = generateKeyPair();
beforeAll(async () => {
  gateway = await startTestGateway();
  await registerProvider(gateway, 'known', { publicKey: keys.publicKey, agents: ['echo'], maxConcurrentRuns: 2 });
});
afterAll(async () => {
  await gateway?.close();
});

const admin = (path: string, init: RequestInit = {}) => fetch(`${gateway.url}/admin${path}`, { headers: { 'Content-Type': 'application/json' }, ...init });

describe('opening a provider link', () => {
  it('refuses an unregistered provider, naming how to register it', async () => {
    const stranger = generateKeyPair();
    const refused = await connect({ url: gateway.link.url, providerId: 'stranger', privateKey: stranger.privateKey, funduqPublicKey: gateway.link.publicKey, agents: { echo: echoAgent() } }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(LinkRefused);
    expect(refused).toMatchObject({ code: 'link_unknown_provider', message: expect.stringContaining('PUT /admin/providers/stranger') });
  });

  it('refuses a proof signed by a key other than the registered one', async () => {
    const other = generateKeyPair();
    const refused = await connect({ url: gateway.link.url, providerId: 'known', privateKey: other.privateKey, funduqPublicKey: gateway.link.publicKey, agents: { echo: echoAgent() } }).catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'link_bad_proof' });
  });

  it('refuses a proof used before, and one made too far from the gateway’s clock', async () => {
    const header = proofHeader('known', keys.privateKey, gateway.link.publicKey);
    expect(await handshake(gateway.link.url, header)).toEqual({ status: 101 });
    expect(await handshake(gateway.link.url, header)).toMatchObject({ status: 401, code: 'link_replayed_proof' });
    const stale = proofHeader('known', keys.privateKey, gateway.link.publicKey, { time: Date.now() - 120_000 });
    expect(await handshake(gateway.link.url, stale)).toMatchObject({ status: 401, code: 'link_stale_proof', message: expect.stringMatching(/120 s away from this gateway's clock/) });
  });

  it('refuses a proof made for another gateway, and an upgrade without a proof', async () => {
    const elsewhere = generateKeyPair().publicKey;
    expect(await handshake(gateway.link.url, proofHeader('known', keys.privateKey, elsewhere))).toMatchObject({ status: 401, code: 'link_wrong_gateway' });
    expect(await handshake(gateway.link.url, undefined)).toMatchObject({ status: 401, code: 'link_proof_malformed' });
    expect(await handshake(gateway.link.url, 'not-a-proof')).toMatchObject({ status: 401, code: 'link_proof_malformed' });
  });

  it('records each link opened and closed, and each refused proof of a registered provider, with the provider as the actor', async () => {
    const audited = async () =>
      (await gateway.store.audit.list({ actor: 'known', from: new Date(Date.now() - 3_600_000).toISOString(), to: new Date(Date.now() + 3_600_000).toISOString(), limit: 1000 })).records;
    const before = (await audited()).length;
    const link = await connect({ url: gateway.link.url, providerId: 'known', privateKey: keys.privateKey, funduqPublicKey: gateway.link.publicKey, agents: { echo: echoAgent() } });
    const refused = await connect({ url: gateway.link.url, providerId: 'known', privateKey: generateKeyPair().privateKey, funduqPublicKey: gateway.link.publicKey, agents: { echo: echoAgent() } }).catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'link_bad_proof' });
    await link.close();
    await eventually(async () => expect((await audited()).slice(before).map((r) => `${r.action} ${r.outcome}`).sort()).toEqual(['link.closed ok', 'link.opened link_bad_proof', 'link.opened ok']));
    const opened = (await audited()).find((r) => r.action === 'link.opened' && r.outcome === 'ok');
    expect(opened).toMatchObject({ actor: { kind: 'provider', principal: 'known' }, target: expect.stringMatching(/^link:./), detail: { providerId: 'known' } });
  });

  it('closes a link that sends a message larger than API Gateway takes (128 KB), as AWS would: 1009', async () => {
    const socket = new WebSocket(gateway.link.url, { headers: { [LINK_PROOF_HEADER]: proofHeader('known', keys.privateKey, gateway.link.publicKey) } });
    await new Promise((resolve, reject) => socket.once('message', resolve).once('error', reject));
    const closed = new Promise<number>((resolve) => socket.once('close', resolve));
    socket.send(JSON.stringify({ v: 1, type: 'heartbeat', padding: 'x'.repeat(128 * 1024) }));
    expect(await closed).toBe(1009);
  });

  it('serves no gateway that cannot prove it holds the key the provider pinned', async () => {
    // A stand-in "gateway" that takes any proof and welcomes with a signature of its own.
    const server: Server = createServer();
    const sockets = new WebSocketServer({ server });
    const impostor = generateKeyPair();
    sockets.on('connection', (socket) => socket.send(JSON.stringify({ v: 1, type: 'welcome', connectionId: 'c1', signature: impostor.publicKey, heartbeatSeconds: 20 })));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}/link`;
    const refused = await connect({ url, providerId: 'known', privateKey: keys.privateKey, funduqPublicKey: gateway.link.publicKey, agents: { echo: echoAgent() } }).catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'funduq_key_mismatch' });
    sockets.close();
    await new Promise((resolve) => server.close(resolve));
  });
});

describe('the admin routes of providers', () => {
  it('registers, shows, replaces and deletes a provider, and names funduq’s own key', async () => {
    const pem = (await import('node:crypto')).createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: keys.publicKey }, format: 'jwk' }).export({ format: 'pem', type: 'spki' }).toString();
    const created = await admin('/providers/laptop', { method: 'PUT', body: JSON.stringify({ publicKey: pem, agents: ['research', 'research'], maxConcurrentRuns: 3 }) });
    expect(created.status).toBe(201);
    expect(await created.json()).toMatchObject({ providerId: 'laptop', publicKey: keys.publicKey, agents: ['research'], maxConcurrentRuns: 3, places: 0, linked: false, serving: [] });
    const replaced = await admin('/providers/laptop', { method: 'PUT', body: JSON.stringify({ publicKey: keys.publicKey, agents: ['research'], maxConcurrentRuns: 5 }) });
    expect(replaced.status).toBe(200);
    expect(((await (await admin('/providers')).json()) as { providers: { providerId: string }[] }).providers.map((p) => p.providerId)).toContain('laptop');
    expect(await (await admin('/providers/laptop')).json()).toMatchObject({ maxConcurrentRuns: 5 });
    expect(await (await admin('/link')).json()).toEqual({ publicKey: gateway.link.publicKey, path: '/link' });
    expect((await admin('/providers/laptop', { method: 'DELETE' })).status).toBe(204);
    expect((await admin('/providers/laptop')).status).toBe(404);
    expect((await admin('/providers/laptop', { method: 'DELETE' })).status).toBe(404);
  });

  it('refuses a registration that names no Ed25519 key, or a misspelt field, naming the field', async () => {
    const bad = await admin('/providers/p1', { method: 'PUT', body: JSON.stringify({ publicKey: 'AAAA', agents: ['a'], maxConcurrentRuns: 1 }) });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: { code: 'invalid_input', message: expect.stringMatching(/^ProviderRegistration.publicKey: must be an Ed25519 public key/) } });
    const misspelt = await admin('/providers/p1', { method: 'PUT', body: JSON.stringify({ publicKey: keys.publicKey, agents: ['a'], maxConcurrentRun: 1 }) });
    expect(((await misspelt.json()) as { error: { message: string } }).error.message).toMatch(/^ProviderRegistration/);
    const path = await admin('/providers/bad%20id', { method: 'PUT', body: JSON.stringify({ publicKey: keys.publicKey, agents: ['a'], maxConcurrentRuns: 1 }) });
    expect(path.status).toBe(400);
  });

  it('shows a linked provider as linked, with the agents it serves', async () => {
    const link = await connect({ url: gateway.link.url, providerId: 'known', privateKey: keys.privateKey, funduqPublicKey: gateway.link.publicKey, agents: { echo: echoAgent() } });
    expect(await (await admin('/providers/known')).json()).toMatchObject({ linked: true, serving: ['echo'] });
    await link.close();
  });
});
