import { threadKey, type Budget, type LinkProvider, type MessageClaim, type Run, type RunLease, type RunLink, type RunStatus, type Spend, type Tenant, type Thread, type ThreadRef } from '../model.js';
import type { AskChanges, LeaseAs, Reserved, RecordProjections, TaskEntry, TaskIndexQuery, TenantAdmission, TenantLimits } from './port.js';
import { admission, charged, checkPageLimit, checkRunPatch, claimIsFree, closedAsks, crossed, linkMayMove, registrationOf, reopenedAsks, type TenantCounts } from './rules.js';

/**
 * The record's rules as a model: the parts of the port whose answers are policy (places, admission,
 * spend, claims, provider registrations, principals' keys, leases, run writes and the task index), in memory, with no I/O
 * and no time of its own. Its methods are the port's, answering at once what a store must answer
 * to the same calls in the same order; a model-based test holds every store to it
 * (test/adapters/record-model.test.ts). It is no store: it keeps no input apart, no events, no
 * arrivals, no usage, and its cursors are its own.
 */
export class ReferenceRecord {
  private readonly threadItems = new Map<string, { thread: Thread; holders: Set<string> }>();
  private readonly tenantItems = new Map<string, { counts: TenantCounts; holders: Set<string>; budget?: Budget; spend?: Spend }>();
  private readonly runItems = new Map<string, Run>();
  private readonly taskItems = new Map<string, Omit<Extract<TaskEntry, { root: true }>, 'root'>>();
  private readonly claimItems = new Map<string, MessageClaim>();
  private readonly providerItems = new Map<string, { provider: LinkProvider; places: number }>();
  private readonly principalItems = new Map<string, string[]>();
  private readonly leaseItems = new Map<string, RunLease>();

  constructor(private readonly projections: RecordProjections) {}

  readonly threads = {
    get: (ref: ThreadRef): Thread | undefined => copy(this.threadItems.get(threadKey(ref))?.thread),
    create: (thread: Thread, holder: string): boolean => {
      const key = threadKey(thread);
      if (this.threadItems.has(key)) return false;
      this.threadItems.set(key, { thread: copy(thread), holders: new Set([holder]) });
      return true;
    },
    reserveArrival: (ref: ThreadRef, holder: string, limit: number | undefined): Reserved | undefined => {
      const item = this.threadItems.get(threadKey(ref));
      if (!item) return undefined;
      // A holder takes a new number on the place it holds; a new one needs room.
      const fresh = !item.holders.has(holder);
      if (fresh) {
        if (limit !== undefined && item.thread.unsettled >= limit) return undefined;
        item.holders.add(holder);
        item.thread.unsettled += 1;
      }
      item.thread.arrivals += 1;
      return { arrival: item.thread.arrivals, alone: fresh && item.thread.unsettled === 1 };
    },
    releasePlace: (ref: ThreadRef, holder: string): void => {
      const item = this.threadItems.get(threadKey(ref));
      if (!item?.holders.delete(holder)) return;
      item.thread.unsettled -= 1;
    },
    placeHolders: (ref: ThreadRef): string[] => [...(this.threadItems.get(threadKey(ref))?.holders ?? [])].sort(),
    abandon: (ref: ThreadRef, holder: string): void => {
      const key = threadKey(ref);
      const item = this.threadItems.get(key);
      if (item && item.thread.arrivals === 1 && item.holders.has(holder)) this.threadItems.delete(key);
      else this.threads.releasePlace(ref, holder);
    },
    setPlaces: (ref: ThreadRef, holders: readonly string[]): void => {
      const item = this.threadItems.get(threadKey(ref));
      if (!item) return;
      item.holders = new Set(holders);
      item.thread.unsettled = holders.length;
    },
    setWaitingRun: (ref: ThreadRef, runId: string): void => {
      const item = this.threadItems.get(threadKey(ref));
      if (item) item.thread.waitingRunId = runId;
    },
  };

