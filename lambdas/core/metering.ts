import type { TokenUsage } from '@ag-ui/core';
import { exhausted, periodEnd, periodOf, spendIn } from './budgets.js';
import type { Core } from './deps.js';
import { ok, refuse, type Result } from './errors.js';
import type { Budget, Spend, Tenant } from './model.js';
import { usageKept } from './retention/expiry.js';
import { sumUsage, totalTokens, type UsageRecord } from './usage.js';

export type UsageGroup = 'agent' | 'day' | 'model';

export interface UsageRange {
  /** One tenant's usage; absent (admin only), every tenant's. */
  tenant?: string;
  /** ISO times: records that ended in [from, to). */
  from: string;
  to: string;
  agentId?: string;
}

/** Usage summed: runs, their log, tokens per provider and model, cost per currency. */
export interface UsageTotals {
  runs: number;
  events: number;
  bytes: number;
  tokens?: TokenUsage[];
  cost?: { amount: number; currency: string }[];
}

export interface UsageReport extends UsageRange {
  totals: UsageTotals;
  /** By the groups asked for; a run of two models counts in both model groups, with its tokens of each (cost is a run's, not a model's). */
  groups?: (Partial<Record<UsageGroup, string>> & UsageTotals)[];
  budget?: BudgetView;
}

export interface BudgetView extends Budget {
  period: Budget['period'];
  /** The period the budget is at now (`2026-12`), its spend, and what is left. */
  current: string;
  spent: { tokens: number; cost?: number };
  left: { tokens?: number; cost?: number };
  exhausted: boolean;
  /** When the current period's spend crossed the budget, by which run's end. */
  crossedAt?: string;
  crossedByRunId?: string;
  resetsAt: string;
}

/** Listing pages from the store are this big; a report reads all the pages of its range. */
const PAGE = 500;
/** The widest range a report or an export reads, in days: a year and a day. */
const MOST_DAYS = 366;

/** A caller's range, checked: ISO times, from before to, at most a year apart. */
export function usageRange(given: { from?: string; to?: string }, now: number): Result<{ from: string; to: string }> {
  const at = new Date(now);
  const from = given.from ?? new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1)).toISOString();
  const to = given.to ?? new Date(periodEnd(now, 'month')).toISOString();
  const [fromMs, toMs] = [Date.parse(from), Date.parse(to)];
  if (Number.isNaN(fromMs)) return refuse('invalid_input', 'from must be an ISO 8601 time');
  if (Number.isNaN(toMs)) return refuse('invalid_input', 'to must be an ISO 8601 time');
  if (toMs <= fromMs) return refuse('invalid_input', 'to must be after from');
  if (toMs - fromMs > MOST_DAYS * 86_400_000) return refuse('invalid_input', `from and to may be at most ${MOST_DAYS} days apart`);
  return ok({ from: new Date(fromMs).toISOString(), to: new Date(toMs).toISOString() });
}

/** Every usage record of a range, page by page. */
export async function* usageRecords(core: Core, range: UsageRange): AsyncGenerator<UsageRecord> {
  let cursor: string | undefined;
  const kept = usageKept(core);
  do {
    const page = await core.store.usage.list({ tenant: range.tenant, from: range.from, to: range.to, limit: PAGE, cursor });
    for (const record of page.records) if ((range.agentId === undefined || record.agentId === range.agentId) && (await kept(record))) yield record;
    cursor = page.cursor;
  } while (cursor !== undefined);
}

/** A page of a tenant's usage records, oldest first, with an opaque cursor to the next. */
export async function usagePage(core: Core, range: UsageRange & { limit: number; cursor?: string }): Promise<Result<{ records: UsageRecord[]; cursor?: string }>> {
  const records: UsageRecord[] = [];
  let cursor = range.cursor;
  const kept = usageKept(core);
  try {
    // A page filtered by agent may take more than one page of the store.
    do {
      const page = await core.store.usage.list({ tenant: range.tenant, from: range.from, to: range.to, limit: range.limit - records.length, cursor });
      for (const record of page.records) if ((range.agentId === undefined || record.agentId === range.agentId) && (await kept(record))) records.push(record);
      cursor = page.cursor;
    } while (cursor !== undefined && records.length < range.limit);
  } catch (error) {
    if (error instanceof RangeError) return refuse('invalid_input', 'cursor is not a cursor of this listing');
    throw error;
  }
  return ok({ records, ...(cursor !== undefined ? { cursor } : {}) });
}

/** A range's usage summed, and by the groups asked for; with a tenant, its budget as it stands. */
export async function usageReport(core: Core, range: UsageRange, groupBy: readonly UsageGroup[]): Promise<UsageReport> {
  const all: UsageRecord[] = [];
  for await (const record of usageRecords(core, range)) all.push(record);
  const report: UsageReport = { ...range, totals: totalsOf(all) };
  if (groupBy.length > 0) report.groups = groupsOf(all, groupBy);
  if (range.tenant !== undefined) {
    const view = budgetView(core, await core.store.tenants.get(range.tenant));
    if (view) report.budget = view;
  }
  return report;
}

