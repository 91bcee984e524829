import type { Context } from 'hono';
import { describe, expect, it } from 'vitest';
import { ENV } from '../../lambdas/runtimes/environment.js';
import { principalResolver } from '../../lambdas/runtimes/aws.js';

/** A request as API Gateway hands it to the doors: what its authorizer established, on a caller route. */
function request(requestContext: object): Context {
  return { env: { requestContext }, req: { method: 'POST', path: '/agui/demo' } } as unknown as Context;
}

describe('the principal on AWS', () => {
  it('makes each API key a tenant of its own', async () => {
    const resolve = principalResolver({ [ENV.apiAuth]: 'apiKey' });
    expect(await resolve(request({ identity: { apiKeyId: 'k1' } }))).toEqual({ id: 'apikey:k1', tenant: 'apikey:k1' });
    expect(await resolve(request({ identity: {} }))).toBeUndefined();
  });

  it("makes each JWT subject a tenant of its own when no tenant claim is named", async () => {
    const resolve = principalResolver({ [ENV.apiAuth]: 'jwt' });
    expect(await resolve(request({ authorizer: { claims: { sub: 'u1', 'custom:tenant': 'acme' } } }))).toEqual({ id: 'jwt:u1', tenant: 'jwt:u1' });
  });

  it('files a JWT subject under the tenant its claim names, and refuses a token without the claim', async () => {
    const resolve = principalResolver({ [ENV.apiAuth]: 'jwt', FUNDUQ_JWT_TENANT_CLAIM: 'custom:tenant' });
    expect(await resolve(request({ authorizer: { claims: { sub: 'u1', 'custom:tenant': 'acme' } } }))).toEqual({ id: 'jwt:u1', tenant: 'acme' });
    expect(await resolve(request({ authorizer: { claims: { sub: 'u2', 'custom:tenant': 'acme' } } }))).toEqual({ id: 'jwt:u2', tenant: 'acme' });
    expect(await resolve(request({ authorizer: { claims: { sub: 'u3' } } }))).toBeUndefined();
    expect(await resolve(request({ authorizer: { claims: { sub: 'u3', 'custom:tenant': '' } } }))).toBeUndefined();
    expect(await resolve(request({ authorizer: { claims: { 'custom:tenant': 'acme' } } }))).toBeUndefined();
  });
});
