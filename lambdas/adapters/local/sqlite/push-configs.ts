import type Database from 'better-sqlite3';
import type { PushConfig } from '../../../core/model.js';
import type { PushConfigs } from '../../../core/ports.js';
import type { SqliteHandle } from './handle.js';

/** Push configs: a row per task and config id. */
export class SqlitePushConfigs implements PushConfigs {
  private readonly statements: ReturnType<typeof prepare>;

  constructor(handle: SqliteHandle) {
    this.statements = prepare(handle.db);
  }

  async put(config: PushConfig): Promise<void> {
    this.statements.putPushConfig.run(config.taskId, config.configId, JSON.stringify(config));
  }

  async get(taskId: string, configId: string): Promise<PushConfig | undefined> {
    const row = this.statements.getPushConfig.get(taskId, configId) as { body: string } | undefined;
    return row && JSON.parse(row.body);
  }

  async list(taskId: string): Promise<PushConfig[]> {
    return (this.statements.listPushConfigs.all(taskId) as { body: string }[]).map((row) => JSON.parse(row.body));
  }

  async delete(taskId: string, configId: string): Promise<boolean> {
    return this.statements.deletePushConfig.run(taskId, configId).changes === 1;
  }

  async recordFailure(taskId: string, configId: string, deadLetter: NonNullable<PushConfig['deadLetter']>): Promise<void> {
    const row = this.statements.getPushConfig.get(taskId, configId) as { body: string } | undefined;
    // A config deleted while its notification was being retried is not brought back.
    if (!row) return;
    this.statements.putPushConfig.run(taskId, configId, JSON.stringify({ ...JSON.parse(row.body), deadLetter }));
  }
}

function prepare(db: Database.Database) {
  return {
    putPushConfig: db.prepare('INSERT OR REPLACE INTO push_configs (task_id, config_id, body) VALUES (?, ?, ?)'),
    getPushConfig: db.prepare('SELECT body FROM push_configs WHERE task_id = ? AND config_id = ?'),
    listPushConfigs: db.prepare('SELECT body FROM push_configs WHERE task_id = ? ORDER BY config_id'),
    deletePushConfig: db.prepare('DELETE FROM push_configs WHERE task_id = ? AND config_id = ?'),
  };
}
