import type { CoreDeps } from './deps.js';
import { settleAbandoned } from './dispatch-run.js';
import { threadKey, type Run } from './model.js';
import { earliestExpiry } from './outcome.js';

export interface Recovery {
  orphaned: number;
  requeued: number;
  rearmed: number;
}

/**
 * Start-up on one machine: runs left running by a process that died are failed
 * `orphaned_by_restart`; queued runs are queued again in arrival order; the threads' and the
 * tenants' place counts are set from the runs; waiting runs get their ask timers back.
 */
export async function recover(deps: CoreDeps): Promise<Recovery> {
  const { store } = deps;
  const orphans = [...(await store.listRunsByStatus('running')), ...(await store.listRunsByStatus('cancelling'))];
  for (const run of orphans) {
    await settleAbandoned(deps, run, 'orphaned_by_restart', 'the gateway restarted while this run was running');
  }

  const queued = (await store.listRunsByStatus('queued')).sort(byArrival);
  const perThread = new Map<string, { thread: Run; count: number }>();
  for (const run of orphans) perThread.set(threadKey(run), { thread: run, count: 0 });
  for (const run of queued) {
    const entry = perThread.get(threadKey(run)) ?? { thread: run, count: 0 };
    perThread.set(threadKey(run), { ...entry, count: entry.count + 1 });
  }
  for (const { thread, count } of perThread.values()) await store.setUnsettled(thread, count);
  const perTenant = new Map<string, number>();
  for (const run of queued) if (run.tenantPlace) perTenant.set(run.tenant, (perTenant.get(run.tenant) ?? 0) + 1);
  await store.setTenantPlaces(perTenant);
  for (const run of queued) await deps.queue.enqueue({ threadId: threadKey(run), runId: run.runId });

  let rearmed = 0;
  for (const run of await store.listRunsByStatus('completed')) {
    const expiry = earliestExpiry(run.asks);
    if (expiry === undefined) continue;
    await deps.timer.arm(run.runId, expiry);
    rearmed += 1;
  }
  return { orphaned: orphans.length, requeued: queued.length, rearmed };
}

function byArrival(a: Run, b: Run): number {
  return a.createdAt === b.createdAt ? a.arrival - b.arrival : a.createdAt < b.createdAt ? -1 : 1;
}
