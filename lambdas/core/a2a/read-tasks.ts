import type { Task, TaskState } from '@a2a-js/sdk';
import type { Core } from '../deps.js';
import { ok, refuse, type Result } from '../errors.js';
import type { Run } from '../model.js';
import { findTask, type A2aCore, type Caller } from './deps.js';
import { readTask } from './lineage.js';
import { liveRuns } from '../retention/expiry.js';
import type { TaskView } from './projection.js';

export interface TaskQuery {
  contextId?: string;
  state?: TaskState;
  pageSize?: number;
  pageToken?: string;
  statusTimestampAfter?: string;
  view: TaskView;
}

export interface TaskPage {
  tasks: Task[];
  nextPageToken?: string;
  pageSize: number;
  /** The tasks of this page: the index keeps no count (a count would read every entry it counts). */
  totalSize: number;
}

export async function getTask(core: Core, caller: Caller, taskId: string, view?: TaskView): Promise<Result<Task>> {
  const { store } = core;
  const found = await findTask(core, caller, taskId);
  return found.ok ? ok(await readTask(store, found.value, view)) : found;
}

/** The caller's tasks at its agent, as the query narrows them, a page at a time. */
export async function listTasks(core: A2aCore, caller: Caller, query: TaskQuery): Promise<Result<TaskPage>> {
  const { store } = core;
  const { settings } = core.a2a;
  const pageSize = query.pageSize ?? settings.defaultPageSize;
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > settings.maxPageSize) {
    return refuse('invalid_input', `pageSize must be a whole number from 1 to ${settings.maxPageSize}`);
  }
  const after = query.statusTimestampAfter ? Date.parse(query.statusTimestampAfter) : undefined;
  if (after !== undefined && Number.isNaN(after)) return refuse('invalid_input', 'statusTimestampAfter must be an ISO 8601 time');
  const token = query.pageToken ?? '';
  let cursor: string | undefined;
  if (token !== '') {
    cursor = /^t\.(.+)$/s.exec(token)?.[1];
    if (cursor === undefined) return refuse('invalid_input', 'pageToken is not a page token of this listing');
  }
  // The index narrows the listing; each task it names is read whole, and its projected status
  // has the last word (a write the index has not taken yet cannot list a task under a state it left).
  const matches = (task: Task) =>
    (query.state === undefined || task.status?.state === query.state) &&
    (after === undefined || Date.parse(task.status?.timestamp ?? '') > after);
  const tasks: Task[] = [];
  do {
    let page: { runs: Run[]; cursor?: string };
    try {
      page = await store.tasks.list(caller.principal.tenant, {
        agentId: caller.agentId,
        ...(query.contextId ? { threadId: query.contextId } : {}),
        ...(query.state !== undefined ? { state: query.state } : {}),
        ...(after !== undefined ? { stateAfter: new Date(after).toISOString() } : {}),
        limit: pageSize - tasks.length,
        cursor,
      });
    } catch (error) {
      if (error instanceof RangeError) return refuse('invalid_input', 'pageToken is not a page token this gateway issued');
      throw error;
    }
    const live = await liveRuns(core, page.runs);
    const read = await Promise.all(live.map((root) => readTask(store, root, query.view)));
    tasks.push(...read.filter(matches));
    cursor = page.cursor;
  } while (cursor !== undefined && tasks.length < pageSize);
  return ok({ tasks, ...(cursor ? { nextPageToken: `t.${cursor}` } : {}), pageSize, totalSize: tasks.length });
}
