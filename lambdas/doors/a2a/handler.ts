import type {
  AgentCard,
  CancelTaskRequest,
  DeleteTaskPushNotificationConfigRequest,
  GetExtendedAgentCardRequest,
  GetTaskPushNotificationConfigRequest,
  GetTaskRequest,
  ListTaskPushNotificationConfigsRequest,
  ListTaskPushNotificationConfigsResponse,
  ListTasksRequest,
  ListTasksResponse,
  Message,
  SendMessageRequest,
  StreamResponse,
  SubscribeToTaskRequest,
  Task,
  TaskPushNotificationConfig,
} from '@a2a-js/sdk';
import { PushNotificationNotSupportedError, RequestMalformedError, UnsupportedOperationError } from '@a2a-js/sdk/errors';
import type { A2ARequestHandler } from '@a2a-js/sdk/server';
import type { PushConfig } from '../../core/model.js';
import type { Caller, PushTarget, Tasks } from '../../core/a2a/tasks.js';
import { orThrow, outcomeOf } from './errors.js';
import { noteCancelled, noteStarted, type AuditNote, type RequestAudit } from '../audit.js';

/**
 * TaskState values with a meaning as a ListTasks filter. Any other is no filter: 0 is proto3's
 * "unspecified", and a proto3 JSON reader takes a name it does not know as an unrecognised value
 * (-1), which is what the stock client sends for a status left out (`"status": "UNRECOGNIZED"`).
 */
const FILTERABLE_STATES: ReadonlySet<number> = new Set([1, 2, 3, 4, 5, 6, 7, 8]);

/**
 * funduq's A2A request handler for one caller at one agent: every method is a core use case,
 * and every refusal is thrown as its A2A error for the SDK's transport handler to frame. Built per
 * request, so that the caller, the card and the reader's lifetime (`signal`) are its own.
 */
export class AgentRequestHandler implements A2ARequestHandler {
  constructor(
    private readonly tasks: Tasks,
    private readonly caller: Caller,
    private readonly card: AgentCard,
    /** The request's audit notes: each method that changes something notes its act. */
    private readonly audit: RequestAudit,
    /** Aborted when the HTTP reader goes away: streams and blocking sends stop waiting. */
    private readonly signal: AbortSignal,
    /** A last-seen cursor for SubscribeToTask (metadata or Last-Event-ID). */
    private readonly cursor?: string,
    /**
     * How long a blocking SendMessage waits for its task to settle before it answers with the task
     * as it stands (SUBMITTED or WORKING); undefined: until it settles. A2A asks a blocking send to
     * wait for a terminal or interrupted state, but a door cannot outwait its platform: on AWS the
     * function is killed at 15 minutes and its caller gets a cut connection and no task id. The
     * doors give it their streams' own bound (`SseOptions.maxDurationMs`), so either kind of
     * request answers before Lambda's end; the caller goes on with GetTask or SubscribeToTask.
     */
    private readonly blockingWaitMs?: number,
  ) {}

  async getAgentCard(): Promise<AgentCard> {
    return this.card;
  }

  async getAuthenticatedExtendedAgentCard(_params: GetExtendedAgentCardRequest): Promise<AgentCard> {
    throw new UnsupportedOperationError('this agent has no extended agent card');
  }

  async sendMessage(params: SendMessageRequest): Promise<Message | Task> {
    const historyLength = readHistoryLength(params.configuration?.historyLength);
    const sent = await this.send(params);
    if (!params.configuration?.returnImmediately) {
      const waitMs = this.blockingWaitMs;
      if (waitMs === undefined) await this.tasks.awaitTask(sent.root, this.signal);
      else await this.awaitAtMost(sent.root, waitMs);
    }
    return orThrow(await this.tasks.getTask(this.caller, sent.root.runId, { historyLength }));
  }

  /**
   * Waits for the task to settle, or `waitMs`, or the reader to go. A timer of its own, held until
   * the wait ends: `AbortSignal.any([…, AbortSignal.timeout(ms)])` holds its timeout signal weakly,
   * and once collected it never fires (seen under a full suite's GC: a bounded send that never answered).
   */
  private async awaitAtMost(root: Parameters<Tasks['awaitTask']>[0], waitMs: number): Promise<void> {
    const waited = new AbortController();
    const stop = () => waited.abort();
    const timer = setTimeout(stop, waitMs);
    this.signal.addEventListener('abort', stop, { once: true });
    if (this.signal.aborted) stop();
    try {
      await this.tasks.awaitTask(root, waited.signal);
    } finally {
      clearTimeout(timer);
      this.signal.removeEventListener('abort', stop);
    }
  }

  async *sendMessageStream(params: SendMessageRequest): AsyncGenerator<StreamResponse, void, undefined> {
    const sent = await this.send(params);
    yield* this.tasks.stream(sent.root, this.signal);
  }

  async getTask(params: GetTaskRequest): Promise<Task> {
    return orThrow(await this.tasks.getTask(this.caller, params.id, { historyLength: readHistoryLength(params.historyLength) }));
  }

