import type { Core } from '../deps.js';
import type { Run, Thread, ThreadRef } from '../model.js';
import { openAsks } from '../outcome.js';
import { cutoffOf, DEFAULT_RETENTION, policyOf, threadExpired, type LegalHold, type RetentionPolicy, type TenantRetention } from './policy.js';

/** A tenant's retention as a read uses it: the policy in force (its own over the gateway's) and its hold. */
export interface TenantRule {
  policy: RetentionPolicy;
  tenantHold?: LegalHold;
}

/** The gateway's own policy: the settings' over funduq's defaults. */
export function gatewayPolicy(core: Pick<Core, 'settings'>): RetentionPolicy {
  return { ...DEFAULT_RETENTION, ...core.settings.retention };
}

/**
 * The tenant's retention, read moments ago or now (`Core.recentRetention`: every read of a thread
 * asks, and a setting changes seldom; a change is seen by every door within `RECENT_AGENT_MS`).
 */
export async function tenantRule(core: Core, tenant: string): Promise<TenantRule> {
  let own = core.recentRetention.recent(tenant);
  if (own === undefined) {
    own = (await core.store.retention.get(tenant)) ?? null;
    core.recentRetention.keep(tenant, own);
  }
  return ruleOf(gatewayPolicy(core), own ?? undefined);
}

export function ruleOf(defaults: RetentionPolicy, own: TenantRetention | undefined): TenantRule {
  return { policy: policyOf(defaults, own?.policy), ...(own?.hold ? { tenantHold: own.hold } : {}) };
}

/**
 * Whether retention ended the thread: gone from every read from that moment, and deleted by the
 * next pass (`applyRetention`). `waiting`: its waiting run, when the caller read it already.
 */
export async function isExpired(core: Core, thread: Thread, rule?: TenantRule, waiting?: Run): Promise<boolean> {
  const applied = rule ?? (await tenantRule(core, thread.tenant));
  return threadExpired(thread, applied, core.clock.now(), async (runId) => {
    const run = waiting?.runId === runId ? waiting : await core.store.runs.get(runId);
    return run !== undefined && openAsks(run).length > 0;
  });
}

/** The thread as a read sees it: undefined when there is none, or retention ended it. */
export async function liveThread(core: Core, ref: ThreadRef): Promise<Thread | undefined> {
  const thread = await core.store.threads.get(ref);
  return thread && !(await isExpired(core, thread)) ? thread : undefined;
}

/** The run as a read sees it: undefined when retention ended its thread (read then as an unknown run). */
export async function liveRun<R extends Pick<Run, 'tenant' | 'threadId'>>(core: Core, run: R | undefined): Promise<R | undefined> {
  return run && (await liveRuns(core, [run]))[0];
}

/** The runs a read may show: those whose thread retention has not ended (threads read once each). */
export async function liveRuns<R extends Pick<Run, 'tenant' | 'threadId'>>(core: Core, runs: readonly R[]): Promise<R[]> {
  const rules = new Map<string, TenantRule>();
  const gone = new Map<string, Promise<boolean>>();
  const expired = async (run: R): Promise<boolean> => {
    let rule = rules.get(run.tenant);
    if (!rule) rules.set(run.tenant, (rule = await tenantRule(core, run.tenant)));
    if (rule.policy.contentDays === null) return false;
    const key = JSON.stringify([run.tenant, run.threadId]);
    let answer = gone.get(key);
    if (!answer) {
      const applied = rule;
      answer = core.store.threads.get(run).then((thread) => thread !== undefined && isExpired(core, thread, applied));
      gone.set(key, answer);
    }
    return answer;
  };
  const flags = await Promise.all(runs.map(expired));
  return runs.filter((_, i) => !flags[i]);
}

/** Whether a usage record is still kept (`usageCutoff`), tenants' rules read once each. */
export function usageKept(core: Core): (record: { tenant: string; endedAt: string }) => Promise<boolean> {
  const cutoffs = new Map<string, Promise<string | undefined>>();
  return async (record) => {
    let cutoff = cutoffs.get(record.tenant);
    if (!cutoff) cutoffs.set(record.tenant, (cutoff = tenantRule(core, record.tenant).then((rule) => usageCutoff(rule, core.clock.now()))));
    const before = await cutoff;
    return before === undefined || record.endedAt >= before;
  };
}

/** Before when a tenant's usage records are gone: its usage days back, none while a hold covers the tenant. */
export function usageCutoff(rule: TenantRule, now: number): string | undefined {
  return rule.tenantHold ? undefined : cutoffOf(rule.policy.usageDays, now);
}
