import type Database from 'better-sqlite3';
import type { Agent } from '../../../core/model.js';
import type { AgentRegistry } from '../../../core/ports.js';
import type { SqliteHandle } from './handle.js';

/** Agent definitions: a row each, as the admin wrote it. */
export class SqliteAgents implements AgentRegistry {
  private readonly statements: ReturnType<typeof prepare>;

  constructor(handle: SqliteHandle) {
    this.statements = prepare(handle.db);
  }

  async put(agent: Agent): Promise<void> {
    this.statements.putAgent.run(agent.id, JSON.stringify(agent));
  }

  async get(agentId: string): Promise<Agent | undefined> {
    const row = this.statements.getAgent.get(agentId) as { body: string } | undefined;
    return row && JSON.parse(row.body);
  }

  async list(): Promise<Agent[]> {
    return (this.statements.listAgents.all() as { body: string }[]).map((row) => JSON.parse(row.body));
  }

  async delete(agentId: string): Promise<void> {
    this.statements.deleteAgent.run(agentId);
  }
}

function prepare(db: Database.Database) {
  return {
    putAgent: db.prepare('INSERT OR REPLACE INTO agents (agent_id, body) VALUES (?, ?)'),
    getAgent: db.prepare('SELECT body FROM agents WHERE agent_id = ?'),
    listAgents: db.prepare('SELECT body FROM agents ORDER BY agent_id'),
    deleteAgent: db.prepare('DELETE FROM agents WHERE agent_id = ?'),
  };
}
