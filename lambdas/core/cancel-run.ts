import type { AskClosing } from './answers.js';
import { isoNow, type CoreDeps } from './deps.js';
import { EventRecorder } from './event-recorder.js';
import { ok, refuse, type Result } from './errors.js';
import { isTerminal, type Principal, type Run } from './model.js';
import { cancelledEnd, openAsks } from './outcome.js';
import { releasePlaces } from './tenant-limits.js';

/**
 * Cancel is a request. A queued run is cancelled at once and never reaches its agent; a running
 * run becomes `cancelling` and its dispatcher asks the agent to stop (the record then says what
 * happened); a run waiting on asks has them cancelled. Terminal runs never change.
 */
export async function cancelRun(deps: CoreDeps, runId: string, principal: Principal): Promise<Result<Run>> {
  const { store } = deps;
  const run = await store.getRun(runId);
  if (!run || run.tenant !== principal.tenant) return refuse('run_not_found', `no run "${runId}"`);

  if (run.status === 'queued') {
    const end = cancelledEnd(undefined, run, 'cancelled_while_queued');
    const cancelled = await store.transitionRun(runId, ['queued'], {
      status: 'cancelled',
      reason: end.reason,
      cancelRequested: true,
      endedAt: isoNow(deps),
      lastSeq: end.closingEvents.length,
    });
    if (!cancelled) return cancelRun(deps, runId, principal);
    // The transition above made this the run's only writer: its dispatcher will skip it.
    const recorder = new EventRecorder(runId, 0, store, deps.feed);
    for (const event of end.closingEvents) await recorder.record(event);
    await recorder.flush();
    await releasePlaces(deps, cancelled);
    deps.feed.publish({ kind: 'status', runId, run: cancelled });
    return ok(cancelled);
  }
  if (run.status === 'running') {
    const cancelling = await store.transitionRun(runId, ['running'], { status: 'cancelling', cancelRequested: true });
    if (!cancelling) return cancelRun(deps, runId, principal);
    deps.feed.publish({ kind: 'status', runId, run: cancelling });
    return ok(cancelling);
  }
  if (run.status === 'cancelling') return ok(run);

  const open = openAsks(run);
  if (run.status === 'completed' && open.length > 0) {
    const closing: AskClosing = {};
    for (const ask of open) closing[ask.id] = { state: 'cancelled' };
    const closed = await store.closeAsks(runId, closing);
    if (!closed) return cancelRun(deps, runId, principal);
    await deps.timer.disarm(runId);
    deps.feed.publish({ kind: 'status', runId, run: closed });
    return ok(closed);
  }
  if (isTerminal(run.status)) return refuse('task_not_cancelable', `run "${runId}" has already ${run.status}`);
  return ok(run);
}
