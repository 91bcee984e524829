import { createTasks, type A2aSettings } from './a2a/tasks.js';
import { deleteAgent } from './agents.js';
import { cancelRun } from './cancel-run.js';
import { coreOf, type CoreDeps } from './deps.js';
import { dispatchRun, failUndelivered, type DispatchOptions } from './dispatch-run.js';
import { ok, type Result } from './errors.js';
import { expireAsks } from './expire-asks.js';
import { createLink } from './link/index.js';
import { followRun, RunWatch } from './follow-run.js';
import type { Agent, Principal, StoredEvent } from './model.js';
import type { PushSender } from './ports.js';
import { deletePrincipalKeys, getPrincipalKeys, putPrincipalKeys } from './principal-keys.js';
import { recover } from './recover.js';
import { failIfLapsed, failLapsed } from './lease.js';
import { repairRun, sweepArrivals } from './repair.js';
import { startRun, type StartedRun, type StartRunRequest } from './start-run.js';
import { setTenantBudget, tenantView, usagePage, usageRange, usageRecords, usageReport, type UsageGroup, type UsageRange } from './metering.js';
import type { Budget, Run } from './model.js';
import { threadView } from './thread-view.js';
import { auditSegments, listThreads, overview, runEvents, runsMatching, taskOfRun, tenantsSpending, type RunFilter } from './operator.js';
import type { ThreadListQuery } from './ports.js';
import { exportAudit } from './audit/export.js';
import type { AuditEntry, AuditQuery } from './audit/record.js';
import { sealAudit, type AuditSeal } from './audit/seal.js';
import { holdTenant, holdThread, retentionView, setRetention } from './retention/admin.js';
import { gatewayPolicy, liveRun } from './retention/expiry.js';
import { applyRetention } from './retention/pass.js';
import { cutoffOf, type TenantPolicy } from './retention/policy.js';
import type { LegalHold, ThreadRef } from './model.js';
import { writeAudit } from './audit/write.js';

export interface GatewayOptions {
  /** The A2A use cases' push sender (without one, no push notifications) and settings. */
  a2a?: { push?: PushSender; settings?: Partial<A2aSettings> };
}

/** A run as `startAndFollow` started it, with its events from the first on. */
export interface FollowedRun extends StartedRun {
  /** The run's stored events as they come, until it settles; call once. */
  events(signal?: AbortSignal): AsyncGenerator<StoredEvent>;
}

/**
 * The core's use cases bound to one set of ports: what doors, dispatchers and timers call, and
 * the only way in. The ports stay inside; every write of a run goes through the record's owner
 * (`Ledger`) the use cases share.
 */
