import { z } from 'zod';
import type { Agent } from '../core/model.js';

/** What an agent id may be: it is a path segment of every door (`/agui/{agentId}`, `/a2a/{agentId}`). */
export const AGENT_ID = /^[A-Za-z0-9_-]{1,128}$/;
const AGENT_ID_RULE = 'must be 1 to 128 letters, digits, "_" or "-"';

/** A header field name is an RFC 9110 token (§5.1, §5.6.2). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** A field value may not break the message (RFC 9110 §5.5): no CR, LF or NUL. */
const HEADER_VALUE = /^[^\r\n\0]*$/;

/** A2A's `AgentSkill` (https://a2a-protocol.org/latest/specification/#agentskill), as the agent card quotes it. */
export const AgentSkillSchema = z
  .object({
    id: z.string().min(1),
    name: z.string().min(1),
    description: z.string(),
    tags: z.array(z.string()),
    examples: z.array(z.string()).optional(),
  })
  .strict();

/**
 * A stock AG-UI agent as it crosses the admin boundary (`PUT /admin/agents/{id}`) and the agents
 * file: the one source of truth for that shape. Unknown keys are refused, so a misspelt limit
 * (`timeoutSecond`) is a 400 rather than a silent default. Header values (secrets) are never
 * quoted by a validation message.
 */
export const AgentDefinitionSchema = z
  .object({
    id: z.string().regex(AGENT_ID, AGENT_ID_RULE),
    url: z
      .string()
      .url()
      .refine(isHttpUrl, 'must be an http or https URL'),
    description: z.string().min(1),
    skills: z.array(AgentSkillSchema).optional(),
    headers: z
      .record(
        z.string().regex(HEADER_NAME, 'is not an HTTP header name'),
        z.string().regex(HEADER_VALUE, 'a header value may not hold CR, LF or NUL'),
      )
      .optional(),
    takesInterjections: z.boolean().default(false),
    /** The whole run; past it the run fails `provider_timeout`. */
    timeoutSeconds: z.number().positive().finite().default(900),
    /** The longest silence of the agent; past it the run fails `provider_idle`. */
    idleTimeoutSeconds: z.number().positive().finite().default(300),
    status: z.enum(['enabled', 'disabled']).default('enabled'),
  })
  .strict();

export type AgentDefinition = z.infer<typeof AgentDefinitionSchema>;

/** The agents file named by `FUNDUQ_AGENTS_FILE`. */
export const AgentsFileSchema = z.object({ agents: z.array(AgentDefinitionSchema) }).strict();

/** The registry's record of a definition: an agent served by the `agui-http` provider. */
export function agentFrom(definition: AgentDefinition): Agent {
  const { url, headers, skills } = definition;
  return {
    id: definition.id,
    description: definition.description,
    provider: { kind: 'agui-http', url, ...(headers ? { headers } : {}) },
    takesInterjections: definition.takesInterjections,
    timeoutSeconds: definition.timeoutSeconds,
    idleTimeoutSeconds: definition.idleTimeoutSeconds,
    status: definition.status,
    ...(skills ? { skills } : {}),
  };
}

const MASK = '***';

/**
 * An agent as the admin routes show it: the definition's fields with every header value, the
 * URL's user info and its query values replaced by `***` (any of them may be a credential).
 */
export function adminView(agent: Agent) {
  const { url, headers } = agent.provider;
  return {
    id: agent.id,
    provider: agent.provider.kind,
    ...(url !== undefined ? { url: maskUrl(url) } : {}),
    description: agent.description,
    ...(agent.skills ? { skills: agent.skills } : {}),
    ...(headers ? { headers: Object.fromEntries(Object.keys(headers).map((name) => [name, MASK])) } : {}),
    takesInterjections: agent.takesInterjections,
    timeoutSeconds: agent.timeoutSeconds,
    idleTimeoutSeconds: agent.idleTimeoutSeconds,
    status: agent.status ?? 'enabled',
  };
}

/** An agent as every caller may see it (`GET /agents`): what it does and where to reach it, nothing of how. */
export function rosterEntry(agent: Agent) {
  return {
    id: agent.id,
    description: agent.description,
    skills: agent.skills ?? [],
    takesInterjections: agent.takesInterjections,
    agui: `/agui/${agent.id}`,
  };
}

export function isEnabled(agent: Agent): boolean {
  return (agent.status ?? 'enabled') === 'enabled';
}

function isHttpUrl(raw: string): boolean {
  try {
    return /^https?:$/.test(new URL(raw).protocol);
  } catch {
    // Not a URL at all: `.url()` has said so already.
    return true;
  }
}

function maskUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return MASK;
  }
  if (url.username || url.password) {
    url.username = MASK;
    url.password = '';
  }
  for (const name of new Set(url.searchParams.keys())) url.searchParams.set(name, MASK);
  return url.href;
}
