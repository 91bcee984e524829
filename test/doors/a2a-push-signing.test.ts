import { createHash } from 'node:crypto';
import { AgentCard } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { createLocalJWKSet, createRemoteJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet, type JWTPayload } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_OVERLAP_MS, DEFAULT_ROTATION_MS, PUSH_JWT_LIFETIME_SECONDS } from '../../lambdas/adapters/http/push-signing.js';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { a2aClient, asTask, send, userMessage } from '../support/a2a.js';
import { eventually, FakeClock } from '../support/core-harness.js';
import { startTestGateway } from '../support/gateway.js';
import { startReceiver, type Received, type Receiver } from '../support/receiver.js';

const EXTENSION = 'https://github.com/hukaichun/funduq/ext/push-signing/v1';
// Mid-period, so the key set holds one key whatever the day the suite runs (within an hour of a
// rotation the JWKS rightly names two).
const clock = new FakeClock((Math.floor(Date.now() / DEFAULT_ROTATION_MS) + 0.5) * DEFAULT_ROTATION_MS);
let gateway: LocalGateway;
let receiver: Receiver;
let client: Client;
let jwksUrl: string;

beforeAll(async () => {
  gateway = await startTestGateway({ clock, pushAllowHttp: true, push: { allowLoopback: true, attempts: 1, timeoutMs: 2_000 } });
  receiver = await startReceiver();
  client = await a2aClient(gateway, 'JSONRPC');
  const card = AgentCard.fromJSON(await (await fetch(`${gateway.url}/a2a/demo/.well-known/agent-card.json`, { headers: { 'A2A-Version': '1.0' } })).json());
  const extension = card.capabilities?.extensions.find((e) => e.uri === EXTENSION);
  jwksUrl = String(extension?.params?.jwksUrl);
});
afterAll(async () => {
  await receiver?.close();
  await gateway?.close();
});

/** A task whose pushes go to the receiver, sent now (by the gateway's clock): the pushes it got once it completed. */
async function pushesOf(text: string, config: { token?: string; authentication?: { scheme: string; credentials: string } } = {}): Promise<Received[]> {
  // The config goes with the message, so it is stored before the run can start.
  const taskPushNotificationConfig = { tenant: '', id: '', taskId: '', url: receiver.url, token: config.token ?? '', authentication: config.authentication };
  const task = asTask(await client.sendMessage(send(userMessage(text), { returnImmediately: true, taskPushNotificationConfig })));
  return eventually(() => {
    const mine = receiver.accepted.filter(({ body }) => JSON.stringify(body).includes(task.id));
    expect(mine.some(({ body }) => JSON.stringify(body).includes('TASK_STATE_COMPLETED'))).toBe(true);
    return mine;
  });
}

/**
 * What a receiver following A2A's guidance does, with a standard JOSE library: the JWT's signature
 * by a key of the JWKS, ES256 only, its audience (this receiver), its age, and the body's hash.
 */
async function verify(push: Received, keys: Parameters<typeof jwtVerify>[1], at = clock.now()): Promise<JWTPayload> {
  const jwt = String(push.headers['x-funduq-notification-jwt']);
  const { payload } = await jwtVerify(jwt, keys, {
    algorithms: ['ES256'],
    audience: receiver.url,
    maxTokenAge: `${PUSH_JWT_LIFETIME_SECONDS}s`,
    currentDate: new Date(at),
  });
  if (payload.request_body_sha256 !== createHash('sha256').update(push.raw).digest('hex')) throw new Error('the body is not the one signed');
  return payload;
}

async function jwksNow(): Promise<JSONWebKeySet> {
  return (await fetch(jwksUrl)).json() as Promise<JSONWebKeySet>;
}

