import type { Task } from '@a2a-js/sdk';
import { cancelRun } from '../cancel-run.js';
import type { Core } from '../deps.js';
import { ok, refuse, type Result } from '../errors.js';
import { findTask, type Caller } from './deps.js';
import { lineageOf, readTask } from './lineage.js';
import { TaskStates } from './vocabulary.js';
import type { Run } from '../model.js';

/** Cancels a task: its latest run, the one that may still be running. `cancelled` hears of the run as the cancel left it. */
export async function cancelTask(core: Core, caller: Caller, taskId: string, proof?: unknown, cancelled?: (run: Run) => void): Promise<Result<Task>> {
  const { store } = core;
  const found = await findTask(core, caller, taskId);
  if (!found.ok) return found;
  const root = found.value;
  const tail = (await lineageOf(store, root)).at(-1) ?? root;
  const done = await cancelRun(core, tail.runId, caller.principal, proof, caller.requestId);
  if (!done.ok) {
    if (done.code !== 'task_not_cancelable') return done;
    const task = await readTask(store, root, { historyLength: 0, includeArtifacts: false });
    return refuse('task_not_cancelable', `task "${taskId}" has ended (${stateName(task)}): it can no longer be cancelled`);
  }
  cancelled?.(done.value);
  return ok(await readTask(store, root));
}

function stateName(task: Task): string {
  return Object.entries(TaskStates).find(([, state]) => state === task.status?.state)?.[0] ?? 'settled';
}
