import { randomBytes } from 'node:crypto';
import { GetSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { PushKeys } from '../adapters/http/push-signing.js';
import type { Clock } from '../core/ports.js';
import { dataDirSecret } from './data-dir.js';

/** The file in the data dir, beside the store's, that holds the local push signing seed. */
export const PUSH_SEED_FILE = 'push-signing-seed';

/**
 * The push signing keys on one machine: derived from a seed kept in the data dir (made on the
 * first start, readable by its owner only), so a restart signs with the same keys and receivers
 * keep their cached JWKS. Without a data dir (tests) the seed lives as long as the process.
 */
export async function localPushKeys(options: { dataDir?: string; clock: Pick<Clock, 'now'>; issuer?: string }): Promise<PushKeys> {
  const seed = options.dataDir === undefined ? randomBytes(32).toString('hex') : await dataDirSecret(options.dataDir, PUSH_SEED_FILE);
  return new PushKeys({ seed, clock: options.clock, ...(options.issuer ? { issuer: options.issuer } : {}) });
}

/**
 * How long a function keeps the seed it read. A new value put in the secret (the response to a
 * leaked seed: every key replaced at once, with no overlap) reaches every warm function within
 * this, as the JWKS a receiver cached (`max-age=300`) runs out.
 */
export const SEED_READ_TTL_MS = 5 * 60_000;

/**
 * The push signing keys on AWS: derived from the Secrets Manager secret the stack generates, read
 * by every function that signs (the stream handler) or publishes (the doors), so all of them use
 * the same keys. Read on first use and again once `SEED_READ_TTL_MS` old; a failed read is tried
 * again on the next use, and a failed re-read keeps the keys read before.
 */
export function secretPushKeys(options: { client: SecretsManagerClient; secretArn: string; clock: Pick<Clock, 'now'>; issuer?: string }): () => Promise<PushKeys> {
  let keys: Promise<PushKeys> | undefined;
  let readAt = 0;
  const read = async (): Promise<PushKeys> => {
    const { SecretString } = await options.client.send(new GetSecretValueCommand({ SecretId: options.secretArn }));
    if (!SecretString) throw new Error(`the push signing secret ${options.secretArn} holds no string`);
    return new PushKeys({ seed: SecretString, clock: options.clock, ...(options.issuer ? { issuer: options.issuer } : {}) });
  };
  return () => {
    const now = options.clock.now();
    if (keys !== undefined && now - readAt < SEED_READ_TTL_MS) return keys;
    const before = keys;
    readAt = now;
    keys = read().catch((error: unknown) => {
      keys = before;
      if (before === undefined) throw error;
      return before;
    });
    return keys;
  };
}
