import type Database from 'better-sqlite3';
import type { LinkProvider } from '../../../core/model.js';
import type { ProviderRegistry } from '../../../core/ports.js';
import { registrationOf } from '../../../core/record/rules.js';
import type { SqliteHandle } from './handle.js';

type ProviderRow = { body: string; places: number };

/** Link providers: a row each, the registration as its body and the places its runs hold in a column of their own (the record's). */
export class SqliteProviders implements ProviderRegistry {
  private readonly statements: ReturnType<typeof prepare>;

  constructor(private readonly handle: SqliteHandle) {
    this.statements = prepare(handle.db);
  }

  async put(provider: LinkProvider): Promise<boolean> {
    return this.handle.db.transaction(() => {
      const row = this.statements.getProvider.get(provider.providerId) as ProviderRow | undefined;
      const existing = row && (JSON.parse(row.body) as LinkProvider);
      this.statements.putProvider.run({ id: provider.providerId, body: JSON.stringify(registrationOf(existing, provider)) });
      return existing === undefined;
    })();
  }

  async get(providerId: string): Promise<(LinkProvider & { places: number }) | undefined> {
    const row = this.statements.getProvider.get(providerId) as ProviderRow | undefined;
    return row && providerOf(row);
  }

  async list(): Promise<(LinkProvider & { places: number })[]> {
    return (this.statements.listProviders.all() as ProviderRow[]).map(providerOf);
  }

  async delete(providerId: string): Promise<boolean> {
    return this.statements.deleteProvider.run(providerId).changes === 1;
  }

  async takePlace(providerId: string, limit: number): Promise<boolean> {
    return this.statements.takeProviderPlace.run(providerId, limit).changes === 1;
  }

  async releasePlace(providerId: string): Promise<void> {
    this.statements.releaseProviderPlace.run(providerId);
  }

  async resetPlaces(): Promise<void> {
    this.statements.resetProviderPlaces.run();
  }
}

function prepare(db: Database.Database) {
  return {
    // The places column is left out: a new registration keeps what the provider's runs hold.
    putProvider: db.prepare('INSERT INTO providers (provider_id, body) VALUES (@id, @body) ON CONFLICT (provider_id) DO UPDATE SET body = @body'),
    getProvider: db.prepare('SELECT body, places FROM providers WHERE provider_id = ?'),
    listProviders: db.prepare('SELECT body, places FROM providers ORDER BY provider_id'),
    deleteProvider: db.prepare('DELETE FROM providers WHERE provider_id = ?'),
    takeProviderPlace: db.prepare('UPDATE providers SET places = places + 1 WHERE provider_id = ? AND places < ?'),
    releaseProviderPlace: db.prepare('UPDATE providers SET places = places - 1 WHERE provider_id = ? AND places > 0'),
    resetProviderPlaces: db.prepare('UPDATE providers SET places = 0 WHERE places > 0'),
  };
}

function providerOf(row: ProviderRow): LinkProvider & { places: number } {
  return { ...(JSON.parse(row.body) as LinkProvider), places: row.places };
}
