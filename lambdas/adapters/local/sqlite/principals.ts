import type Database from 'better-sqlite3';
import type { PrincipalKeys } from '../../../core/ports.js';
import type { SqliteHandle } from './handle.js';

/** Principals' keys: a row per principal of a tenant, the keys as a JSON array. */
export class SqlitePrincipals implements PrincipalKeys {
  private readonly statements: ReturnType<typeof prepare>;

  constructor(private readonly handle: SqliteHandle) {
    this.statements = prepare(handle.db);
  }

  async get(tenant: string, principal: string): Promise<string[] | undefined> {
    const row = this.statements.get.get(tenant, principal) as { keys: string } | undefined;
    return row && (JSON.parse(row.keys) as string[]);
  }

  async put(tenant: string, principal: string, publicKeys: readonly string[]): Promise<boolean> {
    return this.handle.db.transaction(() => {
      const existed = this.statements.get.get(tenant, principal) !== undefined;
      this.statements.put.run(tenant, principal, JSON.stringify(publicKeys));
      return !existed;
    })();
  }

  async delete(tenant: string, principal: string): Promise<boolean> {
    return this.statements.delete.run(tenant, principal).changes === 1;
  }
}

function prepare(db: Database.Database) {
  return {
    get: db.prepare('SELECT keys FROM principals WHERE tenant = ? AND principal = ?'),
    put: db.prepare('INSERT INTO principals (tenant, principal, keys) VALUES (?, ?, ?) ON CONFLICT (tenant, principal) DO UPDATE SET keys = excluded.keys'),
    delete: db.prepare('DELETE FROM principals WHERE tenant = ? AND principal = ?'),
  };
}