  readonly tenants = {
    admit: (tenant: string, holder: string, limits: TenantLimits): TenantAdmission => {
      const item = this.tenantItems.get(tenant);
      const decided = admission(item?.counts, item?.holders.has(holder) ?? false, limits);
      if (decided.counts) {
        const written = this.tenant(tenant);
        written.counts = decided.counts;
        if (limits.places !== undefined) written.holders.add(holder);
      }
      return decided.admission;
    },
    releasePlace: (tenant: string, holder: string): void => {
      const item = this.tenantItems.get(tenant);
      if (!item?.holders.delete(holder)) return;
      item.counts.places = (item.counts.places ?? 0) - 1;
    },
    setPlaces: (places: ReadonlyMap<string, readonly string[]>): void => {
      for (const name of new Set([...this.tenantItems.keys(), ...places.keys()])) {
        const holders = places.get(name) ?? [];
        const item = this.tenant(name);
        item.holders = new Set(holders);
        item.counts.places = holders.length;
      }
    },
    get: (tenant: string): Tenant | undefined => {
      const item = this.tenantItems.get(tenant);
      if (!item || (item.budget === undefined && item.spend === undefined)) return undefined;
      return copy({ tenant, ...(item.budget ? { budget: item.budget } : {}), ...(item.spend ? { spend: item.spend } : {}) });
    },
    putBudget: (tenant: string, budget: Budget | undefined, spend: Spend): void => {
      const item = this.tenant(tenant);
      item.budget = copy(budget);
      item.spend = copy(spend);
    },
    charge: (tenant: string, charge: Pick<Spend, 'period' | 'tokens' | 'cost'>): Spend | undefined => {
      const spend = charged(this.tenantItems.get(tenant)?.spend, charge);
      if (spend) this.tenant(tenant).spend = spend;
      return copy(spend);
    },
    markBudgetCrossed: (tenant: string, period: string, runId: string, at: string): void => {
      const item = this.tenantItems.get(tenant);
      const spend = crossed(item?.spend, period, runId, at);
      if (item && spend) item.spend = spend;
    },
  };

  readonly runs = {
    create: (run: Run): boolean => {
      if (this.runItems.has(run.runId)) return false;
      this.write(copy(run));
      return true;
    },
    get: (runId: string): Run | undefined => copy(this.runItems.get(runId)),
    transition: (runId: string, from: readonly RunStatus[], patch: Partial<Run> & { status: RunStatus }): Run | undefined => {
      if (from.length === 0) return undefined;
      checkRunPatch(patch);
      const run = this.runItems.get(runId);
      if (!run || !from.includes(run.status)) return undefined;
      for (const [key, value] of Object.entries(patch)) if (value !== undefined) (run as unknown as Record<string, unknown>)[key] = copy(value);
      return this.write(run);
    },
    closeAsks: (runId: string, changes: AskChanges): Run | undefined => {
      const run = this.runItems.get(runId);
      if (Object.keys(changes).length === 0 || !run) return copy(run);
      const asks = closedAsks(run.asks, changes);
      if (!asks) return undefined;
      run.asks = asks;
      return this.write(run);
    },
    reopenAsks: (runId: string, changes: AskChanges): Run | undefined => {
      const run = this.runItems.get(runId);
      if (Object.keys(changes).length === 0 || !run) return copy(run);
      const asks = reopenedAsks(run.asks, changes);
      if (!asks) return undefined;
      run.asks = asks;
      run.asksReopened = (run.asksReopened ?? 0) + 1;
      return this.write(run);
    },
    updateLink: (runId: string, expectedRev: number | undefined, link: RunLink): Run | undefined => {
      const run = this.runItems.get(runId);
      if (!run || !linkMayMove(run, expectedRev)) return undefined;
      run.link = copy(link);
      return this.write(run);
    },
  };

  readonly tasks = {
    /** Newest first (by the root's creation, then its id); the cursor is the listing's offset. */
    list: (tenant: string, query: TaskIndexQuery): { runs: Run[]; cursor?: string } => {
      checkPageLimit(query.limit);
      const found = [...this.taskItems.values()]
        .filter(
          (entry) =>
            entry.tenant === tenant &&
            entry.agentId === query.agentId &&
            (query.threadId === undefined || entry.threadId === query.threadId) &&
            (query.state === undefined || entry.state === query.state) &&
            (query.stateAfter === undefined || entry.stateAt > query.stateAfter),
        )
        .sort((a, b) => (a.createdAt === b.createdAt ? (a.taskId < b.taskId ? 1 : -1) : a.createdAt < b.createdAt ? 1 : -1));
      const from = query.cursor === undefined ? 0 : Number(query.cursor);
      const runs = found.slice(from, from + query.limit).map((entry) => copy(this.runItems.get(entry.taskId)!));
      return from + query.limit < found.length ? { runs, cursor: String(from + query.limit) } : { runs };
    },
    /** The task's entry as the model keeps it (a store shows its own only through its listings). */
    entry: (taskId: string): { tenant: string; agentId: string; state: number } | undefined => {
      const entry = this.taskItems.get(taskId);
      return entry && { tenant: entry.tenant, agentId: entry.agentId, state: entry.state };
    },
  };

