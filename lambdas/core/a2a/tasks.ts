import type { Core } from '../deps.js';
import type { Run } from '../model.js';
import type { PushSender } from '../ports.js';
import { cancelTask } from './cancel-task.js';
import { DEFAULT_A2A_SETTINGS, type A2aCore, type A2aSettings, type Caller } from './deps.js';
import type { TaskView } from './projection.js';
import { createPushConfig, deletePushConfig, getPushConfig, listPushConfigs, type PushTarget } from './push-configs.js';
import { getTask, listTasks, type TaskQuery } from './read-tasks.js';
import { sendMessage, type SendMessage } from './send-message.js';
import { awaitTask, stream, subscribe } from './subscribe.js';

// What the door and the gateway name beside the use cases: who calls them, a push target, the settings.
export type { A2aSettings, Caller } from './deps.js';
export type { PushTarget } from './push-configs.js';

/**
 * The A2A door's use cases over the core: a task is the lineage of a root run and its answers
 * (task id = root run id, contextId = thread id), and every answer comes from the one record.
 */
export function createTasks(core: Core, options: { push?: PushSender; settings?: Partial<A2aSettings> } = {}) {
  const settings: A2aSettings = { ...DEFAULT_A2A_SETTINGS, ...options.settings };
  const a2a: A2aCore = { ...core, a2a: { settings, ...(options.push ? { push: options.push } : {}) } };
  return {
    settings,
    /** Whether push notifications are sent (a sender is wired). */
    pushes: options.push !== undefined,
    sendMessage: (request: SendMessage) => sendMessage(a2a, request),
    getTask: (caller: Caller, taskId: string, view?: TaskView) => getTask(a2a, caller, taskId, view),
    awaitTask: (root: Run, signal?: AbortSignal) => awaitTask(a2a, root, signal),
    stream: (root: Run, signal?: AbortSignal) => stream(a2a, root, signal),
    subscribe: (caller: Caller, taskId: string, cursor: string | undefined, signal?: AbortSignal) => subscribe(a2a, caller, taskId, cursor, signal),
    /** `proof`: the request's `metadata.cancel`, needed for a task on a thread bound to its head. */
    cancelTask: (caller: Caller, taskId: string, proof?: unknown, cancelled?: (run: Run) => void) => cancelTask(a2a, caller, taskId, proof, cancelled),
    listTasks: (caller: Caller, query: TaskQuery) => listTasks(a2a, caller, query),
    createPushConfig: (caller: Caller, taskId: string, target: PushTarget) => createPushConfig(a2a, caller, taskId, target),
    getPushConfig: (caller: Caller, taskId: string, configId: string) => getPushConfig(a2a, caller, taskId, configId),
    listPushConfigs: (caller: Caller, taskId: string) => listPushConfigs(a2a, caller, taskId),
    deletePushConfig: (caller: Caller, taskId: string, configId: string) => deletePushConfig(a2a, caller, taskId, configId),
  };
}

export type Tasks = ReturnType<typeof createTasks>;