/** A tenant as the admin routes show it: its own budget (or the default it has), and its spend. */
export async function tenantView(core: Core, tenant: string): Promise<{ tenant: string; budget?: BudgetView; ownBudget: boolean }> {
  const stored = await core.store.tenants.get(tenant);
  const view = budgetView(core, stored);
  return { tenant, ...(view ? { budget: view } : {}), ownBudget: stored?.budget !== undefined };
}

/**
 * Sets a tenant's own budget (or, with null, goes back to the default). The spend of the current
 * period is counted again from the usage records, so a budget set mid-period starts from what the
 * tenant has really spent.
 */
export async function setTenantBudget(core: Core, tenant: string, budget: Budget | null): Promise<void> {
  const effective = budget ?? core.settings.tenantBudget;
  const now = core.clock.now();
  const spend: Spend = { period: periodOf(now, effective?.period ?? 'month'), tokens: 0, cost: 0 };
  if (effective) {
    const from = new Date(Date.parse(periodStart(spend.period))).toISOString();
    for await (const record of usageRecords(core, { tenant, from, to: new Date(periodEnd(now, effective.period)).toISOString() })) {
      spend.tokens += totalTokens(record.tokens);
      if (record.cost && effective.cost && record.cost.currency === effective.cost.currency) spend.cost += record.cost.amount;
    }
  }
  await core.store.tenants.putBudget(tenant, budget ?? undefined, spend);
  core.recentTenants.forget(tenant);
}

function budgetView(core: Core, tenant: Tenant | undefined): BudgetView | undefined {
  const budget = tenant?.budget ?? core.settings.tenantBudget;
  if (!budget) return undefined;
  const now = core.clock.now();
  const spend = spendIn(tenant, budget, now);
  const left: BudgetView['left'] = {};
  if (budget.tokens !== undefined) left.tokens = Math.max(0, budget.tokens - spend.tokens);
  if (budget.cost !== undefined) left.cost = Math.max(0, Math.round((budget.cost.amount - spend.cost) * 1e6) / 1e6);
  return {
    ...budget,
    current: spend.period,
    spent: { tokens: spend.tokens, ...(budget.cost ? { cost: spend.cost } : {}) },
    left,
    exhausted: exhausted(spend, budget),
    ...(spend.crossedAt ? { crossedAt: spend.crossedAt } : {}),
    ...(spend.crossedByRunId ? { crossedByRunId: spend.crossedByRunId } : {}),
    resetsAt: new Date(periodEnd(now, budget.period)).toISOString(),
  };
}

function totalsOf(records: readonly UsageRecord[]): UsageTotals {
  const summed = sumUsage(records);
  return {
    runs: records.length,
    events: records.reduce((sum, record) => sum + record.events, 0),
    bytes: records.reduce((sum, record) => sum + record.bytes, 0),
    ...summed,
  };
}

function groupsOf(records: readonly UsageRecord[], groupBy: readonly UsageGroup[]): UsageReport['groups'] {
  const groups = new Map<string, { key: Partial<Record<UsageGroup, string>>; records: UsageRecord[] }>();
  for (const record of records) {
    // A run of several models is in each of their groups, with that model's tokens only.
    const models = groupBy.includes('model') ? modelsOf(record) : [undefined];
    for (const model of models) {
      const key: Partial<Record<UsageGroup, string>> = {};
      if (groupBy.includes('agent')) key.agent = record.agentId;
      if (groupBy.includes('day')) key.day = record.endedAt.slice(0, 10);
      if (model !== undefined) key.model = model;
      const id = JSON.stringify([key.agent, key.day, key.model]);
      const group = groups.get(id) ?? { key, records: [] };
      const tokens = model === undefined ? record.tokens : record.tokens?.filter((entry) => (entry.model ?? '') === model);
      group.records.push(model === undefined ? record : { ...record, tokens, cost: undefined });
      groups.set(id, group);
    }
  }
  const order = (key: Partial<Record<UsageGroup, string>>) => [key.day ?? '', key.agent ?? '', key.model ?? ''].join('\u0000');
  return [...groups.values()]
    .sort((a, b) => (order(a.key) < order(b.key) ? -1 : order(a.key) > order(b.key) ? 1 : 0))
    .map(({ key, records: grouped }) => ({ ...key, ...totalsOf(grouped) }));
}

/** The models a record's tokens name; '' for tokens reported without a model, and for a record with none. */
function modelsOf(record: UsageRecord): string[] {
  const models = new Set((record.tokens ?? []).map((entry) => entry.model ?? ''));
  return models.size > 0 ? [...models] : [''];
}

/** The first instant of a period key: `2026-12` → 2026-12-01T00:00Z, `2026-12-05` → that day's. */
function periodStart(period: string): string {
  return period.length === 7 ? `${period}-01T00:00:00.000Z` : `${period}T00:00:00.000Z`;
}
