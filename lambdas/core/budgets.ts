import { ok, refuse, type Result } from './errors.js';
import type { Budget, Spend, Tenant } from './model.js';
import type { Clock, RunStore } from './ports.js';
import type { Recent } from './recent-agents.js';
import { totalTokens, type UsageRecord } from './usage.js';

export interface BudgetDeps {
  store: RunStore;
  clock: Pick<Clock, 'now'>;
  /** The budget every tenant without one of its own has; absent, such tenants have none. */
  defaultBudget?: Budget;
  /** Tenants read moments ago: whether one has a budget is read at most once every couple of seconds. */
  recentTenants: Recent<Tenant | null>;
}

/** The period a time falls in: `2026-12` for a month, `2026-12-01` for a day (UTC). */
export function periodOf(ms: number, period: Budget['period']): string {
  const iso = new Date(ms).toISOString();
  return period === 'month' ? iso.slice(0, 7) : iso.slice(0, 10);
}

/** When the period a time falls in ends (UTC): the first instant of the next. */
export function periodEnd(ms: number, period: Budget['period']): number {
  const at = new Date(ms);
  return period === 'month'
    ? Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1)
    : Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate() + 1);
}

/** What a tenant has spent in the period of `ms`: its stored spend if it is of that period, else nothing yet. */
export function spendIn(tenant: Tenant | undefined, budget: Budget, ms: number): Spend {
  const period = periodOf(ms, budget.period);
  return tenant?.spend?.period === period ? tenant.spend : { period, tokens: 0, cost: 0 };
}

export function exhausted(spend: Spend, budget: Budget): boolean {
  return (budget.tokens !== undefined && spend.tokens >= budget.tokens) || (budget.cost !== undefined && spend.cost >= budget.cost.amount);
}

/**
 * A tenant's budget before a run of it is written. The spend is charged when runs end, so the
 * check needs no write of its own: concurrent starts overshoot the budget by at most the runs
 * already in flight. Refused, it says when the period ends (UTC). A tenant with no budget of its
 * own and no default costs no read but once every couple of seconds.
 */
export async function admitBudget(deps: BudgetDeps, tenantId: string): Promise<Result<void>> {
  const known = deps.recentTenants.recent(tenantId);
  if (known === null && !deps.defaultBudget) return ok(undefined);
  const tenant = (await deps.store.tenants.get(tenantId)) ?? null;
  deps.recentTenants.keep(tenantId, tenant);
  const budget = tenant?.budget ?? deps.defaultBudget;
  if (!budget) return ok(undefined);
  const now = deps.clock.now();
  const spend = spendIn(tenant ?? undefined, budget, now);
  if (!exhausted(spend, budget)) return ok(undefined);
  const retryAfter = Math.max(1, Math.ceil((periodEnd(now, budget.period) - now) / 1000));
  return refuse('tenant_budget_exhausted', `tenant "${tenantId}" has spent its budget for ${spend.period}${describe(spend, budget)}`, retryAfter);
}

/**
 * Charges a settled run's usage to its tenant's budget, once (the caller wrote its usage record
 * just now), in the period the run ended; a run that takes the spend past the budget is recorded.
 */
export async function charge(deps: BudgetDeps, record: UsageRecord): Promise<void> {
  const known = deps.recentTenants.recent(record.tenant);
  const tenant = known === undefined ? ((await deps.store.tenants.get(record.tenant)) ?? null) : known;
  deps.recentTenants.keep(record.tenant, tenant);
  const budget = tenant?.budget ?? deps.defaultBudget;
  if (!budget) return;
  const tokens = totalTokens(record.tokens);
  const cost = record.cost && budget.cost && record.cost.currency === budget.cost.currency ? record.cost.amount : 0;
  if (tokens === 0 && cost === 0) return;
  const period = periodOf(Date.parse(record.endedAt), budget.period);
  const after = await deps.store.tenants.charge(record.tenant, { period, tokens, cost });
  if (!after) return;
  const before = { ...after, tokens: after.tokens - tokens, cost: after.cost - cost };
  if (!exhausted(before, budget) && exhausted(after, budget)) {
    await deps.store.tenants.markBudgetCrossed(record.tenant, period, record.runId, record.endedAt);
  }
}

function describe(spend: Spend, budget: Budget): string {
  const parts: string[] = [];
  if (budget.tokens !== undefined) parts.push(`${spend.tokens} of ${budget.tokens} tokens`);
  if (budget.cost !== undefined) parts.push(`${spend.cost} of ${budget.cost.amount} ${budget.cost.currency}`);
  return parts.length > 0 ? ` (${parts.join(', ')})` : '';
}
