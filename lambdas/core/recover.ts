import type { CoreDeps } from './deps.js';
import { settleAbandoned } from './dispatch-run.js';
import type { Run } from './model.js';
import { earliestExpiry } from './outcome.js';

export interface Recovery {
  orphaned: number;
  requeued: number;
  rearmed: number;
}

/**
 * Start-up on one machine: runs left running by a process that died are failed
 * `orphaned_by_restart`; queued runs are queued again in arrival order; the threads' place
 * counts are set from the runs; waiting runs get their ask timers back.
 */
export async function recover(deps: CoreDeps): Promise<Recovery> {
  const { store } = deps;
  const orphans = [...(await store.listRunsByStatus('running')), ...(await store.listRunsByStatus('cancelling'))];
  for (const run of orphans) {
    await settleAbandoned(deps, run, 'orphaned_by_restart', 'the gateway restarted while this run was running');
  }

  const queued = (await store.listRunsByStatus('queued')).sort(byArrival);
  const perThread = new Map<string, number>();
  for (const run of orphans) perThread.set(run.threadId, 0);
  for (const run of queued) perThread.set(run.threadId, (perThread.get(run.threadId) ?? 0) + 1);
  for (const [threadId, count] of perThread) await store.setUnsettled(threadId, count);
  for (const run of queued) await deps.queue.enqueue({ threadId: run.threadId, runId: run.runId });

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
