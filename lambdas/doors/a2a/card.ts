import type { AgentCard, AgentExtension, AgentSkill } from '@a2a-js/sdk';
import type { A2ARequestHandler } from '@a2a-js/sdk/server';
import { ServerCallContext } from '@a2a-js/sdk/server';
import { LegacyRestTransportHandler } from '@a2a-js/sdk/compat/v0_3/server';
import { ADDRESSED_RUN_ID_KEY, INTERJECTION_EXTENSION } from '../../core/interjection.js';
import type { Agent } from '../../core/model.js';


export interface CardOptions {
  /** Absolute URL of the agent's A2A endpoint, `…/a2a/{agentId}`. */
  endpoint: string;
  pushNotifications: boolean;
  version: string;
}

/**
 * An agent's A2A 1.0 card: JSON-RPC at the endpoint and HTTP+JSON under `/rest`, each declared
 * for 1.0; JSON-RPC also for 0.3, which the SDK's compat layer serves at the same URL.
 */
export function agentCard(agent: Agent, options: CardOptions): AgentCard {
  const extensions: AgentExtension[] = agent.takesInterjections
    ? [
        {
          uri: INTERJECTION_EXTENSION,
          description: `Request metadata "${ADDRESSED_RUN_ID_KEY}" names the context's running run; the message is dispatched at once beside it, or runs next if that run already settled.`,
          required: false,
          params: undefined,
        },
      ]
    : [];
  return {
    name: agent.id,
    description: agent.description,
    supportedInterfaces: [
      { url: options.endpoint, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' },
      { url: `${options.endpoint}/rest`, protocolBinding: 'HTTP+JSON', tenant: '', protocolVersion: '1.0' },
      { url: options.endpoint, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '0.3' },
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