  async listTasks(params: ListTasksRequest): Promise<ListTasksResponse> {
    const page = orThrow(
      await this.tasks.listTasks(this.caller, {
        ...(params.contextId ? { contextId: params.contextId } : {}),
        ...(FILTERABLE_STATES.has(params.status) ? { state: params.status } : {}),
        ...(params.pageSize !== undefined ? { pageSize: params.pageSize } : {}),
        ...(params.pageToken ? { pageToken: params.pageToken } : {}),
        ...(params.statusTimestampAfter ? { statusTimestampAfter: params.statusTimestampAfter } : {}),
        view: { historyLength: readHistoryLength(params.historyLength), includeArtifacts: params.includeArtifacts === true },
      }),
    );
    return { tasks: page.tasks, nextPageToken: page.nextPageToken ?? '', pageSize: page.pageSize, totalSize: page.totalSize };
  }

  async cancelTask(params: CancelTaskRequest): Promise<Task> {
    return this.audited({ action: 'run.cancel_requested', target: `task:${params.id}` }, async (note) =>
      orThrow(await this.tasks.cancelTask(this.caller, params.id, params.metadata?.cancel, (run) => noteCancelled(note, run, this.caller.requestId ?? ''))),
    );
  }

  async createTaskPushNotificationConfig(params: TaskPushNotificationConfig): Promise<TaskPushNotificationConfig> {
    return this.audited({ action: 'push_config.created', target: `push_config:${params.taskId}/${params.id || '?'}` }, async (note) => {
      this.requirePush();
      const config = orThrow(await this.tasks.createPushConfig(this.caller, params.taskId, pushTarget(params)));
      note.target = `push_config:${config.taskId}/${config.configId}`;
      note.after = { url: config.url, ...(config.authentication ? { authentication: config.authentication.scheme } : {}) };
      return wireConfig(config);
    });
  }

  async getTaskPushNotificationConfig(params: GetTaskPushNotificationConfigRequest): Promise<TaskPushNotificationConfig> {
    this.requirePush();
    return wireConfig(orThrow(await this.tasks.getPushConfig(this.caller, params.taskId, params.id)));
  }

  async listTaskPushNotificationConfigs(params: ListTaskPushNotificationConfigsRequest): Promise<ListTaskPushNotificationConfigsResponse> {
    this.requirePush();
    const configs = orThrow(await this.tasks.listPushConfigs(this.caller, params.taskId));
    return { configs: configs.map(wireConfig), nextPageToken: '' };
  }

  async deleteTaskPushNotificationConfig(params: DeleteTaskPushNotificationConfigRequest): Promise<void> {
    return this.audited({ action: 'push_config.deleted', target: `push_config:${params.taskId}/${params.id}` }, async () => {
      this.requirePush();
      orThrow(await this.tasks.deletePushConfig(this.caller, params.taskId, params.id));
    });
  }

  async *resubscribe(params: SubscribeToTaskRequest): AsyncGenerator<StreamResponse, void, undefined> {
    yield* orThrow(await this.tasks.subscribe(this.caller, params.id, this.cursor, this.signal));
  }

  private async send(params: SendMessageRequest) {
    const asked = params.message?.taskId ? { action: 'ask.answered' as const, target: `task:${params.message.taskId}` } : { action: 'run.submitted' as const, target: `agent:${this.caller.agentId}` };
    return this.audited(asked, async (note) => {
      if (!params.message) throw new RequestMalformedError('message is required');
      const inline = params.configuration?.taskPushNotificationConfig;
      if (inline?.url && !this.tasks.pushes) throw new PushNotificationNotSupportedError();
      const sent = orThrow(
        await this.tasks.sendMessage({
          ...this.caller,
          message: params.message,
          ...(params.metadata !== undefined ? { metadata: params.metadata } : {}),
          ...(inline?.url ? { push: pushTarget(inline) } : {}),
        }),
      );
      noteStarted(note, sent.run);
      return sent;
    });
  }

  /** Notes the request's act for its audit record, and its refusal's code when it throws one (A2A answers refusals with 200). */
  private async audited<T>(asked: Pick<AuditNote, 'action' | 'target'>, act: (note: AuditNote) => Promise<T>): Promise<T> {
    const note = this.audit.note({ ...asked });
    try {
      const done = await act(note);
      await this.audit.done(note);
      return done;
    } catch (error) {
      note.outcome = outcomeOf(error);
      await this.audit.done(note);
      throw error;
    }
  }

  private requirePush(): void {
    if (!this.tasks.pushes) throw new PushNotificationNotSupportedError();
  }
}

function readHistoryLength(value: number | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!Number.isInteger(value) || value < 0) throw new RequestMalformedError('historyLength must be a whole number ≥ 0');
  return value;
}

function pushTarget(config: TaskPushNotificationConfig): PushTarget {
  return {
    ...(config.id ? { configId: config.id } : {}),
    url: config.url,
    ...(config.token ? { token: config.token } : {}),
    ...(config.authentication?.scheme ? { authentication: { scheme: config.authentication.scheme, credentials: config.authentication.credentials } } : {}),
  };
}

function wireConfig(config: PushConfig): TaskPushNotificationConfig {
  return {
    tenant: '',
    id: config.configId,
    taskId: config.taskId,
    url: config.url,
    token: config.token ?? '',
    authentication: config.authentication ? { scheme: config.authentication.scheme, credentials: config.authentication.credentials ?? '' } : undefined,
  };
}
