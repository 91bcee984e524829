import { Hono, type MiddlewareHandler } from 'hono';
import { timingSafeEqual } from 'hono/utils/buffer';
import type { Gateway } from '../core/gateway.js';
import { AGENT_ID, AGENT_ID_RULE } from '../core/model.js';
import type { AgentCatalog } from './agent-definition.js';
import { errorResponse } from './http-errors.js';
import { describeIssue, readJson } from './input.js';
import { adminPrincipalRoutes } from './principal-keys.js';
import { adminUsageRoutes } from './usage.js';
import { adminProviderRoutes } from './link/admin-providers.js';

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
}

/** The agent registry: create or replace, read (secrets masked), delete. */
export function adminDoor(gateway: Gateway, options: AdminOptions) {
  const door = new Hono();
  if (options.token !== undefined) door.use('*', bearer(options.token));

  const { agents } = options;
  door.get('/agents', async (c) => c.json({ agents: (await gateway.listAgents()).map((agent) => agents.view(agent)) }));

  door.get('/agents/:agentId', async (c) => {
    const agent = await gateway.getAgent(c.req.param('agentId'));
    return agent ? c.json(agents.view(agent)) : errorResponse(c, 'agent_not_found', `no agent named "${c.req.param('agentId')}"`);
  });

  door.put('/agents/:agentId', async (c) => {
    const agentId = c.req.param('agentId');
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
    const existed = (await gateway.getAgent(agentId)) !== undefined;
    await gateway.putAgent(parsed.agent);
    return c.json(agents.view(parsed.agent), existed ? 200 : 201);
  });

  adminProviderRoutes(door, gateway);
  adminPrincipalRoutes(door, gateway);
  adminUsageRoutes(door, gateway, (c) => (options.publicUrl ?? new URL(c.req.url).origin).replace(/\/+$/, ''));

  door.delete('/agents/:agentId', async (c) => {
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
