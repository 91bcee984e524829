import type Database from 'better-sqlite3';
import type { Budget, Spend, Tenant } from '../../../core/model.js';
import type { TenantAdmission, TenantCounters, TenantLimits } from '../../../core/ports.js';
import { admission, charged, crossed, type TenantCounts } from '../../../core/record/rules.js';
import { idColumn, idOf, type SqliteHandle } from './handle.js';

type TenantRow = { rate_window: number | null; window_runs: number | null; places: number | null };
type SpendRow = { budget: string | null; spend_period: string | null; spend_tokens: number | null; spend_cost: number | null; crossed_at: string | null; crossed_by: string | null };

/**
 * Tenants: a row each, with its limits' counters, its budget and its spend in columns; who holds
 * one of its places is in `places`. Each write is a read-check-write in one transaction, by the
 * record's rules (`core/record/rules.ts`).
 */
export class SqliteTenants implements TenantCounters {
  private readonly statements: ReturnType<typeof prepare>;

  constructor(private readonly handle: SqliteHandle) {
    this.statements = prepare(handle.db);
  }

  async admit(tenant: string, holder: string, limits: TenantLimits): Promise<TenantAdmission> {
    return this.handle.db.transaction(() => {
      const { places } = this.handle;
      const holds = limits.places !== undefined && places.holds.get(`n:${tenant}`, holder) !== undefined;
      const row = this.statements.getTenant.get(tenant) as TenantRow | undefined;
      const decided = admission(row && countsOf(row), holds, limits);
      if (decided.counts) {
        const { window, windowRuns, places: held } = decided.counts;
        this.statements.putTenant.run({ tenant, window: window ?? null, runs: windowRuns ?? null, places: held ?? null });
        if (limits.places !== undefined) places.hold.run(`n:${tenant}`, holder);
      }
      return decided.admission;
    })();
  }

  async releasePlace(tenant: string, holder: string): Promise<void> {
    this.handle.db.transaction(() => {
      if (this.handle.places.unhold.run(`n:${tenant}`, holder).changes === 1) this.statements.releaseTenantPlace.run(tenant);
    })();
  }

  async setPlaces(places: ReadonlyMap<string, readonly string[]>): Promise<void> {
    const { hold, unholdTenants } = this.handle.places;
    this.handle.db.transaction(() => {
      this.statements.clearTenantPlaces.run();
      unholdTenants.run();
      for (const [tenant, holders] of places) {
        this.statements.setTenantPlaces.run({ tenant, places: holders.length });
        for (const holder of holders) hold.run(`n:${tenant}`, holder);
      }
    })();
  }

  async get(tenant: string): Promise<Tenant | undefined> {
    const row = this.statements.getSpend.get(tenant) as SpendRow | undefined;
    if (!row || (row.budget === null && row.spend_period === null)) return undefined;
    const found: Tenant = { tenant };
    if (row.budget !== null) found.budget = JSON.parse(row.budget) as Budget;
    if (row.spend_period !== null) found.spend = spendOf(row);
    return found;
  }

  async putBudget(tenant: string, budget: Budget | undefined, spend: Spend): Promise<void> {
    this.statements.putBudget.run({ tenant, budget: budget ? JSON.stringify(budget) : null, ...spendColumns(spend) });
  }

  async charge(tenant: string, charge: Pick<Spend, 'period' | 'tokens' | 'cost'>): Promise<Spend | undefined> {
    return this.handle.db.transaction(() => {
      const spend = charged(this.spend(tenant), charge);
      if (spend) this.statements.putSpend.run({ tenant, ...spendColumns(spend) });
      return spend;
    })();
  }

  async markBudgetCrossed(tenant: string, period: string, runId: string, at: string): Promise<void> {
    this.handle.db.transaction(() => {
      const spend = crossed(this.spend(tenant), period, runId, at);
      if (spend) this.statements.putSpend.run({ tenant, ...spendColumns(spend) });
    })();
  }

  private spend(tenant: string): Spend | undefined {
    const row = this.statements.getSpend.get(tenant) as SpendRow | undefined;
    return !row || row.spend_period === null ? undefined : spendOf(row);
  }
}

function prepare(db: Database.Database) {
  return {
    getTenant: db.prepare('SELECT rate_window, window_runs, places FROM tenants WHERE tenant = ?'),
    putTenant: db.prepare(
      'INSERT INTO tenants (tenant, rate_window, window_runs, places) VALUES (@tenant, @window, @runs, @places) ON CONFLICT (tenant) DO UPDATE SET rate_window = @window, window_runs = @runs, places = @places',
    ),
    getSpend: db.prepare('SELECT budget, spend_period, spend_tokens, spend_cost, crossed_at, crossed_by FROM tenants WHERE tenant = ?'),
    putBudget: db.prepare(
      `INSERT INTO tenants (tenant, budget, spend_period, spend_tokens, spend_cost, crossed_at, crossed_by)
       VALUES (@tenant, @budget, @period, @tokens, @cost, @crossedAt, @crossedBy)
       ON CONFLICT (tenant) DO UPDATE SET budget = @budget, spend_period = @period, spend_tokens = @tokens, spend_cost = @cost, crossed_at = @crossedAt, crossed_by = @crossedBy`,
    ),
    putSpend: db.prepare(
      `INSERT INTO tenants (tenant, spend_period, spend_tokens, spend_cost, crossed_at, crossed_by) VALUES (@tenant, @period, @tokens, @cost, @crossedAt, @crossedBy)
       ON CONFLICT (tenant) DO UPDATE SET spend_period = @period, spend_tokens = @tokens, spend_cost = @cost, crossed_at = @crossedAt, crossed_by = @crossedBy`,
    ),
    releaseTenantPlace: db.prepare('UPDATE tenants SET places = places - 1 WHERE tenant = ? AND places > 0'),
    clearTenantPlaces: db.prepare('UPDATE tenants SET places = 0'),
    setTenantPlaces: db.prepare('INSERT INTO tenants (tenant, places) VALUES (@tenant, @places) ON CONFLICT (tenant) DO UPDATE SET places = @places'),
  };
}

function countsOf(row: TenantRow): TenantCounts {
  const counts: TenantCounts = {};
  if (row.rate_window !== null) counts.window = row.rate_window;
  if (row.window_runs !== null) counts.windowRuns = row.window_runs;
  if (row.places !== null) counts.places = row.places;
  return counts;
}

function spendOf(row: SpendRow): Spend {
  const spend: Spend = { period: row.spend_period ?? '', tokens: row.spend_tokens ?? 0, cost: row.spend_cost ?? 0 };
  if (row.crossed_at !== null) spend.crossedAt = row.crossed_at;
  if (row.crossed_by !== null) spend.crossedByRunId = idOf(row.crossed_by);
  return spend;
}

function spendColumns(spend: Spend) {
  return {
    period: spend.period,
    tokens: spend.tokens,
    cost: spend.cost,
    crossedAt: spend.crossedAt ?? null,
    crossedBy: spend.crossedByRunId === undefined ? null : idColumn(spend.crossedByRunId),
  };
}
