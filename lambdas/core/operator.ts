import type { Task } from '@a2a-js/sdk';
import { readTask } from './a2a/lineage.js';
import type { Core } from './deps.js';
import { listProviders } from './link/registry.js';
import { tenantView, type BudgetView } from './metering.js';
import { isTerminal, type Ask, type Run, type RunStatus, type StoredEvent, type Thread } from './model.js';
import { openAsks } from './outcome.js';
import type { SealedSegment, ThreadListQuery } from './ports.js';
import { isExpired, tenantRule } from './retention/expiry.js';
import { summary, type RunSummary } from './thread-view.js';

/**
 * What an operator reads across tenants (the console): the record as it is, with what retention
 * ended hidden as it is from callers. Reads only: an operator's acts go through the callers' and
 * the admin's use cases.
 */

/** How far an overview counts and looks: a gateway with more shows "at least". */
export const OVERVIEW_LIMIT = 1000;
/** How many of the latest threads the overview reads the open asks and queues of. */
const OVERVIEW_THREADS = 200;

export type UnsettledStatus = Extract<RunStatus, 'queued' | 'running' | 'cancelling'>;
export const UNSETTLED: readonly UnsettledStatus[] = ['queued', 'running', 'cancelling'];

export interface OpenAsk extends Pick<Ask, 'id' | 'kind' | 'expiresAt' | 'toolCallName'> {
  tenant: string;
  threadId: string;
  runId: string;
  reason?: string;
}

export interface Overview {
  /** Runs not settled, by status: at most `OVERVIEW_LIMIT` each (`atLeast` when there are more). */
  runs: Record<UnsettledStatus, { count: number; atLeast: boolean }>;
  /** Threads with runs waiting their turn, deepest first. */
  queues: { thread: Thread; waiting: number }[];
  /** Open asks of the latest threads, soonest to expire first (those with no expiry last). */
  asks: OpenAsk[];
  /** The latest threads, each with its latest run. */
  recent: { thread: Thread; latest?: RunSummary }[];
  providers: Awaited<ReturnType<typeof listProviders>>;
  /** The latest threads' tenants, nearest their budget first (those without one last). */
  tenants: TenantSpend[];
}

export interface TenantSpend {
  tenant: string;
  budget?: BudgetView;
  /** The share of the budget spent (the larger of tokens and cost), when there is a budget. */
  share?: number;
}

export async function listThreads(core: Core, query: ThreadListQuery): Promise<{ threads: Thread[]; cursor?: string }> {
  const page = await core.store.threads.list(query);
  const live: Thread[] = [];
  for (const thread of page.threads) if (!(await isExpired(core, thread, await tenantRule(core, thread.tenant)))) live.push(thread);
  return { ...page, threads: live };
}

export async function overview(core: Core): Promise<Overview> {
  const runs = {} as Overview['runs'];
  for (const status of UNSETTLED) {
    const page = await core.store.runs.pageByStatus(status, { limit: OVERVIEW_LIMIT });
    runs[status] = { count: page.runs.length, atLeast: page.cursor !== undefined };
  }
  const { threads } = await listThreads(core, { limit: OVERVIEW_THREADS });
  const queues = threads
    .filter((thread) => thread.unsettled > 1)
    .map((thread) => ({ thread, waiting: thread.unsettled - 1 }))
    .sort((a, b) => b.waiting - a.waiting);
  const waiting = await Promise.all(threads.flatMap((thread) => (thread.waitingRunId === undefined ? [] : [core.store.runs.get(thread.waitingRunId)])));
  const asks = waiting.flatMap((run) => openAsks(run).map((ask) => openAskOf(run!, ask)));
  asks.sort((a, b) => (a.expiresAt ?? '\uffff').localeCompare(b.expiresAt ?? '\uffff'));
  const recent = await Promise.all(
    threads.slice(0, 10).map(async (thread) => {
      const latest = (await core.store.runs.listOfThread(thread)).sort((a, b) => b.arrival - a.arrival)[0];
      return latest ? { thread, latest: summary(latest) } : { thread };
    }),
  );
  return { runs, queues, asks, recent, providers: await listProviders(core), tenants: await spending(core, new Set(threads.map((thread) => thread.tenant))) };
}

