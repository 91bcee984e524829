import type { StreamResponse } from '@a2a-js/sdk';
import type { Core } from '../deps.js';
import { ok, refuse, type Result } from '../errors.js';
import type { Run } from '../model.js';
import { parseCursor } from './cursor.js';
import { findTask, type Caller } from './deps.js';
import { followTask, lineageOf, readTask } from './lineage.js';
import { TERMINAL_TASK_STATES } from './vocabulary.js';

/** Waits until the task leaves SUBMITTED and WORKING (done, or waiting for its caller). */
export async function awaitTask(core: Core, root: Run, signal?: AbortSignal): Promise<void> {
  for await (const _update of followTask(core, root, undefined, signal)) {
    // The stream ends when the task settles; its updates are not needed here.
  }
}

/** A task's stream from now on: the Task, then its updates until it settles (SendStreamingMessage). */
export function stream(core: Core, root: Run, signal?: AbortSignal): AsyncGenerator<StreamResponse> {
  return followTask(core, root, undefined, signal);
}

/**
 * A task's stream: the Task, then its updates. With a cursor (the `cursor` of an update the
 * caller saw) the stream resumes after it, even on a task that has ended since; without one, a
 * task that has ended has nothing more to say (A2A 1.0: UnsupportedOperation).
 */
export async function subscribe(core: Core, caller: Caller, taskId: string, cursor: string | undefined, signal?: AbortSignal): Promise<Result<AsyncGenerator<StreamResponse>>> {
  const { store } = core;
  const found = await findTask(core, caller, taskId);
  if (!found.ok) return found;
  const root = found.value;
  if (cursor === undefined) {
    const task = await readTask(store, root, { historyLength: 0, includeArtifacts: false });
    if (task.status && TERMINAL_TASK_STATES.has(task.status.state)) {
      return refuse('task_settled', `task "${taskId}" has ended: there is nothing to subscribe to (resume with a cursor to replay)`);
    }
    return ok(followTask(core, root, undefined, signal));
  }
  const after = parseCursor(cursor);
  if (!after || !(await lineageOf(store, root)).some((run) => run.runId === after.runId)) {
    return refuse('invalid_input', `"${cursor}" is not a cursor of task "${taskId}": use metadata.funduq.cursor of an update of this task`);
  }
  return ok(followTask(core, root, after, signal));
}
