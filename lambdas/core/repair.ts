import { taskEntryOf } from './a2a/task-state.js';
import type { AskClosing } from './answers.js';
import { cancelAudit, submissionAudit } from './audit/acts.js';
import type { Core } from './deps.js';
import type { Arrival } from './model.js';

export type RepairResult = 'enqueued' | 'settle_completed' | 'released' | 'nothing';

/**
 * What a run's record calls for, done again from the record alone, for a function that died
 * between a write and its side effect. A queued ordinary run is handed to its thread's queue
 * (the queue deduplicates by run id, and a message whose run is no longer queued is skipped, so
 * a second message is harmless); a settled run whose record still holds closing events has its
 * settle completed (`Ledger.repairEnd`), and a settled run's thread-queue delivery is let go. A
 * queued or settled run's task index entry is written again when it is behind the run. A queued
 * interjection is not handed over: it is dispatched beside its thread's queue, where a second
 * dispatch would find it running and fail it.
 */
export async function repairRun(core: Core, runId: string): Promise<RepairResult> {
  const run = await core.store.runs.get(runId);
  if (!run) return 'nothing';
  // The audit records the run's record holds the facts of, in case their writer died after the
  // run's write (a store with no transaction writes them right after it): its submission once it
  // is recorded, the cancel that changed it. Their ids make a second write nothing.
  // Read first: a read costs a fifth of a refused write, and most are found.
  const audits = [submissionAudit(run), ...(run.cancelRequest ? [cancelAudit(run)!] : [])];
  const found = new Set((await core.store.audit.get(audits.map((record) => record.id))).map((record) => record.id));
  for (const record of audits) if (!found.has(record.id)) await core.store.audit.append(record);
  if (run.status === 'queued') {
    // An interjection may wait queued for its sweep: its task is listed meanwhile.
    await core.store.tasks.reindex(taskEntryOf(run));
    if (run.addressedRunId !== undefined) return 'nothing';
    await core.ledger.enqueue(run, true);
    return 'enqueued';
  }
  if (run.status !== 'completed' && run.status !== 'failed' && run.status !== 'cancelled') return 'nothing';
  if (run.closingEvents) await core.ledger.repairEnd(run);
  // A settle is a run's last write: no later one would bring its task's index entry up to it.
  await core.store.tasks.reindex(taskEntryOf(run));
  // Its dispatcher may have died after the settle, holding the thread's next message back until
  // the delivery's visibility timeout: the settled run's message goes now (the dispatcher's own
  // delete, if it lives, finds it gone).
  if (run.receipt !== undefined) await core.queue.release(run.receipt);
  return run.closingEvents ? 'settle_completed' : run.receipt !== undefined ? 'released' : 'nothing';
}

/** Arrivals handled per page, and pages per sweep (a page of arrivals just forgotten may be listed again). */
const SWEEP_PAGE = 100;
const SWEEP_PAGES = 10;

export interface Sweep {
  /** Arrivals whose run was recorded: only their note was left. */
  recorded: number;
  /** Arrivals whose run never was: what they took was given back. */
  givenBack: number;
  /** Of the recorded, interjections still queued: handed to their thread's queue. */
  handedOver: number;
}

/**
 * Requests noted before `before` and never forgotten: their function died between taking
 * something and recording their run (or before forgetting them). A request whose run exists is
 * forgotten (an interjection still queued is handed to its thread's queue first: its door died
 * before handing it over); one whose run does not gives back all it may have taken: the asks it closed
 * (open again, their timer armed again), the thread it opened or the thread's place it holds, its
 * tenant's place. The sweep claims a note first, so a repeat of the request either noted itself
 * before (the claim fails: the repeat goes on with what was taken) or is refused its note until
 * the sweep is done; each give-back is conditional on what it holds, so a sweep done twice, or two
 * at once, give back nothing twice. `before` must be far enough back that no live
 * request noted then can still be on its way (the doors' function timeout, on AWS).
 */
export async function sweepArrivals(core: Core, before: string): Promise<Sweep> {
  const sweep: Sweep = { recorded: 0, givenBack: 0, handedOver: 0 };
  for (let page = 0; page < SWEEP_PAGES; page++) {
    const arrivals = await core.store.arrivals.list(before, SWEEP_PAGE);
    for (const arrival of arrivals) {
      // A repeat of the request noted since is under way (or another sweep took it): it is theirs.
      if (!(await core.store.arrivals.claim(arrival))) continue;
      const run = await core.store.runs.get(arrival.runId);
      if (run) {
        sweep.recorded += 1;
        // An interjection its door recorded and never handed over (the repair leaves interjections
        // alone): it becomes its thread's next ordinary run, as one that came too late does.
        if (run.status === 'queued' && run.addressedRunId !== undefined) {
          await core.ledger.enqueue(run, true);
          sweep.handedOver += 1;
        }
      } else {
        await giveBack(core, arrival);
        sweep.givenBack += 1;
      }
      await core.store.arrivals.forget(arrival.runId);
    }
    if (arrivals.length < SWEEP_PAGE) break;
  }
  return sweep;
}

async function giveBack(core: Core, arrival: Arrival): Promise<void> {
  const waiting = arrival.answers === undefined ? undefined : await core.store.runs.get(arrival.answers);
  const closing: AskClosing = {};
  for (const [askId, ask] of Object.entries(waiting?.asks ?? {})) {
    if (ask.state !== 'open' && ask.closedByRunId === arrival.runId) closing[askId] = { state: ask.state, closedByRunId: arrival.runId };
  }
  if (waiting && Object.keys(closing).length > 0) await core.ledger.reopenAsks(waiting.runId, closing);
  await core.store.threads.abandon(arrival, arrival.runId);
  await core.store.tenants.releasePlace(arrival.tenant, arrival.runId);
}
