import type { Hono } from 'hono';
import { z } from 'zod';
import type { Gateway } from '../core/gateway.js';
import { errorResponse } from './http-errors.js';
import { describeIssue, readJson } from './input.js';
import { noteAudit } from './audit.js';

const PrincipalKeysSchema = z.object({ publicKeys: z.array(z.string().min(1).max(1024)).min(1) }).strict();

/**
 * A principal's keys, for the admin door: `PUT`, `GET`, `DELETE /tenants/{tenant}/principals/{principal}`.
 * An actor chain the principal presents must end with a hop signed by one of them.
 */
export function adminPrincipalRoutes(door: Hono, gateway: Gateway): void {
  const path = '/tenants/:tenant/principals/:principal';
  door.put(path, async (c) => {
    const note = noteAudit(c, { action: 'principal.keys_changed', target: `principal:${c.req.param('principal')}`, tenant: c.req.param('tenant') });
    const before = await gateway.principals.get(c.req.param('tenant'), c.req.param('principal'));
    if (before.ok) note.before = before.value.publicKeys;
    const body = await readJson(c);
    if (!body.ok) return errorResponse(c, 'invalid_input', body.message);
    const parsed = PrincipalKeysSchema.safeParse(body.value);
    if (!parsed.success) return errorResponse(c, 'invalid_input', describeIssue('PrincipalKeys', parsed.error));
    const put = await gateway.principals.put(c.req.param('tenant'), c.req.param('principal'), parsed.data.publicKeys);
    if (!put.ok) return errorResponse(c, put.code, put.message);
    const { created, ...view } = put.value;
    note.after = view.publicKeys;
    return c.json(view, created ? 201 : 200);
  });
  door.get(path, async (c) => {
    const found = await gateway.principals.get(c.req.param('tenant'), c.req.param('principal'));
    return found.ok ? c.json(found.value) : errorResponse(c, found.code, found.message);
  });
  door.delete(path, async (c) => {
    const note = noteAudit(c, { action: 'principal.keys_deleted', target: `principal:${c.req.param('principal')}`, tenant: c.req.param('tenant') });
    const before = await gateway.principals.get(c.req.param('tenant'), c.req.param('principal'));
    if (before.ok) note.before = before.value.publicKeys;
    const deleted = await gateway.principals.delete(c.req.param('tenant'), c.req.param('principal'));
    return deleted.ok ? c.body(null, 204) : errorResponse(c, deleted.code, deleted.message);
  });
}
