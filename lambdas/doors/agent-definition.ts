import type { Agent } from '../core/model.js';

/**
 * What the admin door needs of agent definitions, given by the runtime (which knows the provider
 * kinds): parse one (issues name the field, never quote a value), and show an agent with every
 * value that may be a credential masked.
 */
export interface AgentCatalog {
  parse(body: unknown): { ok: true; agent: Agent } | { ok: false; issues: { path: readonly PropertyKey[]; message: string }[] };
  view(agent: Agent): Record<string, unknown>;
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
