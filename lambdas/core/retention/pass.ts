import { auditId, FUNDUQ_ACTOR, type AuditRecord } from '../audit/record.js';
import { auditSystem } from '../audit/write.js';
import type { Core } from '../deps.js';
import type { PurgedContent } from '../ports.js';
import { gatewayPolicy, isExpired, ruleOf, usageCutoff } from './expiry.js';
import { cutoffOf, lastActivityOf, type RetentionPolicy, type TenantRetention } from './policy.js';

/** What one pass deleted. */
export interface RetentionPassReport {
  threads: number;
  runs: number;
  events: number;
  usageRecords: number;
  auditRecords: number;
}

/** No record of funduq is older than funduq: listings by time start here. */
const EARLIEST = '2020-01-01T00:00:00.000Z';

/** How far before the audit cutoff a pass looks for records never sealed. */
const UNSEALED_LOOKBACK_MS = 7 * 86_400_000;

/** How much one pass takes on (a Lambda's pass ends well inside its time); the next takes the rest. */
const PASS_LIMIT = { threads: 200, usage: 5_000, segments: 100, page: 100 };

/**
 * Deletes what retention ended (issue 27): threads past their tenant's content days with their
 * runs and events (nothing held, nothing still going on), usage records past the usage days, and
 * audit segments past the gateway's audit days with their records. Each deletion leaves an audit
 * record of what kind went and how much. Run by one machine every hour and by the sweep on AWS; a
 * pass cut short leaves the rest to the next.
 */
export async function applyRetention(core: Core): Promise<RetentionPassReport> {
  const report: RetentionPassReport = { threads: 0, runs: 0, events: 0, usageRecords: 0, auditRecords: 0 };
  // One pass at a time, across every process (two sweeps' environments may overlap): two passes
  // finishing the same deletion cut short would each write its record. The claim lapses, so a pass
  // that died holds no one up past its bound.
  const nowSeconds = Math.floor(core.clock.now() / 1000);
  const claim = { key: PASS_CLAIM, runId: core.ids.newId(), threadId: '', expiresAt: nowSeconds + PASS_BOUND_SECONDS };
  if ((await core.store.claims.take(claim, nowSeconds)).runId !== claim.runId) return report;
  try {
    const defaults = gatewayPolicy(core);
    const owns = new Map((await core.store.retention.list()).map((own) => [own.tenant, own]));
    await deleteThreads(core, defaults, owns, report);
    await deleteUsage(core, defaults, owns, report);
    await deleteAudit(core, defaults, report);
    return report;
  } finally {
    await core.store.claims.release(claim);
  }
}

/** The claim a pass holds while it runs (no message's claim: those are keyed by tenant, agent and message). */
const PASS_CLAIM = 'funduq:retention-pass';

/** Longer than a pass may run anywhere: a Lambda function's most (15 minutes). */
const PASS_BOUND_SECONDS = 15 * 60;

/** The shortest of the days in force for `field` (the gateway's, and every tenant's own), or undefined when all keep for ever. */
function shortest(defaults: RetentionPolicy, owns: ReadonlyMap<string, TenantRetention>, field: 'contentDays' | 'usageDays'): number | undefined {
  const days = [defaults[field], ...[...owns.values()].map((own) => (own.policy && field in own.policy ? own.policy[field]! : defaults[field]))];
  const set = days.filter((d): d is number => d !== null);
  return set.length > 0 ? Math.min(...set) : undefined;
}

async function deleteThreads(core: Core, defaults: RetentionPolicy, owns: ReadonlyMap<string, TenantRetention>, report: RetentionPassReport): Promise<void> {
  const days = shortest(defaults, owns, 'contentDays');
  if (days === undefined) return;
  const now = core.clock.now();
  const before = cutoffOf(days, now)!;
  let cursor: string | undefined;
  do {
    const page = await core.store.retention.idleThreads(before, PASS_LIMIT.page, cursor);
    for (const thread of page.threads) {
      const rule = ruleOf(defaults, owns.get(thread.tenant));
      if (!(await isExpired(core, thread, rule))) continue;
      const at = new Date(core.clock.now()).toISOString();
      const record = (content: PurgedContent): AuditRecord => ({
        id: auditId(at, core.ids.newId()),
        at,
        tenant: thread.tenant,
        actor: FUNDUQ_ACTOR,
        action: 'retention.deleted',
        target: `thread:${thread.threadId}`,
        outcome: 'ok',
        detail: { kind: 'content', runs: content.runs, events: content.events, lastActivityAt: lastActivityOf(thread), contentDays: rule.policy.contentDays },
      });
      const purged = await core.store.retention.purgeThread(thread, record);
      if (!purged) continue;
      report.threads += 1;
      report.runs += purged.runs;
      report.events += purged.events;
      if (report.threads >= PASS_LIMIT.threads) return;
    }
    cursor = page.cursor;
  } while (cursor !== undefined);
}

