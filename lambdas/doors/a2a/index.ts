import { A2A_VERSION_HEADER, AgentCard as AgentCardJson, type AgentCard } from '@a2a-js/sdk';
import { Hono, type Context } from 'hono';
import type { Gateway } from '../../core/gateway.js';
import type { Agent, Principal } from '../../core/model.js';
import { errorResponse } from '../http-errors.js';
import { JWKS_PATH } from '../jwks.js';
import type { SseOptions } from '../sse.js';
import { agentCard, legacyAgentCard } from './card.js';
import { jsonRpc } from './jsonrpc.js';
import { legacyRestRoutes } from './legacy-rest.js';
import { restRoutes } from './rest.js';
import { LEGACY_VERSION } from './wire.js';
import type { DoorTracer } from '../tracing.js';

type Env = { Variables: { principal: Principal } };

export interface A2aDoorOptions {
  /** The origin (and path prefix) the gateway is reached at, for the card's URLs; else each request's own origin. */
  publicUrl?: string;
  /** The version the agent cards state. */
  version?: string;
  /** Errors no A2A error describes (the caller gets INTERNAL_ERROR). */
  onError?: (error: unknown) => void;
  /** Push notifications are signed, with the keys at the gateway's `JWKS_PATH`: the cards say so. */
  signsPushes?: boolean;
  /** Each A2A method a span under its request's. */
  tracing?: DoorTracer;
}

/**
 * The A2A door (`/a2a/{agentId}/`): the agent card, JSON-RPC at the agent's URL and HTTP+JSON
 * under `rest` (A2A 0.3's under `rest/v1`), over the core's A2A use cases (`gateway.tasks`).
 */
export function a2aDoor(gateway: Gateway, sse: SseOptions, options: A2aDoorOptions = {}) {
  const { tasks } = gateway;
  const door = new Hono<Env>();
  const version = options.version ?? '0.1.0';

  const cardFor = (c: Context<Env>, agent: Agent): AgentCard => {
    const origin = (options.publicUrl ?? new URL(c.req.url).origin).replace(/\/+$/, '');
    return agentCard(agent, {
      endpoint: `${origin}/a2a/${encodeURIComponent(agent.id)}/`,
      pushNotifications: tasks.pushes,
      ...(tasks.pushes && options.signsPushes ? { jwksUrl: `${origin}${JWKS_PATH}` } : {}),
      version,
    });
  };
  const agentOf = (c: Context<Env>) => gateway.getAgent(c.req.param('agentId') ?? '');

  door.get('/:agentId/.well-known/agent-card.json', async (c) => {
    const agent = await agentOf(c);
    if (!agent) return errorResponse(c, 'agent_not_found', `no agent named "${c.req.param('agentId')}"`);
    const card = cardFor(c, agent);
    c.header('Vary', A2A_VERSION_HEADER);
    c.header('Cache-Control', 'no-cache');
    const requested = c.req.header(A2A_VERSION_HEADER) || LEGACY_VERSION;
    return c.json(requested === LEGACY_VERSION ? await legacyAgentCard(card) : AgentCardJson.toJSON(card));
  });

  // A client given an agent's URL without its "/" resolves the card to here, which names no agent.
  door.get('/.well-known/agent-card.json', (c) =>
    errorResponse(
      c,
      'not_found',
      'each agent has its own card, at /a2a/{agentId}/.well-known/agent-card.json: give the client the agent\'s URL ending with "/" (…/a2a/{agentId}/), or the card\'s own URL',
    ),
  );

  const rpc = async (c: Context<Env>) => {
    const agent = await agentOf(c);
    if (!agent) return errorResponse(c, 'agent_not_found', `no agent named "${c.req.param('agentId')}"`);
    return jsonRpc(c, tasks, agent, cardFor(c, agent), sse, options.onError, options.tracing);
  };
  // The card names the endpoint with its "/"; the URL without it is the same endpoint.
  door.post('/:agentId/', rpc);
  door.post('/:agentId', rpc);

  const rest = { tasks, agentOf, cardFor, sse, onError: options.onError, tracing: options.tracing };
  door.route('/:agentId/rest/v1', legacyRestRoutes(rest));
  door.route('/:agentId/rest', restRoutes(rest));
  return door;
}