  readonly claims = {
    take: (claim: MessageClaim, nowSeconds: number): MessageClaim => {
      const held = this.claimItems.get(claim.key);
      if (!claimIsFree(held, nowSeconds)) return copy(held!);
      this.claimItems.set(claim.key, copy(claim));
      return copy(claim);
    },
    release: (claim: MessageClaim): void => {
      if (this.claimItems.get(claim.key)?.runId === claim.runId) this.claimItems.delete(claim.key);
    },
  };

  readonly leases = {
    take: (lease: RunLease): boolean => {
      const held = this.leaseItems.get(lease.runId);
      if (held && (held.door || lease.door)) return false;
      this.leaseItems.set(lease.runId, copy(lease));
      return true;
    },
    renew: (runId: string, until: number, receipt?: string): boolean => {
      const held = this.leaseItems.get(runId);
      if (!held || (receipt !== undefined && held.receipt !== receipt)) return false;
      held.until = until;
      return true;
    },
    get: (runId: string): RunLease | undefined => {
      const held = this.leaseItems.get(runId);
      return held && copy(held);
    },
    lapsed: (before: number, limit: number): RunLease[] =>
      [...this.leaseItems.values()]
        .filter((lease) => lease.until < before)
        .sort((a, b) => a.until - b.until || (a.runId < b.runId ? -1 : 1))
        .slice(0, limit)
        .map(copy),
    end: (runId: string, as: LeaseAs = {}): boolean => {
      const held = this.leaseItems.get(runId);
      if (!held || (as.until !== undefined && held.until !== as.until) || (as.receipt !== undefined && held.receipt !== as.receipt)) return false;
      return this.leaseItems.delete(runId);
    },
  };

  readonly providers = {
    put: (provider: LinkProvider): boolean => {
      const existing = this.providerItems.get(provider.providerId);
      this.providerItems.set(provider.providerId, { provider: registrationOf(existing?.provider, copy(provider)), places: existing?.places ?? 0 });
      return existing === undefined;
    },
    get: (providerId: string): (LinkProvider & { places: number }) | undefined => {
      const item = this.providerItems.get(providerId);
      return item && copy({ ...item.provider, places: item.places });
    },
    list: (): (LinkProvider & { places: number })[] =>
      [...this.providerItems.keys()].sort().map((providerId) => this.providers.get(providerId)!),
    delete: (providerId: string): boolean => this.providerItems.delete(providerId),
    takePlace: (providerId: string, limit: number): boolean => {
      const item = this.providerItems.get(providerId);
      if (!item || item.places >= limit) return false;
      item.places += 1;
      return true;
    },
    releasePlace: (providerId: string): void => {
      const item = this.providerItems.get(providerId);
      if (item && item.places > 0) item.places -= 1;
    },
    resetPlaces: (): void => {
      for (const item of this.providerItems.values()) item.places = 0;
    },
  };

  readonly principals = {
    get: (tenant: string, principal: string): string[] | undefined => copy(this.principalItems.get(JSON.stringify([tenant, principal]))),
    put: (tenant: string, principal: string, publicKeys: readonly string[]): boolean => {
      const key = JSON.stringify([tenant, principal]);
      const existed = this.principalItems.has(key);
      this.principalItems.set(key, [...publicKeys]);
      return !existed;
    },
    delete: (tenant: string, principal: string): boolean => this.principalItems.delete(JSON.stringify([tenant, principal])),
  };

  private tenant(tenant: string) {
    let item = this.tenantItems.get(tenant);
    if (!item) this.tenantItems.set(tenant, (item = { counts: {}, holders: new Set() }));
    return item;
  }

  /**
   * A run as written, with its task's entry: the root's makes the entry (or, while the root is
   * still the tail, sets its state); a later run of the lineage moves it unless a run that arrived
   * later still did.
   */
  private write(run: Run): Run {
    this.runItems.set(run.runId, run);
    const entry = this.projections.taskEntry(run);
    const held = this.taskItems.get(entry.taskId);
    if (entry.root) {
      const { root: _root, ...made } = entry;
      if (!held || held.tailArrival === entry.tailArrival) this.taskItems.set(entry.taskId, made);
    } else if (held && held.tailArrival <= entry.tailArrival) {
      this.taskItems.set(entry.taskId, { ...held, tailArrival: entry.tailArrival, state: entry.state, stateAt: entry.stateAt });
    }
    return copy(run);
  }
}

/** Answers are copies: what a caller does with one changes nothing of the model, as with a store's. */
function copy<T>(value: T): T {
  return value === undefined ? value : structuredClone(value);
}
