import type { StreamResponse, Task } from '@a2a-js/sdk';
import type { Core, CoreDeps } from '../deps.js';
import { followRun } from '../follow-run.js';
import { isTerminal, type Run, type StoredEvent } from '../model.js';
import { logOf } from '../log.js';
import type { RunStore } from '../ports.js';
import type { TaskCursor } from './cursor.js';
import { beforeEvents, projectTask, TaskProjection, type TaskView } from './projection.js';
import { SETTLED_TASK_STATES } from './vocabulary.js';

/** A task's runs in arrival order: the root run and its answers. */
export async function lineageOf(store: RunStore, root: Run): Promise<Run[]> {
  const runs = await store.runs.listOfThread(root);
  return runs.filter((run) => run.rootRunId === root.runId);
}

/** The task as the record says now: every run of the lineage with its stored events. */
export async function readTask(store: RunStore, root: Run, view?: TaskView): Promise<Task> {
  const lineage = await lineageOf(store, root);
  const logs = await Promise.all(lineage.map((run) => logOf(store, run)));
  return projectTask(
    root,
    lineage.map((run, i) => ({ run, events: logs[i] })),
    view,
  );
}

/**
 * A task as a stream (A2A SendStreamingMessage, SubscribeToTask): first the Task as it stood at
 * `after` (or as it stands now), then every update the record gains, until the task settles (done,
 * or waiting for its caller). Updates come from the same projection a read uses, fed by the runs'
 * stored events as `followRun` reads them: every update is in the record before anyone sees it.
 */
export async function* followTask(
  deps: Pick<CoreDeps, 'store' | 'feed'> & Pick<Core, 'lapse'>,
  root: Run,
  after: TaskCursor | undefined,
  signal?: AbortSignal,
): AsyncGenerator<StreamResponse> {
  const { store } = deps;
  const projection = new TaskProjection(root.runId, root.threadId);
  const lineage = await lineageOf(store, root);
  const cursorRun = after === undefined ? -1 : lineage.findIndex((run) => run.runId === after.runId);
  let snapshot: StreamResponse | undefined;
  const replay: StreamResponse[] = [];
  const take = () => (snapshot ??= { payload: { $case: 'task', value: projection.task() } });
  const beyond = (index: number, seq: number) => after !== undefined && (index > cursorRun || (index === cursorRun && seq > after.seq));

  const note = (updates: StreamResponse[]) => {
    if (snapshot) replay.push(...updates);
  };
  // As replayRun, but an update past the cursor is kept for the resumed reader.
  let seen = 0;
  for (const [index, run] of lineage.entries()) {
    if (beyond(index, 0)) take();
    note(projection.observeRun(beforeEvents(run)));
    const events = unbroken(await logOf(store, run));
    for (const stored of events) {
      if (beyond(index, stored.seq)) take();
      note(projection.applyEvent(stored));
    }
    // The run's end carries its last event's cursor; a reader resuming there may not have seen it.
    if (beyond(index, Number.POSITIVE_INFINITY)) take();
    note(projection.observeRun(run));
    seen = events.at(-1)?.seq ?? 0;
  }
  yield take();
  yield* replay;

  let tail = lineage.at(-1) ?? root;
  while (!signal?.aborted) {
    if (!isTerminal(tail.status) || seen < (tail.lastSeq ?? 0)) {
      for await (const stored of followRun(deps, tail.runId, seen, signal)) {
        seen = stored.seq;
        yield* projection.applyEvent(stored);
      }
      if (signal?.aborted) return;
      tail = (await store.runs.get(tail.runId)) ?? tail;
      yield* projection.observeRun(tail);
    }
    if (SETTLED_TASK_STATES.has(projection.state)) return;
    // Answered asks: the lineage goes on with the answering run, which may be only now recorded.
    const next = (await lineageOf(store, root)).find((run) => run.arrival > tail.arrival);
    if (!next) return;
    tail = next;
    seen = 0;
    yield* projection.observeRun(next);
  }
}

/**
 * The events up to the first gap. A run's batches are written in parallel, so a later seq can be
 * stored before an earlier one; the live reader (`followRun`) picks up from the gap.
 */
function unbroken(events: StoredEvent[]): StoredEvent[] {
  const gap = events.findIndex((stored, i) => stored.seq !== i + 1);
  return gap < 0 ? events : events.slice(0, gap);
}
