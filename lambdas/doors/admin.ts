import { Hono, type MiddlewareHandler } from 'hono';
import { timingSafeEqual } from 'hono/utils/buffer';
import type { Gateway } from '../core/gateway.js';
import { AGENT_ID, AGENT_ID_RULE } from '../core/model.js';
import type { AgentCatalog } from './agent-definition.js';
import { errorResponse } from './http-errors.js';
import { describeIssue, readJson } from './input.js';
import { adminPrincipalRoutes } from './principal-keys.js';
import { adminUsageRoutes } from './usage.js';
import { adminRetentionRoutes } from './retention.js';
import { adminProviderRoutes } from './link/admin-providers.js';
import { credentialIdOf } from './api-keys.js';
import { auditRequests, noteAudit } from './audit.js';
import { adminAuditRoutes, lostAudit } from './audit-routes.js';
import type { AuditActor, AuditEntry } from '../core/audit/record.js';

export interface AdminOptions {
  /**
   * Required as `Authorization: Bearer <token>` on every admin route. Without one the routes
   * are open: only for a gateway on one machine, whose runtime warns about it.
   */
  token?: string;
  /** The agent definitions of the runtime's provider kinds. */
  agents: AgentCatalog;
  /** Where callers reach the gateway: the `source` of exported usage events; else each request's origin. */
  publicUrl?: string;
  /** An audit record the store did not take: logged whole (`audit_write_failed`). */
  onAuditLost?: (entry: AuditEntry, error: unknown) => void;
}

/** The agent registry: create or replace, read (secrets masked), delete. */
export function adminDoor(gateway: Gateway, options: AdminOptions) {
  const door = new Hono();
  if (options.token !== undefined) door.use('*', bearer(options.token));
  // The admin is one actor: its records name the token by a digest of it (which token, after a rotation), never the token.
  const credentialId = options.token === undefined ? undefined : credentialIdOf(options.token);
  let actor: AuditActor = { kind: 'admin', principal: 'admin' };
  door.use('*', async (_c, next) => {
    if (credentialId) actor = { kind: 'admin', principal: 'admin', credentialId: await credentialId };
    await next();
  });
  door.use('*', auditRequests({ write: gateway.audit.write, actorOf: () => actor, onLost: options.onAuditLost ?? ((entry, error) => console.error(lostAudit(entry, error).message)) }));

  const { agents } = options;
  door.get('/agents', async (c) => c.json({ agents: (await gateway.listAgents()).map((agent) => agents.view(agent)) }));

  door.get('/agents/:agentId', async (c) => {
    const agent = await gateway.getAgent(c.req.param('agentId'));
    return agent ? c.json(agents.view(agent)) : errorResponse(c, 'agent_not_found', `no agent named "${c.req.param('agentId')}"`);
  });

  door.put('/agents/:agentId', async (c) => {
    const agentId = c.req.param('agentId');
    const note = noteAudit(c, { action: 'agent.changed', target: `agent:${agentId}`, tenant: null });
    if (!AGENT_ID.test(agentId)) {
      return errorResponse(c, 'invalid_input', `AgentDefinition.id: the path's agent id ${AGENT_ID_RULE}`);
    }
    const body = await readJson(c);
    if (!body.ok) return errorResponse(c, 'invalid_input', body.message);
    if (typeof body.value !== 'object' || body.value === null || Array.isArray(body.value)) {
      return errorResponse(c, 'invalid_input', 'AgentDefinition: the body must be a JSON object');
    }
    const given = (body.value as { id?: unknown }).id;
    if (given !== undefined && given !== agentId) {
      return errorResponse(c, 'invalid_input', `AgentDefinition.id: must be the agent id of the path, "${agentId}"`);
    }
    const parsed = agents.parse({ ...body.value, id: agentId });
    if (!parsed.ok) return errorResponse(c, 'invalid_input', describeIssue('AgentDefinition', parsed));
    const existing = await gateway.getAgent(agentId);
    await gateway.putAgent(parsed.agent);
    const after = agents.view(parsed.agent);
    Object.assign(note, existing ? { before: agents.view(existing), after } : { action: 'agent.registered', after });
    return c.json(after, existing ? 200 : 201);
  });

  adminProviderRoutes(door, gateway);
  adminPrincipalRoutes(door, gateway);
  adminUsageRoutes(door, gateway, (c) => (options.publicUrl ?? new URL(c.req.url).origin).replace(/\/+$/, ''));
  adminAuditRoutes(door, gateway);
  adminRetentionRoutes(door, gateway);

  door.delete('/agents/:agentId', async (c) => {
    const note = noteAudit(c, { action: 'agent.deleted', target: `agent:${c.req.param('agentId')}`, tenant: null });
    const existing = await gateway.getAgent(c.req.param('agentId'));
    if (existing) note.before = agents.view(existing);
    const deleted = await gateway.deleteAgent(c.req.param('agentId'));
    return deleted.ok ? c.body(null, 204) : errorResponse(c, deleted.code, deleted.message);
  });

  return door;
}

/** Compares in constant time, so the answer's timing says nothing about how much of a guess was right. */
function bearer(token: string): MiddlewareHandler {
  return async (c, next) => {
    const presented = /^Bearer +(\S+) *$/i.exec(c.req.header('Authorization') ?? '')?.[1];
    if (presented === undefined || !(await timingSafeEqual(token, presented))) {
      c.header('WWW-Authenticate', 'Bearer realm="funduq admin"');
      return errorResponse(c, 'unauthorized', 'the admin routes need Authorization: Bearer <admin token>');
    }
    await next();
  };
}