describe('a signed push notification', () => {
  it('names its JWKS on the agent card, served to anyone at the gateway', async () => {
    expect(jwksUrl).toBe(`${gateway.url}/.well-known/jwks.json`);
    const response = await fetch(jwksUrl);
    expect(response.status).toBe(200);
    expect(response.headers.get('cache-control')).toMatch(/max-age=\d+/);
    expect(((await response.json()) as JSONWebKeySet).keys).toEqual([expect.objectContaining({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig' })]);
  });

  it("verifies with the JWKS: signed for its task and receiver, with the body's hash, and the config's token still sent", async () => {
    const pushes = await pushesOf('sign this', { token: 'the-config-token' });
    const keys = createRemoteJWKSet(new URL(jwksUrl));
    for (const push of pushes) {
      const claims = await verify(push, keys);
      expect(claims).toMatchObject({ task_id: expect.any(String), aud: receiver.url, jti: expect.any(String) });
      expect(JSON.stringify(push.body)).toContain(String(claims.task_id));
      expect(claims.exp! - claims.iat!).toBe(PUSH_JWT_LIFETIME_SECONDS);
      expect(push.headers['x-a2a-notification-token']).toBe('the-config-token');
      // With no authentication of the config's own, A2A's place for it: Authorization: Bearer.
      expect(push.headers.authorization).toBe(`Bearer ${String(push.headers['x-funduq-notification-jwt'])}`);
    }
    expect(new Set(pushes.map((p) => String(p.headers['x-funduq-notification-jwt']))).size).toBe(pushes.length);
  });

  it("keeps the config's own authentication in Authorization, the JWT beside it", async () => {
    const [push] = await pushesOf('authenticated', { authentication: { scheme: 'Basic', credentials: 'dXNlcjpwYXNz' } });
    expect(push.headers.authorization).toBe('Basic dXNlcjpwYXNz');
    await verify(push, createLocalJWKSet(await jwksNow()));
  });

  it('is refused when its body was changed on the way, or its signature', async () => {
    const push = (await pushesOf('tamper with me')).find(({ raw }) => raw.includes('TASK_STATE_COMPLETED'))!;
    const keys = createLocalJWKSet(await jwksNow());
    await verify(push, keys);
    await expect(verify({ ...push, raw: push.raw.replace('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED') }, keys)).rejects.toThrow('the body is not the one signed');
    const jwt = String(push.headers['x-funduq-notification-jwt']);
    const forged = `${jwt.slice(0, -4)}${jwt.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`;
    await expect(verify({ ...push, headers: { ...push.headers, 'x-funduq-notification-jwt': forged } }, keys)).rejects.toMatchObject({ code: 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED' });
  });

  it('is refused once its iat is old: a replay later finds it expired', async () => {
    const [push] = await pushesOf('replay me');
    const keys = createLocalJWKSet(await jwksNow());
    const { iat } = await verify(push, keys);
    await expect(verify(push, keys, (iat! + PUSH_JWT_LIFETIME_SECONDS + 1) * 1000)).rejects.toMatchObject({ code: 'ERR_JWT_EXPIRED' });
  });

  it('verifies across a key rotation: the next key is published before it signs, the previous one until its pushes are old', async () => {
    const boundary = (Math.floor(clock.now() / DEFAULT_ROTATION_MS) + 1) * DEFAULT_ROTATION_MS;
    const at = (ms: number) => clock.advance(ms - clock.now());
    // A receiver fetches the set half an overlap before the rotation, and keeps it.
    at(boundary - DEFAULT_OVERLAP_MS / 2);
    const cached = await jwksNow();
    expect(cached.keys).toHaveLength(2);

    at(boundary - 60_000);
    const [before] = await pushesOf('signed by the key of this period');
    const oldKid = decodeProtectedHeader(String(before.headers['x-funduq-notification-jwt'])).kid;
    at(boundary + 60_000);
    const [after] = await pushesOf('signed by the next key');
    const newKid = decodeProtectedHeader(String(after.headers['x-funduq-notification-jwt'])).kid;
    expect(newKid).not.toBe(oldKid);
    expect(cached.keys.map((k) => k.kid).sort()).toEqual([oldKid, newKid].sort());

    // The cached set verifies the next key's push; the set as it is now still verifies the push signed before.
    await verify(after, createLocalJWKSet(cached));
    await verify(before, createLocalJWKSet(await jwksNow()));

    // Once every push the previous key signed is old, it is no longer published.
    at(boundary + DEFAULT_OVERLAP_MS);
    expect((await jwksNow()).keys.map((k) => k.kid)).toEqual([newKid]);
  });
});
