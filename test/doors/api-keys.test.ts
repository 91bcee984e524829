import { createHash } from 'node:crypto';
import type { Context } from 'hono';
import { describe, expect, it } from 'vitest';
import { apiKeyResolver, parseApiKeys } from '../../lambdas/doors/api-keys.js';

function withHeaders(headers: Record<string, string>): Context {
  const lower = Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]));
  return { req: { header: (name: string) => lower[name.toLowerCase()] } } as unknown as Context;
}

describe('an API keys file', () => {
  it('maps each key to the principal and tenant it speaks for', () => {
    const parsed = parseApiKeys(JSON.stringify({ 'sk-alice-123': { principal: 'alice', tenant: 'acme' }, 'sk-bob-456': { principal: 'bob', tenant: 'globex' } }));
    expect(parsed).toEqual({
      ok: true,
      keys: new Map([
        ['sk-alice-123', { id: 'alice', tenant: 'acme' }],
        ['sk-bob-456', { id: 'bob', tenant: 'globex' }],
      ]),
    });
  });

  it('names the field that is wrong, and the entry by position and the first characters of its key only', () => {
    const problem = (text: string) => {
      const parsed = parseApiKeys(text);
      return parsed.ok ? 'fine' : parsed.message;
    };
    expect(problem('{"sk-alice-123": {"principal": "alice"}}')).toBe('entry 1 (key "sk-a…").tenant: Required');
    expect(problem('{"sk-a": {"principal": "a", "tenant": "t"}, "sk-bob-secret": {"principal": "", "tenant": "t"}}')).toBe('entry 2 (key "sk-b…").principal: must not be empty');
    expect(problem('{"sk-alice-123": {"principal": "a", "tenant": "t", "role": "admin"}}')).toMatch(/^entry 1 \(key "sk-a…"\): Unrecognized key/);
    expect(problem('{"has space": {"principal": "a", "tenant": "t"}}')).toMatch(/^entry 1 \(key "has …"\): a key must be/);
    expect(problem('[]')).toMatch(/must be a JSON object/);
    expect(problem('{}')).toMatch(/names no key/);
    expect(problem('{nope')).toMatch(/^not JSON/);
    expect(problem('{"sk-alice-123": {"principal": "alice"}}')).not.toContain('sk-alice-123');
  });
});

describe('the API key resolver', () => {
  const resolve = apiKeyResolver(new Map([['sk-alice-123', { id: 'alice', tenant: 'acme' }]]));

  it('takes the key as Authorization: Bearer or as x-api-key', async () => {
    // The credential is named by its digest's first 16 hex digits (what its audit records say), never itself.
    const alice = { id: 'alice', tenant: 'acme', credentialId: createHash('sha256').update('sk-alice-123').digest('hex').slice(0, 16) };
    expect(await resolve(withHeaders({ Authorization: 'Bearer sk-alice-123' }))).toEqual(alice);
    expect(await resolve(withHeaders({ authorization: 'bearer   sk-alice-123 ' }))).toEqual(alice);
    expect(await resolve(withHeaders({ 'x-api-key': 'sk-alice-123' }))).toEqual(alice);
  });

  it('speaks for nobody without a key, with an unknown one, or with another scheme', async () => {
    expect(await resolve(withHeaders({}))).toBeUndefined();
    expect(await resolve(withHeaders({ 'x-api-key': 'sk-alice-12' }))).toBeUndefined();
    expect(await resolve(withHeaders({ Authorization: 'Basic sk-alice-123' }))).toBeUndefined();
    expect(await resolve(withHeaders({ Authorization: 'Bearer ' }))).toBeUndefined();
  });
});
