import type { AskClosing } from './answers.js';
import type { Core } from './deps.js';
import { threadKey, type Run, type RunStatus, type ThreadRef } from './model.js';
import { earliestExpiry } from './outcome.js';
import { sweepArrivals } from './repair.js';
import type { RunStore } from './ports.js';

export interface Recovery {
  orphaned: number;
  requeued: number;
  rearmed: number;
  /** Requests that died before recording their run, whose places and asks went back. */
  givenBack: number;
}

/** Runs read at once: a run holds its input (up to 350 KB), and a crash may leave hundreds queued. */
const BATCH = 50;

/** What re-queueing a run needs of it, kept for every queued run while the rest of each page is let go. */
type Queued = Pick<Run, 'tenant' | 'threadId' | 'runId' | 'addressedRunId' | 'tenantPlace' | 'createdAt' | 'arrival' | 'context'>;

/**
 * Start-up on one machine: runs left running by a process that died are failed
 * `orphaned_by_restart`; queued runs are queued again in arrival order; the threads' and the
 * tenants' place counts are set from the runs; waiting runs get their ask timers back; requests
 * that died before recording their run give back what they took (the sweep AWS runs on a
 * schedule, `sweepArrivals`). The record
 * is read in pages of `BATCH` runs, so what a start holds does not grow with what a crash left.
 */
export async function recover(core: Core): Promise<Recovery> {
  const { store } = core;
  // Nothing is in flight at start: every request still noted died before its run was recorded (or before forgetting it).
  const swept = await sweepArrivals(core, new Date(core.clock.now() + 1).toISOString());
  const perThread = new Map<string, { thread: ThreadRef; holders: string[] }>();
  let orphaned = 0;
  for (const status of ['running', 'cancelling'] as const) {
    for await (const runs of pages(store, status)) {
      for (const run of runs) {
        await core.ledger.abandon(run, 'orphaned_by_restart', 'the gateway restarted while this run was running');
        perThread.set(threadKey(run), { thread: { tenant: run.tenant, threadId: run.threadId }, holders: [] });
        orphaned += 1;
      }
    }
  }

  const queued: Queued[] = [];
  for await (const runs of pages(store, 'queued')) {
    for (const { tenant, threadId, runId, addressedRunId, tenantPlace, createdAt, arrival, context } of runs) {
      queued.push({ tenant, threadId, runId, addressedRunId, tenantPlace, createdAt, arrival, context });
    }
  }
  queued.sort(byArrival);
  for (const run of queued) {
    const entry = perThread.get(threadKey(run)) ?? { thread: { tenant: run.tenant, threadId: run.threadId }, holders: [] };
    perThread.set(threadKey(run), { ...entry, holders: [...entry.holders, run.runId] });
  }
  for (const { thread, holders } of perThread.values()) await store.threads.setPlaces(thread, holders);
  const perTenant = new Map<string, string[]>();
  for (const run of queued) if (run.tenantPlace) perTenant.set(run.tenant, [...(perTenant.get(run.tenant) ?? []), run.runId]);
  await store.tenants.setPlaces(perTenant);
  // No link run is on offer or held after a restart (they were failed above): no provider holds a place.
  await store.providers.resetPlaces();
  for (const run of queued) await core.ledger.enqueue(run, true);

  let rearmed = 0;
  for (const status of ['completed', 'failed', 'cancelled'] as const) {
    for await (const runs of pages(store, status)) {
      for (const run of runs) {
        // A run whose end was written, but not all that its end calls for (its closing events, its
        // usage record, its thread's waiting run): done now, by the repair AWS runs from the record's stream.
        if (run.closingEvents) await core.ledger.repairEnd(run);
        await reopenLostAnswers(core, run);
        if (run.status !== 'completed') continue;
        const expiry = earliestExpiry(run.asks);
        if (expiry === undefined) continue;
        await core.timer.arm(run.runId, expiry, run.asksReopened, run.context);
        rearmed += 1;
      }
    }
  }
  return { orphaned, requeued: queued.length, rearmed, givenBack: swept.givenBack };
}

/**
 * Asks closed for an answering run that was never recorded (the process died between the two
 * writes): nothing is in flight at start, so no answer can still be on its way; they open again.
 */
async function reopenLostAnswers(core: Core, run: Run): Promise<void> {
  const lost: AskClosing = {};
  for (const [askId, ask] of Object.entries(run.asks ?? {})) {
    if (ask.state !== 'open' && ask.state !== 'expired' && ask.closedByRunId !== undefined && !(await core.store.runs.get(ask.closedByRunId))) {
      lost[askId] = { state: ask.state, closedByRunId: ask.closedByRunId };
    }
  }
  if (Object.keys(lost).length > 0) await core.ledger.reopenAsks(run.runId, lost);
}

async function* pages(store: RunStore, status: RunStatus): AsyncGenerator<Run[]> {
  let cursor: string | undefined;
  do {
    const page = await store.runs.pageByStatus(status, { limit: BATCH, ...(cursor !== undefined ? { cursor } : {}) });
    yield page.runs;
    cursor = page.cursor;
  } while (cursor !== undefined);
}

function byArrival(a: Queued, b: Queued): number {
  return a.createdAt === b.createdAt ? a.arrival - b.arrival : a.createdAt < b.createdAt ? -1 : 1;
}
