import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_ROTATION_MS, PushKeys } from '../../lambdas/adapters/http/push-signing.js';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { mockClient } from 'aws-sdk-client-mock';
import { PUSH_SEED_FILE, SEED_READ_TTL_MS, secretPushKeys } from '../../lambdas/runtimes/push-keys.js';
import { FakeClock } from '../support/core-harness.js';
import { startTestGateway } from '../support/gateway.js';

const SEED = 'a-seed-of-at-least-thirty-two-bytes-0123456789';
const dir = mkdtempSync(join(tmpdir(), 'funduq-push-keys-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the push signing keys', () => {
  it('are the same wherever the same seed is read: one function signs, another publishes, and the JWT verifies', async () => {
    const clock = new FakeClock(Date.parse('2026-12-01T12:00:00Z'));
    const signer = new PushKeys({ seed: SEED, clock });
    const publisher = new PushKeys({ seed: SEED, clock });
    expect(publisher.published()).toEqual(signer.published());
    const jwt = signer.sign({ taskId: 't-1', audience: 'https://receiver.example/hook', body: '{"task":{}}' });
    const { payload } = await jwtVerify(jwt, createLocalJWKSet({ keys: [...publisher.published()] }), {
      algorithms: ['ES256'],
      currentDate: new Date(clock.now()),
    });
    expect(payload).toMatchObject({ task_id: 't-1', aud: 'https://receiver.example/hook' });
    expect(new PushKeys({ seed: `${SEED}-other`, clock }).published()[0].kid).not.toBe(signer.published()[0].kid);
  });

  it('follow a new value put in the AWS secret within the read TTL, and keep the keys they have through a failed re-read', async () => {
    const clock = new FakeClock(Date.parse('2026-12-01T12:00:00Z'));
    const secrets = mockClient(SecretsManagerClient);
    secrets.on(GetSecretValueCommand).resolvesOnce({ SecretString: SEED }).resolvesOnce({ SecretString: `${SEED}-replaced` }).rejects(new Error('throttled'));
    const keys = secretPushKeys({ client: new SecretsManagerClient({ region: 'eu-west-1' }), secretArn: 'arn:seed', clock });
    const first = (await keys()).published()[0].kid;
    clock.advance(SEED_READ_TTL_MS - 1);
    expect((await keys()).published()[0].kid).toBe(first);
    expect(secrets.calls()).toHaveLength(1);
    clock.advance(1);
    const replaced = (await keys()).published()[0].kid;
    expect(replaced).not.toBe(first);
    clock.advance(SEED_READ_TTL_MS);
    expect((await keys()).published()[0].kid).toBe(replaced);
    expect(secrets.calls()).toHaveLength(3);
    secrets.restore();
  });

  it('rotate by themselves, one key per period, a new one each period', () => {
    const clock = new FakeClock(Date.parse('2026-12-01T12:00:00Z'));
    const keys = new PushKeys({ seed: SEED, clock });
    const first = keys.published().map((k) => k.kid);
    clock.advance(DEFAULT_ROTATION_MS);
    const next = keys.published().map((k) => k.kid);
    expect(first).toHaveLength(1);
    expect(next).toHaveLength(1);
    expect(next).not.toEqual(first);
  });

  it('refuse a seed too short to derive keys from', () => {
    expect(() => new PushKeys({ seed: 'short', clock: new FakeClock() })).toThrow(RangeError);
  });

  it('outlive a restart of npm start: the seed is a file of the data dir, readable by its owner only', async () => {
    const dataDir = join(dir, 'data');
    const jwks = async (url: string) => (await fetch(`${url}/.well-known/jwks.json`)).json();
    const first = await startTestGateway({ dataDir });
    const before = await jwks(first.url);
    await first.close();
    const second = await startTestGateway({ dataDir });
    try {
      expect(await jwks(second.url)).toEqual(before);
      expect(statSync(join(dataDir, PUSH_SEED_FILE)).mode & 0o777).toBe(0o600);
    } finally {
      await second.close();
    }
  });
});
