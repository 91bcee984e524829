import type { Message, StreamResponse, Task, TaskState } from '@a2a-js/sdk';
import type { RunAgentInput } from '@ag-ui/core';
import { cancelRun } from '../cancel-run.js';
import type { Core } from '../deps.js';
import { ok, refuse, type Refusal, type Result } from '../errors.js';
import { callerIdProblem, type Agent, type MessageClaim, type Principal, type PushConfig, type Run, type Thread } from '../model.js';
import { openAsks } from '../outcome.js';
import type { PushSender } from '../ports.js';
import { callerInput } from '../run-input.js';
import { storableProblem } from '../storable.js';
import { classify, classifyAnswer, refuseExpired, startLanded, type Landing, type Place } from '../start-run.js';
import { isoNow } from '../time.js';
import { parseCursor } from './cursor.js';
import { answerInput, ordinaryInput, type Landing as InboundLanding } from './inbound.js';
import { followTask, lineageOf, readTask } from './lineage.js';
import type { TaskView } from './projection.js';
import { Roles, TaskStates, TERMINAL_TASK_STATES } from './vocabulary.js';

export interface A2aSettings {
  /** How long a message id stays taken in its context: a repeat within it returns the first task (A2A idempotency). */
  messageIdTtlSeconds: number;
  /** ListTasks page size when the caller names none (A2A 1.0: 50). */
  defaultPageSize: number;
  maxPageSize: number;
}

export const DEFAULT_A2A_SETTINGS: A2aSettings = { messageIdTtlSeconds: 24 * 60 * 60, defaultPageSize: 50, maxPageSize: 100 };

/** Who asks, at which agent's A2A endpoint. */
export interface Caller {
  agentId: string;
  principal: Principal;
  /** The agent as the door read it for this request (its card), so a send need not read it again. */
  agent?: Agent;
}

/** A push target as a caller gives it (A2A `TaskPushNotificationConfig` less the task). */
export interface PushTarget {
  configId?: string;
  url: string;
  token?: string;
  authentication?: { scheme: string; credentials?: string };
}

export interface SendMessage extends Caller {
  message: Message;
  /** The request's `metadata`: the run's `forwardedProps`. */
  metadata?: Record<string, unknown>;
  /** A push config sent with the message (`configuration.taskPushNotificationConfig`). */
  push?: PushTarget;
}

export interface Sent {
  /** The task: its root run. */
  root: Run;
  /** The run the message started (or, for a repeated message id, the one the first started). */
  run: Run;
  repeated: boolean;
}

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

/**
 * The A2A door's use cases over the core: a task is the lineage of a root run and its answers
 * (task id = root run id, contextId = thread id), and every answer comes from the one record.
 */
