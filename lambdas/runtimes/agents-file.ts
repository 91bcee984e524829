import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import type { Agent } from '../core/model.js';
import { agentFrom, definitionOf } from '../providers/definition.js';
import { AgentDefinitionSchema, PROVIDER_KINDS } from './providers.js';

/** The agents file named by `FUNDUQ_AGENTS_FILE`: definitions as `PUT /admin/agents/{id}` takes them, with their ids. */
const AgentsFileSchema = z.object({ agents: z.array(AgentDefinitionSchema) }).strict();

/** A file that cannot be read, is not JSON, or holds a definition the admin routes would refuse. */
export class AgentsFileError extends Error {
  constructor(
    readonly path: string,
    detail: string,
  ) {
    super(`the agents file ${path}: ${detail}`);
    this.name = 'AgentsFileError';
  }
}

/**
 * Reads `{ "agents": [ … ] }`, each entry checked by the same schema as `PUT /admin/agents/{id}`.
 * A message names the file and the field (`agents.1.url: …`), never a value: the file holds the
 * agents' secrets.
 */
export async function readAgentsFile(path: string): Promise<Agent[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    throw new AgentsFileError(path, `cannot be read (${typeof code === 'string' ? code : String(error)})`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new AgentsFileError(path, `is not JSON${jsonPosition(text, error)}`);
  }
  const parsed = AgentsFileSchema.safeParse(json);
  if (!parsed.success) throw new AgentsFileError(path, firstIssue(parsed.error));
  const seen = new Set<string>();
  const agents = parsed.data.agents.map((definition) => agentFrom(definition, PROVIDER_KINDS));
  agents.forEach((agent, i) => {
    if (seen.has(agent.id)) throw new AgentsFileError(path, `agents.${i}.id: "${agent.id}" is defined twice`);
    seen.add(agent.id);
  });
  return agents;
}

/**
 * The agents the store holds that a definition could not be today (one stored before a rule was
 * tightened, such as a header value HTTP cannot carry), each with the field and the rule it breaks:
 * their runs would fail (`provider_not_configured`), so `npm start` says so when it starts.
 */
export function unusableAgents(agents: readonly Agent[]): { id: string; problem: string }[] {
  return agents.flatMap((agent) => {
    const parsed = AgentDefinitionSchema.safeParse(definitionOf(agent));
    return parsed.success ? [] : [{ id: agent.id, problem: firstIssue(parsed.error) }];
  });
}

/** A schema's first refusal, naming the field (`agents.0.url: …`), never quoting a value. */
function firstIssue(error: z.ZodError): string {
  const issue = error.issues[0];
  return `${issue.path.length > 0 ? `${issue.path.join('.')}: ` : ''}${issue.message}`;
}

/**
 * Where the JSON broke, as a line and column. The parser's message only when it quotes nothing:
 * V8 may quote the text around the error, and that text may be a header's secret.
 */
function jsonPosition(text: string, error: unknown): string {
  const message = error instanceof Error ? error.message : '';
  const match = /at position (\d+)/.exec(message);
  if (!match) return message.includes('"') || message === '' ? '' : `: ${message}`;
  const before = text.slice(0, Number(match[1]));
  const line = before.split('\n').length;
  const column = before.length - before.lastIndexOf('\n');
  return ` (line ${line}, column ${column})`;
}
