import type { Core } from '../deps.js';
import { ok, refuse, type Result } from '../errors.js';
import type { LegalHold, ThreadRef } from '../model.js';
import { gatewayPolicy, ruleOf } from './expiry.js';
import { MOST_DAYS, type RetentionPolicy, type TenantPolicy } from './policy.js';

/** A tenant's retention as the admin reads it: what is in force, what the tenant set of its own, the gateway's, and its hold. */
export interface RetentionView {
  tenant: string;
  policy: RetentionPolicy;
  own?: TenantPolicy;
  defaults: RetentionPolicy;
  hold?: LegalHold;
}

export async function retentionView(core: Core, tenant: string): Promise<RetentionView> {
  const own = await core.store.retention.get(tenant);
  const defaults = gatewayPolicy(core);
  const rule = ruleOf(defaults, own);
  return { tenant, policy: rule.policy, ...(own?.policy ? { own: own.policy } : {}), defaults, ...(own?.hold ? { hold: own.hold } : {}) };
}

/** A number of days a policy may say: a whole number from 1 to `MOST_DAYS`, or null (for ever). */
export function daysProblem(name: string, days: unknown): string | undefined {
  if (days === null || (Number.isInteger(days) && (days as number) >= 1 && (days as number) <= MOST_DAYS)) return undefined;
  return `${name} must be a whole number of days from 1 to ${MOST_DAYS}, or null to keep for ever`;
}

/** Sets (or, with null, removes) the tenant's own policy; its hold stays as it is. */
export async function setRetention(core: Core, tenant: string, policy: TenantPolicy | null): Promise<Result<RetentionView>> {
  for (const [name, days] of Object.entries(policy ?? {})) {
    const problem = daysProblem(name, days);
    if (problem) return refuse('invalid_input', problem);
  }
  await core.store.retention.set(tenant, 'policy', policy && Object.keys(policy).length > 0 ? policy : undefined);
  core.recentRetention.forget(tenant);
  return ok(await retentionView(core, tenant));
}

/** Places (or, undefined, lifts) a legal hold on all of a tenant's content. */
export async function holdTenant(core: Core, tenant: string, hold: LegalHold | undefined): Promise<RetentionView> {
  await core.store.retention.set(tenant, 'hold', hold);
  core.recentRetention.forget(tenant);
  return retentionView(core, tenant);
}

/** Places (or, undefined, lifts) a legal hold on one thread; `thread_not_found` when the tenant has none by that id. */
export async function holdThread(core: Core, ref: ThreadRef, hold: LegalHold | undefined): Promise<Result<{ threadId: string; tenant: string; hold?: LegalHold }>> {
  const thread = await core.store.retention.holdThread(ref, hold);
  if (!thread) return refuse('thread_not_found', `tenant "${ref.tenant}" has no thread "${ref.threadId}"`);
  return ok({ tenant: thread.tenant, threadId: thread.threadId, ...(thread.hold ? { hold: thread.hold } : {}) });
}