export function createGateway(deps: CoreDeps, options: GatewayOptions = {}) {
  const core = coreOf(deps);
  // Where dispatchers hold leases (AWS), a reader that hears nothing of a running run for a lapse
  // checks its lease (set here: the check is a use case, which the core's ports cannot name).
  const lease = core.settings.lease;
  if (lease) core.lapse = { afterMs: lease.lapseMs, check: (runId) => failIfLapsed(core, runId) };
  const tasks = createTasks(core, options.a2a);
  return {
    startRun: (request: StartRunRequest) => startRun(core, request),
    /**
     * Starts a run and follows it from its first event: the run is watched from before it exists,
     * so a new run's stream begins without reading the store.
     */
    async startAndFollow(request: StartRunRequest): Promise<Result<FollowedRun>> {
      const watch = new RunWatch(core.feed, request.input.runId);
      const started = await startRun(core, request).catch((error: unknown) => {
        watch.close();
        throw error;
      });
      if (!started.ok || started.value.attached) watch.close();
      if (!started.ok) return started;
      const { run, attached } = started.value;
      const created = attached ? undefined : { run, watch };
      return ok({ run, attached, events: (signal?: AbortSignal) => followRun(core, run.runId, 0, signal, created) });
    },
    dispatchRun: (runId: string, options?: DispatchOptions) => dispatchRun(core, runId, options),
    /** What a run's record calls for, done again (its queue message, the rest of its settle): safe to repeat. */
    repairRun: (runId: string) => repairRun(core, runId),
    /** Gives back what requests noted more than `olderThanMs` ago took, when their run was never recorded. */
    sweepArrivals: (olderThanMs: number) => sweepArrivals(core, new Date(core.clock.now() - olderThanMs).toISOString()),
    failLapsed: () => failLapsed(core, core.clock.now()),
    /** A run whose thread-queue message was dead-lettered: failed `dispatch_failed`, its places given back. */
    failUndelivered: (runId: string) => failUndelivered(core, runId),
    /** `proof`: the cancel's signature (`{publicKey, timestamp, signature}`), needed for a run on a thread bound to its head. */
    cancelRun: (runId: string, principal: Principal, proof?: unknown, requestId?: string) => cancelRun(core, runId, principal, proof, requestId),
    expireAsks: (runId: string) => expireAsks(core, runId),
    recover: () => recover(core),
    followRun: (runId: string, afterSeq: number, signal?: AbortSignal) => followRun(core, runId, afterSeq, signal),
    threadView: (threadId: string, principal: Principal) => threadView(core, threadId, principal),
    getRun: async (runId: string, principal: Principal) => liveRun(core, await core.store.runs.getOf(principal.tenant, runId)),
    putAgent: async (agent: Agent) => {
      await core.store.agents.put(agent);
      core.recentAgents.forget(agent.id);
    },
    getAgent: (agentId: string) => core.store.agents.get(agentId),
    listAgents: () => core.store.agents.list(),
    deleteAgent: (agentId: string) => deleteAgent(core, agentId),
    /** Resolves when the store answers (readiness); throws what it threw. */
    ready: async () => {
      await core.store.agents.get('readyz');
    },
    /** The A2A door's use cases: a task is the lineage of a root run and its answers. */
    tasks,
    /** Principals' keys, which their actor chains' last hop is signed by (the admin's). */
    principals: {
      put: (tenant: string, principal: string, publicKeys: readonly string[]) => putPrincipalKeys(core, tenant, principal, publicKeys),
      get: (tenant: string, principal: string) => getPrincipalKeys(core, tenant, principal),
      delete: (tenant: string, principal: string) => deletePrincipalKeys(core, tenant, principal),
    },
    /** Agents that dial out: the links' handshake and frames, their timers, and the registry of providers. */
    link: createLink(core),
    /** The audit log (core/audit): records written with each act, sealed into signed segments, listed and exported. */
    audit: {
      write: (entry: AuditEntry) => writeAudit(core, entry),
      /** Records past the audit days are gone from the listing at once (and deleted by the next retention pass). */
      list: (query: AuditQuery) => {
        const before = cutoffOf(gatewayPolicy(core).auditDays, core.clock.now());
        return core.store.audit.list(before !== undefined && query.from < before ? { ...query, from: before } : query);
      },
      /** Seals what is not sealed yet, with the gateway's key or the one given (read late: a secret); 0 where no key seals. */
      seal: (seal: AuditSeal | undefined = core.auditSeal) => (seal ? sealAudit({ log: core.store.audit, seal, clock: core.clock }) : Promise.resolve(0)),
      /** The public key segments are signed with (what the verifier is given), if any. */
      publicKey: core.auditSeal?.publicKey,
      head: () => core.store.audit.lastSegment(),
      /** The gateway's clock: a listing's default range ends now. */
      now: () => core.clock.now(),
      export: () => exportAudit(core.store.audit, { publicKey: core.auditSeal?.publicKey, exportedAt: new Date(core.clock.now()).toISOString() }, core.clock.now()),
    },
    /** Retention (core/retention): each tenant's policy and legal hold, threads' holds, and the pass that deletes what retention ended. */
    retention: {
      view: (tenant: string) => retentionView(core, tenant),
      set: (tenant: string, policy: TenantPolicy | null) => setRetention(core, tenant, policy),
      holdTenant: (tenant: string, hold: LegalHold | undefined) => holdTenant(core, tenant, hold),
      holdThread: (thread: ThreadRef, hold: LegalHold | undefined) => holdThread(core, thread, hold),
      apply: () => applyRetention(core),
    },
    /** Metering: what runs used, by tenant, agent, day and model, and the tenants' budgets. */
    usage: {
      /** A caller's range, checked; by default the current UTC month. */
      range: (given: { from?: string; to?: string }) => usageRange(given, core.clock.now()),
      report: (range: UsageRange, groupBy: readonly UsageGroup[]) => usageReport(core, range, groupBy),
      page: (range: UsageRange & { limit: number; cursor?: string }) => usagePage(core, range),
      records: (range: UsageRange) => usageRecords(core, range),
      tenant: (tenant: string) => tenantView(core, tenant),
      setBudget: (tenant: string, budget: Budget | null) => setTenantBudget(core, tenant, budget),
    },
    /** What an operator reads across tenants (`core/operator.ts`); its acts are the use cases above. */
    operator: {
      threads: (query: ThreadListQuery) => listThreads(core, query),
      overview: () => overview(core),
      runsMatching: (filter: RunFilter) => runsMatching(core, filter),
      events: (runId: string, afterSeq: number, limit: number) => runEvents(core, runId, afterSeq, limit),
      task: (run: Run) => taskOfRun(core, run),
      tenants: (also: readonly string[] = []) => tenantsSpending(core, also),
      segments: (limit: number) => auditSegments(core, limit),
    },
  };
}

export type Gateway = ReturnType<typeof createGateway>;