export function createTasks(core: Core, options: { push?: PushSender; settings?: Partial<A2aSettings> } = {}) {
  const { store } = core;
  const settings: A2aSettings = { ...DEFAULT_A2A_SETTINGS, ...options.settings };

  async function findTask(caller: Caller, taskId: string): Promise<Result<Run>> {
    const root = taskId ? await store.runs.getOf(caller.principal.tenant, taskId) : undefined;
    // An answer run is part of a task, not a task: only roots are found by id.
    if (!root || root.agentId !== caller.agentId || root.rootRunId !== root.runId) {
      return refuse('run_not_found', `no task "${taskId}" at agent "${caller.agentId}"`);
    }
    return ok(root);
  }

  async function sendMessage(request: SendMessage): Promise<Result<Sent>> {
    const { message, principal, agentId } = request;
    if (!message.messageId) return refuse('invalid_input', 'message.messageId is required');
    const badId = callerIdProblem('message.messageId', message.messageId);
    if (badId) return refuse('invalid_input', badId);
    if (message.role === Roles.AGENT) return refuse('invalid_input', 'message.role is ROLE_AGENT: a caller sends ROLE_USER messages');
    // What the message carries is checked before anything is written, naming the field as the caller sent it.
    const unstorable =
      storableProblem(request.metadata, 'metadata') ??
      storableProblem(message.metadata, 'message.metadata') ??
      message.parts.reduce<string | undefined>(
        (found, part, i) => found ?? (part.content?.$case === 'data' ? storableProblem(part.content.value, `message.parts[${i}].data`) : undefined),
        undefined,
      );
    if (unstorable) return refuse('invalid_input', unstorable);
    // What the message lands on is read once here: the agent, the task (a reply), the context's thread.
    const agent = request.agent?.id === agentId ? request.agent : await store.agents.get(agentId);
    if (!agent) return refuse('agent_not_found', `no agent named "${agentId}"`);
    core.recentAgents.remember(agent);

    let root: Run | undefined;
    let thread: Thread | undefined;
    if (message.taskId) {
      const found = await findTask(request, message.taskId);
      if (!found.ok) return found;
      root = found.value;
      if (message.contextId && message.contextId !== root.threadId) {
        return refuse('invalid_input', `contextId "${message.contextId}" is not the context of task "${root.runId}" ("${root.threadId}")`);
      }
      thread = await store.threads.get(root);
    } else if (message.contextId) {
      thread = await store.threads.get({ tenant: principal.tenant, threadId: message.contextId });
      if (!thread) {
        return refuse('thread_not_found', `no context "${message.contextId}": leave contextId out to start a new one`);
      }
      if (thread.agentId !== agentId) return refuse('thread_agent_mismatch', `context "${message.contextId}" belongs to another agent`);
    }
    if (request.push) {
      const badConfigId = request.push.configId ? callerIdProblem('taskPushNotificationConfig.id', request.push.configId) : undefined;
      if (badConfigId) return refuse('invalid_input', badConfigId);
      const vetted = await vetTarget(request.push.url);
      if (vetted) return vetted;
    }

    const nowSeconds = Math.floor(core.clock.now() / 1000);
    const candidate: MessageClaim = {
      key: JSON.stringify([principal.tenant, agentId, thread?.threadId ?? '', message.messageId]),
      runId: core.ids.newId(),
      threadId: thread?.threadId ?? core.ids.newId(),
      expiresAt: nowSeconds + settings.messageIdTtlSeconds,
    };
    const claim = await store.claims.take(candidate, nowSeconds);
    if (claim.runId !== candidate.runId) {
      const earlier = await store.runs.get(claim.runId);
      if (earlier) {
        const first = earlier.rootRunId === earlier.runId ? earlier : await store.runs.get(earlier.rootRunId);
        return ok({ root: first ?? earlier, run: earlier, repeated: true });
      }
      // The first attempt took the id but recorded no run yet (it failed, or is still on its
      // way): go on with its ids, so that both attempts land on one run whichever is first.
    }
    const landing = { threadId: claim.threadId, runId: claim.runId, metadata: request.metadata };
    const started = await start(request, { agent, ...(thread ? { thread } : {}) }, root, landing);
    if (!started.ok) await store.claims.release(claim);
    return started;
  }

  async function start(request: SendMessage, found: Place, root: Run | undefined, landing: InboundLanding): Promise<Result<Sent>> {
    let input: RunAgentInput;
    let place: Place = found;
    let classified: Result<Landing>;
    if (root) {
      const tail = (await lineageOf(store, root)).at(-1) ?? root;
      const open = openAsks(tail);
      // A first attempt of this message (its run id claimed) closed the asks for its run and died before recording it.
      const closedForThis = Object.values(tail.asks ?? {}).filter((ask) => ask.state !== 'open' && ask.closedByRunId === landing.runId);
      const answered = open.length > 0 ? open : closedForThis;
      if (tail.status !== 'completed' || answered.length === 0) return notWaiting(root, tail);
      // The context's open asks are its latest waiting run's; an older task's asks were left behind.
      // (A waiting run not yet named on its thread, the moment after its end, is still the latest.)
      const named = found.thread?.waitingRunId;
      const later = named !== undefined && named !== tail.runId ? await store.runs.get(named) : undefined;
      if (later && later.arrival > tail.arrival) {
        return refuse('no_open_ask', `task "${root.runId}" waits no more: a later task of context "${root.threadId}" holds its asks`);
      }
      const built = answerInput(request.message, answered, landing);
      if (!built.ok) return built;
      input = callerInput(built.value);
      const waiting = { ...found, waiting: tail };
      place = waiting;
      classified = open.length > 0 ? await classifyAnswer(core, waiting, input.runId) : ok({ kind: 'answer', waiting: tail, closing: {}, closed: true });
    } else {
      const built = ordinaryInput(request.message, landing);
      if (!built.ok) return built;
      input = callerInput(built.value);
      classified = await classify(core, request.principal, input, place);
    }
    if (!classified.ok) return classified;
    // A config sent with the message is stored before the run can start, so it misses no update.
    const taskId = root?.runId ?? landing.runId;
    const config = request.push ? await putPushConfig(taskId, request.principal, request.push) : undefined;
    const started = await startLanded(core, { agentId: request.agentId, input, door: 'a2a', principal: request.principal }, place, classified.value);
    if (!started.ok) {
      if (config && !root) await store.pushConfigs.delete(config.taskId, config.configId);
      return started;
    }
    const { run, attached } = started.value;
    const taskRoot = root ?? (run.rootRunId === run.runId ? run : ((await store.runs.get(run.rootRunId)) ?? run));
    return ok({ root: taskRoot, run, repeated: attached });
  }

  function notWaiting(root: Run, tail: Run): Refusal {
    const expired = Object.values(tail.asks ?? {}).filter((ask) => ask.state === 'expired');
    if (tail.status === 'completed' && expired.length > 0) return refuseExpired(expired, root.runId);
    const now = tail.status === 'completed' ? 'has completed' : `is ${tail.status}`;
    return refuse('no_open_ask', `task "${root.runId}" is not waiting for an answer: its latest run ${now}`);
  }

  async function getTask(caller: Caller, taskId: string, view?: TaskView): Promise<Result<Task>> {
    const found = await findTask(caller, taskId);
    return found.ok ? ok(await readTask(store, found.value, view)) : found;
  }

  /** Waits until the task leaves SUBMITTED and WORKING (done, or waiting for its caller). */
  async function awaitTask(root: Run, signal?: AbortSignal): Promise<void> {
    for await (const _update of followTask(core, root, undefined, signal)) {
      // The stream ends when the task settles; its updates are not needed here.
    }
  }

  /** A task's stream from now on: the Task, then its updates until it settles (SendStreamingMessage). */
  function stream(root: Run, signal?: AbortSignal): AsyncGenerator<StreamResponse> {
    return followTask(core, root, undefined, signal);
  }

  /**
   * A task's stream: the Task, then its updates. With a cursor (the `cursor` of an update the
   * caller saw) the stream resumes after it, even on a task that has ended since; without one, a
   * task that has ended has nothing more to say (A2A 1.0: UnsupportedOperation).
   */
  async function subscribe(caller: Caller, taskId: string, cursor: string | undefined, signal?: AbortSignal): Promise<Result<AsyncGenerator<StreamResponse>>> {
    const found = await findTask(caller, taskId);
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

  async function cancelTask(caller: Caller, taskId: string): Promise<Result<Task>> {
    const found = await findTask(caller, taskId);
    if (!found.ok) return found;
    const root = found.value;
    const tail = (await lineageOf(store, root)).at(-1) ?? root;
    const cancelled = await cancelRun(core, tail.runId, caller.principal);
    if (!cancelled.ok) {
      if (cancelled.code !== 'task_not_cancelable') return cancelled;
      const task = await readTask(store, root, { historyLength: 0, includeArtifacts: false });
      return refuse('task_not_cancelable', `task "${taskId}" has ended (${stateName(task)}): it can no longer be cancelled`);
    }
    return ok(await readTask(store, root));
  }

  async function listTasks(caller: Caller, query: TaskQuery): Promise<Result<TaskPage>> {
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
      const read = await Promise.all(page.runs.map((root) => readTask(store, root, query.view)));
      tasks.push(...read.filter(matches));
      cursor = page.cursor;
    } while (cursor !== undefined && tasks.length < pageSize);
    return ok({ tasks, ...(cursor ? { nextPageToken: `t.${cursor}` } : {}), pageSize, totalSize: tasks.length });
  }

  async function vetTarget(url: string): Promise<Refusal | undefined> {
    if (!options.push) return refuse('invalid_input', 'this gateway sends no push notifications');
    try {
      new URL(url);
    } catch {
      return refuse('invalid_input', `push notification url "${url}" is not a URL`);
    }
    const why = await options.push.vet(url);
    return why === undefined ? undefined : refuse('invalid_input', `push notification url refused: ${why}`);
  }

  async function putPushConfig(taskId: string, principal: Principal, target: PushTarget): Promise<PushConfig> {
    const config: PushConfig = {
      taskId,
      configId: target.configId || core.ids.newId(),
      tenant: principal.tenant,
      url: target.url,
      createdAt: isoNow(core),
    };
    if (target.token) config.token = target.token;
    if (target.authentication?.scheme) config.authentication = target.authentication;
    await store.pushConfigs.put(config);
    return config;
  }

  async function createPushConfig(caller: Caller, taskId: string, target: PushTarget): Promise<Result<PushConfig>> {
    const found = await findTask(caller, taskId);
    if (!found.ok) return found;
    const badId = target.configId ? callerIdProblem('id', target.configId) : undefined;
    if (badId) return refuse('invalid_input', badId);
    const vetted = await vetTarget(target.url);
    if (vetted) return vetted;
    return ok(await putPushConfig(found.value.runId, caller.principal, target));
  }

  async function getPushConfig(caller: Caller, taskId: string, configId: string): Promise<Result<PushConfig>> {
    const found = await findTask(caller, taskId);
    if (!found.ok) return found;
    const config = await store.pushConfigs.get(taskId, configId);
    return config ? ok(config) : refuse('push_config_not_found', `task "${taskId}" has no push notification config "${configId}"`);
  }

  async function listPushConfigs(caller: Caller, taskId: string): Promise<Result<PushConfig[]>> {
    const found = await findTask(caller, taskId);
    return found.ok ? ok(await store.pushConfigs.list(taskId)) : found;
  }

  async function deletePushConfig(caller: Caller, taskId: string, configId: string): Promise<Result<void>> {
    const found = await findTask(caller, taskId);
    if (!found.ok) return found;
    return (await store.pushConfigs.delete(taskId, configId))
      ? ok(undefined)
      : refuse('push_config_not_found', `task "${taskId}" has no push notification config "${configId}"`);
  }

  return {
    settings,
    /** Whether push notifications are sent (a sender is wired). */
    pushes: options.push !== undefined,
    sendMessage,
    getTask,
    awaitTask,
    stream,
    subscribe,
    cancelTask,
    listTasks,
    createPushConfig,
    getPushConfig,
    listPushConfigs,
    deletePushConfig,
  };
}

export type Tasks = ReturnType<typeof createTasks>;

function stateName(task: Task): string {
  return Object.entries(TaskStates).find(([, state]) => state === task.status?.state)?.[0] ?? 'settled';
}
