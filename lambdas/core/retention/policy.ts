import type { LegalHold, Thread } from '../model.js';

export type { LegalHold } from '../model.js';

/**
 * How long the record keeps a tenant's data (issue 27), in days; `null` keeps it for ever. Content
 * (threads, their runs and events) is counted from a thread's last activity; usage and audit
 * records, which billing and audit need past the conversation, from their own time.
 */
export interface RetentionPolicy {
  contentDays: number | null;
  usageDays: number | null;
  auditDays: number | null;
}

/**
 * What a tenant sets of its own: a field left out takes the gateway's. Audit records are the
 * gateway's alone: a minute's records of every tenant are sealed in one signed segment, and a
 * segment goes whole, so one tenant's shorter audit retention would break the others' proof.
 */
export type TenantPolicy = Partial<Pick<RetentionPolicy, 'contentDays' | 'usageDays'>>;

/** The gateway's default: content and usage for ever, audit records 400 days (a year and the audit that follows it). */
export const DEFAULT_RETENTION: RetentionPolicy = { contentDays: null, usageDays: null, auditDays: 400 };

/** A tenant's own retention and its hold, as the record keeps them; the rest of a tenant (its budget, counters) is `Tenant`'s. */
export interface TenantRetention {
  tenant: string;
  policy?: TenantPolicy;
  hold?: LegalHold;
}

export const DAY_MS = 86_400_000;

/** The longest a setting may say: 100 years (a longer one is a mistake, not a policy). */
export const MOST_DAYS = 36_500;

/** The policy in force for a tenant: its own fields over the gateway's. */
export function policyOf(defaults: RetentionPolicy, own: TenantPolicy | undefined): RetentionPolicy {
  return { ...defaults, ...own };
}

/** The time before which records of `days` are gone (ISO), or undefined when they are kept for ever. */
export function cutoffOf(days: number | null, now: number): string | undefined {
  return days === null ? undefined : new Date(now - days * DAY_MS).toISOString();
}

/** When a thread last had activity: its latest run settled (before any did, or for a thread written before this was kept: when it was made). */
export function lastActivityOf(thread: Thread): string {
  return thread.lastActivityAt ?? thread.createdAt;
}

/**
 * Whether a thread's retention has ended (`now`, epoch ms): its tenant's content days passed since
 * its last activity, no hold covers it, and nothing of it is still going on: no run holds one of
 * its places (queued or running) and its waiting run, if any, has no open ask (`waitingOpen`,
 * asked only when the rest says expired, since it costs a read).
 */
export async function threadExpired(
  thread: Thread,
  retention: { policy: RetentionPolicy; tenantHold?: LegalHold },
  now: number,
  waitingOpen: (runId: string) => Promise<boolean>,
): Promise<boolean> {
  const cutoff = cutoffOf(retention.policy.contentDays, now);
  if (cutoff === undefined || retention.tenantHold || thread.hold || thread.unsettled > 0) return false;
  if (lastActivityOf(thread) >= cutoff) return false;
  return thread.waitingRunId === undefined || !(await waitingOpen(thread.waitingRunId));
}
