import type { Context } from 'hono';
import { z } from 'zod';
import type { Principal } from '../core/model.js';
import type { PrincipalResolver } from './principal.js';

/** API keys and whom each one speaks for. */
export type ApiKeys = ReadonlyMap<string, Principal>;

const NAME = z.string().min(1, 'must not be empty').max(256, 'must be at most 256 characters');

/**
 * An API keys file: `{ "<key>": { "principal": "alice", "tenant": "acme" }, … }`. A key is sent in
 * a header, so it is visible ASCII with no spaces.
 */
export const ApiKeysFileSchema = z
  .record(
    z.string().regex(/^[\x21-\x7e]{1,512}$/, 'a key must be 1 to 512 visible ASCII characters, no spaces'),
    z.object({ principal: NAME, tenant: NAME }).strict(),
  )
  .refine((keys) => Object.keys(keys).length > 0, 'names no key: leave FUNDUQ_API_KEYS unset for open mode');

/**
 * Reads an API keys file's text. A problem names the field, and the entry by its position and the
 * first characters of its key only: the message goes to logs, the key must not.
 */
export function parseApiKeys(text: string): { ok: true; keys: ApiKeys } | { ok: false; message: string } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return { ok: false, message: `not JSON: ${error instanceof Error ? error.message : String(error)}` };
  }
  const parsed = ApiKeysFileSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const [key, ...field] = issue.path.map(String);
    if (key === undefined) {
      return { ok: false, message: issue.code === 'invalid_type' ? 'must be a JSON object: { "<key>": { "principal": …, "tenant": … } }' : issue.message };
    }
    const position = Object.keys(json as object).indexOf(key) + 1;
    const where = [`entry ${position} (key "${key.slice(0, 4)}…")`, ...field].join('.');
    return { ok: false, message: `${where}: ${issue.message}` };
  }
  return { ok: true, keys: new Map(Object.entries(parsed.data).map(([key, { principal, tenant }]) => [key, { id: principal, tenant }])) };
}

/**
 * The principal of a request that carries one of the keys, as `Authorization: Bearer <key>` or
 * `x-api-key: <key>`; none for a missing or unknown key. Keys are looked up by their SHA-256, so
 * the lookup's timing says nothing about how much of a guessed key was right.
 */
export function apiKeyResolver(keys: ApiKeys): PrincipalResolver {
  const byDigest = (async () => {
    const entries = await Promise.all([...keys].map(async ([key, principal]) => [await digest(key), principal] as const));
    return new Map(entries);
  })();
  return async (c: Context) => {
    const presented = bearer(c.req.header('Authorization')) ?? c.req.header('x-api-key')?.trim();
    if (!presented) return undefined;
    const hash = await digest(presented);
    const principal = (await byDigest).get(hash);
    return principal && { ...principal, credentialId: credentialIdOfDigest(hash) };
  };
}

function bearer(header: string | undefined): string | undefined {
  return /^Bearer +(\S+) *$/i.exec(header ?? '')?.[1];
}

/** An id for a credential, never the credential: the first 16 hex digits of its SHA-256 (enough to tell keys apart, nothing of the key). */
export async function credentialIdOf(secret: string): Promise<string> {
  return credentialIdOfDigest(await digest(secret));
}

function credentialIdOfDigest(hash: string): string {
  return hash.slice(0, 16);
}

/** SHA-256 of a text, as hex (WebCrypto: the doors run on web-standard globals). */
export async function digest(key: string): Promise<string> {
  const bytes = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(key)));
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');
}
