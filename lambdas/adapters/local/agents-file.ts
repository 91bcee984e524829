import { readFile } from 'node:fs/promises';
import type { Agent } from '../../core/model.js';
import { AgentsFileSchema, agentFrom } from '../../doors/agent-definition.js';

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
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue.path.length > 0 ? `${issue.path.join('.')}: ` : '';
    throw new AgentsFileError(path, `${field}${issue.message}`);
  }
  const seen = new Set<string>();
  parsed.data.agents.forEach((definition, i) => {
    if (seen.has(definition.id)) throw new AgentsFileError(path, `agents.${i}.id: "${definition.id}" is defined twice`);
    seen.add(definition.id);
  });
  return parsed.data.agents.map(agentFrom);
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
