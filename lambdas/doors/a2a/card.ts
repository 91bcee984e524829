import type { AgentCard, AgentExtension, AgentSkill } from '@a2a-js/sdk';
import type { A2ARequestHandler } from '@a2a-js/sdk/server';
import { ServerCallContext } from '@a2a-js/sdk/server';
import { LegacyRestTransportHandler } from '@a2a-js/sdk/compat/v0_3/server';
import { PUSH_JWT_HEADER, PUSH_SIGNING_EXTENSION } from '../../core/a2a/vocabulary.js';
import { ADDRESSED_RUN_ID_KEY, INTERJECTION_EXTENSION } from '../../core/interjection.js';
import type { Agent } from '../../core/model.js';


export interface CardOptions {
  /**
   * Absolute URL of the agent's A2A endpoint, `…/a2a/{agentId}/`. It ends with "/": a client finds
   * the card by resolving `.well-known/agent-card.json` against the URL it is given (@a2a-js/sdk's
   * `createFromUrl`, RFC 3986 §5.2), which without the "/" would drop the agent's id.
   */
  endpoint: string;
  pushNotifications: boolean;
  /** Where the keys that sign push notifications are published; absent, pushes are not signed. */
  jwksUrl?: string;
  version: string;
}

/**
 * An agent's A2A 1.0 card: JSON-RPC at the endpoint and HTTP+JSON under `rest`, each declared for
 * 1.0 and for 0.3 (served through the SDK's compat layer: JSON-RPC at the same URL, and 0.3's own
 * `/v1/…` routes under `rest`). A 0.3 reader's card names the 0.3 ones: JSON-RPC as its `url`,
 * HTTP+JSON in `additionalInterfaces`.
 */
export function agentCard(agent: Agent, options: CardOptions): AgentCard {
  const extensions: AgentExtension[] = [];
  if (agent.takesInterjections) {
    extensions.push({
      uri: INTERJECTION_EXTENSION,
      description: `Request metadata "${ADDRESSED_RUN_ID_KEY}" names the context's running run; the message is dispatched at once beside it, or runs next if that run already settled.`,
      required: false,
      params: undefined,
    });
  }
  if (options.jwksUrl) {
    extensions.push({
      uri: PUSH_SIGNING_EXTENSION,
      description: `Every push notification carries a JWT signed by the gateway (ES256) in ${PUSH_JWT_HEADER}, and as Authorization: Bearer when its config names no authentication: iat, exp, aud (the push URL), task_id, request_body_sha256 (hex SHA-256 of the body as sent), its kid a key of the JWKS at params.jwksUrl.`,
      required: false,
      params: { jwksUrl: options.jwksUrl, alg: 'ES256', header: PUSH_JWT_HEADER },
    });
  }
  return {
    name: agent.id,
    description: agent.description,
    supportedInterfaces: [
      { url: options.endpoint, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' },
      { url: `${options.endpoint}rest`, protocolBinding: 'HTTP+JSON', tenant: '', protocolVersion: '1.0' },
      { url: options.endpoint, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '0.3' },
      { url: `${options.endpoint}rest`, protocolBinding: 'HTTP+JSON', tenant: '', protocolVersion: '0.3' },
    ],
    provider: undefined,
    version: options.version,
    capabilities: {
      streaming: true,
      pushNotifications: options.pushNotifications,
      extensions,
      extendedAgentCard: false,
    },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain', 'image/*', 'audio/*', 'video/*', 'application/pdf'],
    defaultOutputModes: ['text/plain'],
    skills: skillsOf(agent),
    signatures: [],
  };
}

/** A card needs at least one skill; an agent registered with none offers its description as one. */
function skillsOf(agent: Agent): AgentSkill[] {
  const skills = agent.skills?.length ? agent.skills : [{ id: agent.id, name: agent.id, description: agent.description, tags: [] }];
  return skills.map((skill) => ({
    id: skill.id,
    name: skill.name,
    description: skill.description,
    tags: skill.tags,
    examples: 'examples' in skill && skill.examples ? skill.examples : [],
    inputModes: [],
    outputModes: [],
    securityRequirements: [],
  }));
}

/**
 * The card for an A2A 0.3 reader: the SDK's own 0.3 translation (reached through its compat REST
 * handler, the one public door to it), with the 1.0 interfaces kept alongside as the SDK's card
 * router does, so that a 1.0 client reading it still finds them.
 */
export async function legacyAgentCard(card: AgentCard): Promise<Record<string, unknown>> {
  const handler = { getAuthenticatedExtendedAgentCard: async () => card } as unknown as A2ARequestHandler;
  const legacy = (await new LegacyRestTransportHandler(handler).getAuthenticatedExtendedAgentCard(new ServerCallContext())) as unknown as Record<
    string,
    unknown
  >;
  return { ...legacy, supportedInterfaces: card.supportedInterfaces };
}