function openAskOf(run: Run, ask: Ask): OpenAsk {
  return {
    tenant: run.tenant,
    threadId: run.threadId,
    runId: run.runId,
    id: ask.id,
    kind: ask.kind,
    ...(ask.expiresAt !== undefined ? { expiresAt: ask.expiresAt } : {}),
    ...(ask.toolCallName !== undefined ? { toolCallName: ask.toolCallName } : {}),
    ...(ask.interrupt?.reason !== undefined ? { reason: ask.interrupt.reason } : {}),
  };
}

/**
 * The tenants of the latest threads (and `also`), each with its budget and how much of it is spent,
 * nearest its budget first: the record lists no tenants, and a month of usage records is too many
 * to read for their names on every page.
 */
export async function tenantsSpending(core: Core, also: readonly string[] = []): Promise<TenantSpend[]> {
  const { threads } = await listThreads(core, { limit: OVERVIEW_THREADS });
  return spending(core, new Set([...also, ...threads.map((thread) => thread.tenant)]));
}

async function spending(core: Core, tenants: ReadonlySet<string>): Promise<TenantSpend[]> {
  const spends = await Promise.all(
    [...tenants].map(async (tenant): Promise<TenantSpend> => {
      const { budget } = await tenantView(core, tenant);
      return budget ? { tenant, budget, share: shareOf(budget) } : { tenant };
    }),
  );
  return spends.sort((a, b) => (b.share ?? -1) - (a.share ?? -1) || a.tenant.localeCompare(b.tenant));
}

function shareOf(budget: BudgetView): number {
  const tokens = budget.tokens ? budget.spent.tokens / budget.tokens : 0;
  const cost = budget.cost ? (budget.spent.cost ?? 0) / budget.cost.amount : 0;
  return Math.max(tokens, cost);
}

export interface RunFilter {
  tenant?: string;
  agentId?: string;
  threadId?: string;
  status?: UnsettledStatus;
}

/**
 * The unsettled runs a filter names (what a cancel by filter cancels), at most `OVERVIEW_LIMIT`.
 * An empty filter names none: cancelling everything takes a filter that says so.
 */
export async function runsMatching(core: Core, filter: RunFilter): Promise<{ runs: Run[]; atLeast: boolean }> {
  if (filter.tenant === undefined && filter.agentId === undefined && filter.threadId === undefined && filter.status === undefined) return { runs: [], atLeast: false };
  const matched: Run[] = [];
  let atLeast = false;
  for (const status of filter.status ? [filter.status] : UNSETTLED) {
    let cursor: string | undefined;
    do {
      const page = await core.store.runs.pageByStatus(status, { limit: 200, ...(cursor ? { cursor } : {}) });
      for (const run of page.runs) {
        if (isTerminal(run.status)) continue;
        if (filter.tenant !== undefined && run.tenant !== filter.tenant) continue;
        if (filter.agentId !== undefined && run.agentId !== filter.agentId) continue;
        if (filter.threadId !== undefined && run.threadId !== filter.threadId) continue;
        if (matched.length === OVERVIEW_LIMIT) atLeast = true;
        else matched.push(run);
      }
      cursor = page.cursor;
    } while (cursor && !atLeast);
  }
  return { runs: matched, atLeast };
}

/** A page of a run's log, after `afterSeq`. */
export function runEvents(core: Core, runId: string, afterSeq: number, limit: number): Promise<StoredEvent[]> {
  return core.store.events.read(runId, afterSeq, limit);
}

/** A run's task as the A2A door projects it (its lineage from the root), beside its AG-UI log. */
export async function taskOfRun(core: Core, run: Run): Promise<Task> {
  const root = run.rootRunId === run.runId ? run : await core.store.runs.get(run.rootRunId);
  return readTask(core.store, root ?? run);
}

/**
 * The latest segments of the audit log, latest first, each with the hash of the segment before it
 * (null for the first; undefined when that one is gone): what its signed payload must name.
 */
export async function auditSegments(core: Core, limit: number): Promise<{ segment: SealedSegment; prevHash: string | null | undefined }[]> {
  const head = await core.store.audit.lastSegment();
  if (!head) return [];
  const segments = await core.store.audit.segments(Math.max(1, head.seq - limit), limit + 1);
  return segments
    .slice(-limit)
    .reverse()
    .map((segment) => ({ segment, prevHash: segment.seq === 1 ? null : segments.find((other) => other.seq === segment.seq - 1)?.hash }));
}
