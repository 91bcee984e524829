import { aggregateTokenUsage, EventType, type TokenUsage } from '@ag-ui/core';
import type { AgUiEventRecord, Prices, Run, RunUsage } from './model.js';

export type UsageOutcome = 'success' | 'interrupt' | 'failed' | 'cancelled';

/** One settled run, for metering: derived from its record, written once, keyed by its run id. */
export interface UsageRecord {
  runId: string;
  tenant: string;
  principal: string;
  agentId: string;
  threadId: string;
  parentRunId?: string;
  rootRunId: string;
  door: Run['door'];
  outcome: UsageOutcome;
  /** The reason of a failed run. */
  code?: string;
  acceptedAt: string;
  startedAt?: string;
  endedAt: string;
  queuedMs: number;
  runningMs: number;
  events: number;
  bytes: number;
  tokens?: TokenUsage[];
  cost?: { amount: number; currency: string };
}

const TOKEN_COUNTS = ['inputTokens', 'outputTokens', 'totalTokens', 'reasoningTokens', 'cachedInputTokens', 'cacheWriteInputTokens'] as const;

/**
 * The token usage a run's terminal events report (AG-UI 1.0 `usage` on RUN_FINISHED and RUN_ERROR),
 * summed per provider and model; undefined when none reports any, never an entry of zeros.
 */
export function tokensOf(events: readonly AgUiEventRecord[]): TokenUsage[] | undefined {
  const entries: TokenUsage[] = [];
  for (const event of events) {
    if (event.type !== EventType.RUN_FINISHED && event.type !== EventType.RUN_ERROR) continue;
    const usage = (event as { usage?: unknown }).usage;
    if (!Array.isArray(usage)) continue;
    for (const entry of usage) if (isTokenUsage(entry)) entries.push(entry);
  }
  if (entries.length === 0) return undefined;
  return aggregateTokenUsage(entries).map(withoutUndefined);
}

/** The cost of a run from its agent's prices: per run, per running second, and per 1,000 tokens by model. */
export function costOf(prices: Prices, tokens: readonly TokenUsage[] | undefined, runningMs: number): { amount: number; currency: string } {
  let amount = (prices.perRun ?? 0) + (prices.perRunningSecond ?? 0) * (runningMs / 1000);
  for (const entry of tokens ?? []) {
    const price = prices.perThousandTokens?.[entry.model ?? ''] ?? prices.perThousandTokens?.['*'];
    if (!price) continue;
    const input = entry.inputTokens ?? 0;
    const cached = Math.min(entry.cachedInputTokens ?? 0, input);
    const output = entry.outputTokens ?? 0;
    const reasoning = Math.min(entry.reasoningTokens ?? 0, output);
    // Cached input is part of the input and reasoning part of the output (AG-UI 1.0): each token is priced once.
    amount += ((input - cached) * (price.input ?? 0)) / 1000;
    amount += (cached * (price.cachedInput ?? price.input ?? 0)) / 1000;
    amount += ((output - reasoning) * (price.output ?? 0)) / 1000;
    amount += (reasoning * (price.reasoning ?? price.output ?? 0)) / 1000;
  }
  return { amount: roundCost(amount), currency: prices.currency };
}

/** The usage of a run at its end: its log's size, the tokens its terminal events report, its cost. */
export function runUsage(run: Run, log: { events: number; bytes: number }, closing: readonly AgUiEventRecord[], endedAt: string, prices?: Prices): RunUsage {
  const tokens = tokensOf(closing);
  const usage: RunUsage = { events: log.events, bytes: log.bytes, ...(tokens ? { tokens } : {}) };
  if (prices) usage.cost = costOf(prices, tokens, runningMs(run, endedAt));
  return usage;
}

/** A settled run's usage record, from its record alone. */
export function usageRecordOf(run: Run): UsageRecord {
  const endedAt = run.endedAt ?? run.createdAt;
  const outcome: UsageOutcome =
    run.status === 'failed' ? 'failed' : run.status === 'cancelled' ? 'cancelled' : run.outcome === 'interrupt' ? 'interrupt' : 'success';
  const record: UsageRecord = {
    runId: run.runId,
    tenant: run.tenant,
    principal: run.principal,
    agentId: run.agentId,
    threadId: run.threadId,
    rootRunId: run.rootRunId,
    door: run.door,
    outcome,
    acceptedAt: run.createdAt,
    endedAt,
    queuedMs: Math.max(0, Date.parse(run.startedAt ?? endedAt) - Date.parse(run.createdAt)),
    runningMs: runningMs(run, endedAt),
    events: run.usage?.events ?? run.lastSeq ?? 0,
    bytes: run.usage?.bytes ?? 0,
  };
  if (run.parentRunId !== undefined) record.parentRunId = run.parentRunId;
  if (outcome === 'failed' && run.reason !== undefined) record.code = run.reason;
  if (run.startedAt !== undefined) record.startedAt = run.startedAt;
  if (run.usage?.tokens) record.tokens = run.usage.tokens;
  if (run.usage?.cost) record.cost = run.usage.cost;
  return record;
}

/** The usage of runs summed: token entries per provider and model, and cost per currency. */
export function sumUsage(usages: readonly Pick<RunUsage, 'tokens' | 'cost'>[]): Pick<RunUsage, 'tokens'> & { cost?: { amount: number; currency: string }[] } {
  const tokens = usages.flatMap((usage) => usage.tokens ?? []);
  const costs = new Map<string, number>();
  for (const usage of usages) if (usage.cost) costs.set(usage.cost.currency, (costs.get(usage.cost.currency) ?? 0) + usage.cost.amount);
  return {
    ...(tokens.length > 0 ? { tokens: aggregateTokenUsage(tokens).map(withoutUndefined) } : {}),
    ...(costs.size > 0 ? { cost: [...costs].map(([currency, amount]) => ({ amount: roundCost(amount), currency })) } : {}),
  };
}

/** All the tokens of a usage, one number: what a token budget counts (`totalTokens`, else input + output). */
export function totalTokens(tokens: readonly TokenUsage[] | undefined): number {
  let total = 0;
  for (const entry of tokens ?? []) total += entry.totalTokens ?? (entry.inputTokens ?? 0) + (entry.outputTokens ?? 0);
  return total;
}

function runningMs(run: Run, endedAt: string): number {
  return run.startedAt === undefined ? 0 : Math.max(0, Date.parse(endedAt) - Date.parse(run.startedAt));
}

/** Costs are kept to a millionth of the currency unit: sums of many small prices stay exact enough to bill. */
function roundCost(amount: number): number {
  return Math.round(amount * 1e6) / 1e6;
}

function isTokenUsage(entry: unknown): entry is TokenUsage {
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) return false;
  const counts = entry as Record<string, unknown>;
  // A count is a whole number of tokens: 1e-200 or 1e300 from a hostile agent is not one (and no store could keep it).
  return TOKEN_COUNTS.every((key) => counts[key] === undefined || (Number.isSafeInteger(counts[key]) && (counts[key] as number) >= 0));
}

function withoutUndefined(entry: TokenUsage): TokenUsage {
  return Object.fromEntries(Object.entries(entry).filter(([, value]) => value !== undefined)) as TokenUsage;
}
