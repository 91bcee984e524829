import type { Hono } from 'hono';
import { z } from 'zod';
import type { Gateway } from '../../core/gateway.js';
import { AGENT_ID, AGENT_ID_RULE } from '../../core/model.js';
import { LINK_PATH } from '../../../packages/provider/src/wire.js';
import { errorResponse } from '../http-errors.js';
import { describeIssue, readJson } from '../input.js';
import { noteAudit } from '../audit.js';

/** What a provider id may be: it is a path segment and part of the link's signed proof. */
const PROVIDER_ID = /^[A-Za-z0-9_.-]{1,128}$/;

/** `PUT /admin/providers/{providerId}`: who a provider that dials out is, what it may serve, and how much at once. */
export const ProviderRegistrationSchema = z
  .object({
    publicKey: z.string().min(1).max(4096),
    agents: z.array(z.string().regex(AGENT_ID, AGENT_ID_RULE)).min(1).max(100),
    maxConcurrentRuns: z.number().int().min(1).max(10_000),
  })
  .strict();

/** The registry of providers that dial out, and funduq's own public key they pin. */
export function adminProviderRoutes(door: Hono, gateway: Gateway): void {
  door.get('/link', (c) =>
    gateway.link.publicKey === undefined
      ? errorResponse(c, 'not_found', 'this gateway takes no provider links')
      : c.json({ publicKey: gateway.link.publicKey, path: LINK_PATH }),
  );

  door.get('/providers', async (c) => c.json({ providers: await gateway.link.providers.list() }));

  door.get('/providers/:providerId', async (c) => {
    const provider = await gateway.link.providers.get(c.req.param('providerId'));
    return provider ? c.json(provider) : errorResponse(c, 'not_found', `no provider "${c.req.param('providerId')}"`);
  });

  door.put('/providers/:providerId', async (c) => {
    const providerId = c.req.param('providerId');
    const note = noteAudit(c, { action: 'provider.changed', target: `provider:${providerId}`, tenant: null });
    if (!PROVIDER_ID.test(providerId)) {
      return errorResponse(c, 'invalid_input', 'ProviderRegistration.providerId: the path\'s provider id must be 1 to 128 letters, digits, ".", "_" or "-"');
    }
    const body = await readJson(c);
    if (!body.ok) return errorResponse(c, 'invalid_input', body.message);
    const parsed = ProviderRegistrationSchema.safeParse(body.value);
    if (!parsed.success) return errorResponse(c, 'invalid_input', describeIssue('ProviderRegistration', parsed.error));
    const before = await gateway.link.providers.get(providerId);
    const put = await gateway.link.providers.put({ providerId, ...parsed.data });
    if (!put.ok) return errorResponse(c, put.code, put.message);
    Object.assign(note, put.value.created ? { action: 'provider.registered' } : { before }, { after: put.value.provider });
    return c.json(put.value.provider, put.value.created ? 201 : 200);
  });

  door.delete('/providers/:providerId', async (c) => {
    const note = noteAudit(c, { action: 'provider.deleted', target: `provider:${c.req.param('providerId')}`, tenant: null });
    note.before = await gateway.link.providers.get(c.req.param('providerId'));
    return (await gateway.link.providers.delete(c.req.param('providerId'))) ? c.body(null, 204) : errorResponse(c, 'not_found', `no provider "${c.req.param('providerId')}"`);
  });
}
