import type { Context, Hono } from 'hono';
import { z } from 'zod';
import type { Gateway } from '../core/gateway.js';
import { errorResponse } from './http-errors.js';
import { describeIssue, readJson } from './input.js';
import { noteAudit } from './audit.js';

const Days = z.number().int().min(1).max(36_500).nullable();
/** A tenant's own retention: each field a whole number of days, or null to keep for ever; a field left out takes the gateway's. */
const PolicySchema = z.object({ contentDays: Days.optional(), usageDays: Days.optional() }).strict();
const HoldSchema = z.object({ reason: z.string().max(1_000).optional() }).strict();

/**
 * Retention for the admin door (issue 27): `GET`/`PUT /tenants/{tenant}/retention`, a legal hold
 * on a tenant (`PUT`/`DELETE /tenants/{tenant}/hold`) and on one of its threads
 * (`PUT`/`DELETE /tenants/{tenant}/threads/{threadId}/hold`). Each change is audited with its
 * values before and after.
 */
export function adminRetentionRoutes(door: Hono, gateway: Gateway): void {
  door.get('/tenants/:tenant/retention', async (c) => c.json(await gateway.retention.view(c.req.param('tenant'))));

  door.put('/tenants/:tenant/retention', async (c) => {
    const tenant = c.req.param('tenant');
    const note = noteAudit(c, { action: 'tenant.retention_changed', target: `tenant:${tenant}`, tenant });
    const body = await readJson(c);
    if (!body.ok) return errorResponse(c, 'invalid_input', body.message);
    const parsed = PolicySchema.safeParse(body.value);
    if (!parsed.success) return errorResponse(c, 'invalid_input', describeIssue('Retention', parsed.error));
    note.before = (await gateway.retention.view(tenant)).own ?? null;
    const set = await gateway.retention.set(tenant, parsed.data);
    if (!set.ok) return errorResponse(c, set.code, set.message);
    note.after = set.value.own ?? null;
    return c.json(set.value);
  });

  door.put('/tenants/:tenant/hold', async (c) => {
    const tenant = c.req.param('tenant');
    const note = noteAudit(c, { action: 'tenant.hold_placed', target: `tenant:${tenant}`, tenant });
    const hold = await readHold(c);
    if (!hold.ok) return errorResponse(c, 'invalid_input', hold.message);
    note.before = (await gateway.retention.view(tenant)).hold ?? null;
    const view = await gateway.retention.holdTenant(tenant, { at: new Date(gateway.audit.now()).toISOString(), by: 'admin', ...hold.value });
    note.after = view.hold ?? null;
    return c.json(view);
  });

  door.delete('/tenants/:tenant/hold', async (c) => {
    const tenant = c.req.param('tenant');
    const note = noteAudit(c, { action: 'tenant.hold_lifted', target: `tenant:${tenant}`, tenant });
    note.before = (await gateway.retention.view(tenant)).hold ?? null;
    const view = await gateway.retention.holdTenant(tenant, undefined);
    note.after = null;
    return c.json(view);
  });

  door.put('/tenants/:tenant/threads/:threadId/hold', async (c) => {
    const { tenant, threadId } = c.req.param();
    const note = noteAudit(c, { action: 'thread.hold_placed', target: `thread:${threadId}`, tenant });
    const hold = await readHold(c);
    if (!hold.ok) return errorResponse(c, 'invalid_input', hold.message);
    const held = await gateway.retention.holdThread({ tenant, threadId }, { at: new Date(gateway.audit.now()).toISOString(), by: 'admin', ...hold.value });
    if (!held.ok) return errorResponse(c, held.code, held.message);
    note.after = held.value.hold ?? null;
    return c.json(held.value);
  });

  door.delete('/tenants/:tenant/threads/:threadId/hold', async (c) => {
    const { tenant, threadId } = c.req.param();
    noteAudit(c, { action: 'thread.hold_lifted', target: `thread:${threadId}`, tenant });
    const lifted = await gateway.retention.holdThread({ tenant, threadId }, undefined);
    return lifted.ok ? c.json(lifted.value) : errorResponse(c, lifted.code, lifted.message);
  });
}

/** A hold's body: none, or `{ "reason": "…" }`. */
async function readHold(c: Context): Promise<{ ok: true; value: { reason?: string } } | { ok: false; message: string }> {
  const text = await c.req.text();
  if (text.trim() === '') return { ok: true, value: {} };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, message: 'the body is not valid JSON' };
  }
  const parsed = HoldSchema.safeParse(value);
  return parsed.success ? { ok: true, value: parsed.data } : { ok: false, message: describeIssue('Hold', parsed.error) };
}