async function deleteUsage(core: Core, defaults: RetentionPolicy, owns: ReadonlyMap<string, TenantRetention>, report: RetentionPassReport): Promise<void> {
  const days = shortest(defaults, owns, 'usageDays');
  if (days === undefined) return;
  const now = core.clock.now();
  const cutoffs = new Map<string, string | undefined>();
  const cutoffFor = (tenant: string) => {
    if (!cutoffs.has(tenant)) cutoffs.set(tenant, usageCutoff(ruleOf(defaults, owns.get(tenant)), now));
    return cutoffs.get(tenant);
  };
  const gone = new Map<string, string[]>();
  let cursor: string | undefined;
  let seen = 0;
  do {
    const page = await core.store.usage.list({ from: EARLIEST, to: cutoffOf(days, now)!, limit: PASS_LIMIT.page, cursor });
    for (const record of page.records) {
      const cutoff = cutoffFor(record.tenant);
      if (cutoff !== undefined && record.endedAt < cutoff) gone.set(record.tenant, [...(gone.get(record.tenant) ?? []), record.runId]);
    }
    seen += page.records.length;
    cursor = page.cursor;
  } while (cursor !== undefined && seen < PASS_LIMIT.usage);
  // Each deletion's record first: a pass that dies after it deletes them in the next, under a second
  // record, rather than leaving a deletion no record tells of.
  for (const [tenant, runIds] of gone) {
    await auditSystem(core, { tenant, action: 'retention.deleted', target: `tenant:${tenant}`, detail: { kind: 'usage', records: runIds.length, usageDays: ruleOf(defaults, owns.get(tenant)).policy.usageDays } });
    await core.store.usage.delete(runIds);
    report.usageRecords += runIds.length;
  }
}

/**
 * Audit records go a segment at a time, the oldest first, once the segment's newest record is past
 * the audit days: the chain then starts at the next segment, whose signature still proves the rest.
 * The newest segment stays (the next seal names it). Records never sealed (a gateway with no key)
 * go by their own time.
 */
async function deleteAudit(core: Core, defaults: RetentionPolicy, report: RetentionPassReport): Promise<void> {
  const before = cutoffOf(defaults.auditDays, core.clock.now());
  if (before === undefined) return;
  const { audit } = core.store;
  const head = await audit.lastSegment();
  const oldest = await audit.segments(0, PASS_LIMIT.segments);
  // The front of the chain, up to the first segment kept: the chain only ever loses its front.
  const kept = oldest.findIndex((segment) => segment.to >= before || segment.seq === head?.seq);
  const segments = kept < 0 ? oldest : oldest.slice(0, kept);
  // Only a gateway with no key leaves records unsealed this long; a store that lists them a day at
  // a time (DynamoDB) reads the week before the cutoff, which an hourly pass has kept clear.
  const unsealed = await audit.unsealed(PASS_LIMIT.usage, new Date(Date.parse(before) - UNSEALED_LOOKBACK_MS).toISOString(), before);
  const records = segments.reduce((sum, segment) => sum + segment.ids.length, unsealed.length);
  if (records === 0) return;
  // The record first, as for usage: a pass that dies before the deletes is done again by the next.
  await auditSystem(core, { action: 'retention.deleted', target: 'audit', detail: { kind: 'audit', records, segments: segments.length, before, auditDays: defaults.auditDays } });
  // Oldest first, each segment's records before the segment.
  for (const segment of segments) {
    await audit.delete(segment.ids);
    await audit.deleteSegment(segment.seq);
  }
  await audit.delete(unsealed.map((record) => record.id));
  report.auditRecords += records;
}
