import { runAudits } from '../audit/acts.js';
import type { TaskState } from '@a2a-js/sdk';
import type { Run } from '../model.js';
import type { RecordProjections, TaskEntry } from '../record/port.js';
import { TaskStates } from './vocabulary.js';

/**
 * A task's state as its tail run's record says it (A2A 1.0 §4.1.3): the one mapping, used by the
 * projection and by the stores' task index (so ListTasks filters by state from an index, not by
 * projecting every task). `started`: the projection has seen the queued run's RUN_STARTED.
 */
export function taskStateOf(tail: Run, started = false): TaskState {
  switch (tail.status) {
    case 'queued':
      return started ? TaskStates.WORKING : TaskStates.SUBMITTED;
    case 'running':
    case 'cancelling':
      return TaskStates.WORKING;
    case 'cancelled':
      return TaskStates.CANCELED;
    case 'failed':
      return refusedByProvider(tail) ? TaskStates.REJECTED : TaskStates.FAILED;
    case 'completed': {
      const asks = Object.values(tail.asks ?? {});
      const open = asks.filter((ask) => ask.state === 'open');
      if (open.length > 0) return open.some((ask) => ask.interrupt !== undefined && isAuthReason(ask.interrupt.reason)) ? TaskStates.AUTH_REQUIRED : TaskStates.INPUT_REQUIRED;
      if (asks.some((ask) => ask.state === 'expired')) return TaskStates.FAILED;
      if (asks.length > 0 && asks.every((ask) => ask.state === 'cancelled' && ask.closedByRunId === undefined)) return TaskStates.CANCELED;
      // Asks answered: the answer run is the lineage's next run, about to be seen.
      return asks.length > 0 ? TaskStates.SUBMITTED : TaskStates.COMPLETED;
    }
  }
}

/** When the task's state was last set: its tail run's latest moment (A2A `status.timestamp`). */
export function taskStateAt(tail: Run): string {
  return tail.endedAt ?? tail.startedAt ?? tail.createdAt;
}

/**
 * The entry of the run's task in the record's task index, as the run's write leaves it: the root's
 * makes it, a later run of the lineage (the tail from its creation on) moves its state.
 */
export function taskEntryOf(run: Run): TaskEntry {
  const { rootRunId: taskId, tenant, agentId, threadId, arrival: tailArrival } = run;
  const state = taskStateOf(run);
  const stateAt = taskStateAt(run);
  // One object, not one spread into another: every write of a run computes it.
  return run.runId === taskId
    ? { taskId, root: true, createdAt: run.createdAt, tenant, agentId, threadId, tailArrival, state, stateAt }
    : { taskId, root: false, tenant, agentId, threadId, tailArrival, state, stateAt };
}

/** What every store is built with: the task index's entries, as A2A's projection says them. */
export const recordProjections: RecordProjections = { taskEntry: taskEntryOf, auditOf: runAudits };

/** An interrupt that asks for credentials puts the task in AUTH_REQUIRED (design §5). */
function isAuthReason(reason: string): boolean {
  return /^auth(n|z|entication|orization)?([_:.\-\s]|$)/i.test(reason);
}

/** A provider that answered 4xx refused the run (but 408 and 429 say "not now", not "no"), as does a link provider's `refuse`. */
function refusedByProvider(run: Run): boolean {
  if (run.reason === 'provider_refused') return true;
  const match = /^provider_http_(4\d\d)$/.exec(run.reason ?? '');
  return match !== null && match[1] !== '408' && match[1] !== '429';
}
