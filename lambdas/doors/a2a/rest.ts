import { requestAudit } from '../audit.js';
import {
  A2A_CONTENT_TYPE,
  A2A_VERSION_HEADER,
  AgentCard as AgentCardJson,
  ListTaskPushNotificationConfigsResponse,
  ListTasksResponse,
  SendMessageRequest,
  SendMessageResponse,
  StreamResponse,
  Task,
  TaskPushNotificationConfig,
  taskStateFromJSON,
  type AgentCard,
} from '@a2a-js/sdk';
import { A2AError, RequestMalformedError } from '@a2a-js/sdk/errors';
import { validateVersion, type ServerCallContext } from '@a2a-js/sdk/server';
import { Hono, type Context } from 'hono';
import type { Tasks } from '../../core/a2a/tasks.js';
import type { Agent, Principal } from '../../core/model.js';
import { errorResponse } from '../http-errors.js';
import type { SseOptions } from '../sse.js';
import { requestTraceContext, tracedA2a, type DoorTracer } from '../tracing.js';
import { restError } from './errors.js';
import { AgentRequestHandler } from './handler.js';
import { callContext, callerOf, cursorFrom, isObject, jsonBody, LEGACY_VERSION, streamResponse, wholeNumber } from './wire.js';

export type Env = { Variables: { principal: Principal } };
export type Call = { handler: AgentRequestHandler; context: ServerCallContext; stop: AbortController; body: unknown; c: Context<Env> };

/** How an HTTP+JSON binding of one A2A version reads requests and answers errors. */
export interface Binding {
  /** The media types its request bodies may have. */
  types: readonly string[];
  legacy: boolean;
  /** The error's status, body and headers. */
  error: (error: unknown) => { status: number; body: unknown; headers: Record<string, string> };
  /** The media type of its error bodies. */
  contentType: string;
}

const REST_1_0: Binding = { types: ['application/json', A2A_CONTENT_TYPE], legacy: false, error: restError, contentType: A2A_CONTENT_TYPE };

/**
 * One HTTP+JSON request, the same for each binding: the agent, the body, the version the card
 * allows, and a request handler for this caller; a refusal thrown is answered in the binding's shape.
 */
export function bindingCall(options: RestOptions, binding: Binding, work: (call: Call) => Promise<Response>) {
  return async (c: Context<Env>): Promise<Response> => {
    const agent = await options.agentOf(c);
    if (!agent) return errorResponse(c, 'agent_not_found', `no agent named "${c.req.param('agentId')}"`);
    const stop = new AbortController();
    try {
      const body = await jsonBody(c, binding.types);
      const card = options.cardFor(c, agent);
      const requested = c.req.header(A2A_VERSION_HEADER);
      const context = callContext(c, binding.legacy ? requested || LEGACY_VERSION : requested, binding.legacy);
      validateVersion(context.requestedVersion, card, 'HTTP+JSON');
      const metadata = isObject(body) && isObject(body.metadata) ? body.metadata : undefined;
      const caller = callerOf(c, agent);
      const handler = tracedA2a(new AgentRequestHandler(options.tasks, caller, card, requestAudit(c), stop.signal, cursorFrom(c, metadata), options.sse.maxDurationMs), options.tracing, requestTraceContext(c));
      return await work({ handler, context, stop, body, c });
    } catch (error) {
      stop.abort();
      if (!(error instanceof A2AError)) options.onError?.(error);
      const { status, body, headers } = binding.error(error);
      return new Response(JSON.stringify(body), { status, headers: { ...headers, 'Content-Type': binding.contentType } });
    }
  };
}

export interface RestOptions {
  tasks: Tasks;
  agentOf: (c: Context<Env>) => Promise<Agent | undefined>;
  cardFor: (c: Context<Env>, agent: Agent) => AgentCard;
  sse: SseOptions;
  onError?: (error: unknown) => void;
  tracing?: DoorTracer;
}

/**
 * The HTTP+JSON binding under `/a2a/{agentId}/rest`, route for route as the SDK's Express adapter
 * has it (the SDK bundles its REST transport handler only there), with the SDK's codecs and error
 * bodies (`google.rpc.Status`), and 429 with Retry-After for back-pressure.
 */
export function restRoutes(options: RestOptions) {
  const { sse } = options;
  const routes = new Hono<Env>();
  const rest = (work: (call: Call) => Promise<Response>) => bindingCall(options, REST_1_0, work);
  const json = (value: unknown, status = 200) =>
    new Response(status === 204 ? null : JSON.stringify(value), { status, headers: { 'Content-Type': A2A_CONTENT_TYPE } });
  const stream = async ({ stop }: Call, events: AsyncGenerator<StreamResponse>) => {
    const iterator = events[Symbol.asyncIterator]();
    const first = await iterator.next();
    return streamResponse(first, iterator, stop, (event) => StreamResponse.toJSON(event), (error) => restError(error).body, sse);
  };
  const sendRequest = (body: unknown) => {
    const request = SendMessageRequest.fromJSON(body ?? {});
    if (!request.message) throw new RequestMalformedError('message is required');
    if (!request.message.messageId) throw new RequestMalformedError('message.messageId is required');
    return request;
  };
  const taskId = (c: Context<Env>, suffix = '') => (c.req.param('task') ?? '').slice(0, suffix ? -suffix.length : undefined);

  routes.get('/extendedAgentCard', rest(async ({ handler }) => json(AgentCardJson.toJSON(await handler.getAuthenticatedExtendedAgentCard({ tenant: '' })))));
  routes.post('/:verb{message:send}', rest(async ({ handler, body }) => {
    const result = await handler.sendMessage(sendRequest(body));
    const payload = 'messageId' in result ? ({ $case: 'message', value: result } as const) : ({ $case: 'task', value: result } as const);
    return json(SendMessageResponse.toJSON({ payload }));
  }));
  routes.post('/:verb{message:stream}', rest(async (call) => stream(call, call.handler.sendMessageStream(sendRequest(call.body)))));
  routes.get('/tasks', rest(async ({ handler, c }) => {
    const query = c.req.query();
    const includeArtifacts = query.includeArtifacts === 'true';
    const result = await handler.listTasks({
      tenant: '',
      contextId: query.contextId ?? '',
      status: query.status ? taskStateFromJSON(Number.isNaN(Number(query.status)) ? query.status : Number(query.status)) : 0,
      pageSize: query.pageSize !== undefined && query.pageSize !== '' ? wholeNumber(query.pageSize, 'pageSize') : undefined,
      pageToken: query.pageToken ?? '',
      historyLength: query.historyLength !== undefined && query.historyLength !== '' ? wholeNumber(query.historyLength, 'historyLength') : undefined,
      statusTimestampAfter: query.statusTimestampAfter || undefined,
      includeArtifacts,
    });
    // As the SDK's list serialiser: the fields are always present, artifacts when asked for.
    const serialized = ListTasksResponse.toJSON(result) as { tasks?: Record<string, unknown>[] };
    const tasks = (serialized.tasks ?? []).map((task) => (includeArtifacts ? { artifacts: [], ...task } : task));
    return json({ ...serialized, tasks, nextPageToken: result.nextPageToken, pageSize: result.pageSize, totalSize: result.totalSize });
  }));
  // Task ids are the caller's (AG-UI run ids) and may hold ":" or an encoded "/": the verb is the path's end.
  routes.on(['GET', 'POST'], '/tasks/:task{.+:subscribe}', rest(async (call) => stream(call, call.handler.resubscribe({ id: taskId(call.c, ':subscribe'), tenant: '' }))));
  routes.post('/tasks/:task{.+:cancel}', rest(async ({ handler, body, c }) => {
    const metadata = isObject(body) && isObject(body.metadata) ? body.metadata : {};
    return json(Task.toJSON(await handler.cancelTask({ id: taskId(c, ':cancel'), tenant: '', metadata })));
  }));
  routes.post('/tasks/:task{[^/]+}/pushNotificationConfigs', rest(async ({ handler, body, c }) => {
    const config = TaskPushNotificationConfig.fromJSON({ ...(isObject(body) ? body : {}), taskId: taskId(c) });
    return json(TaskPushNotificationConfig.toJSON(await handler.createTaskPushNotificationConfig(config)), 201);
  }));
  routes.get('/tasks/:task{[^/]+}/pushNotificationConfigs', rest(async ({ handler, c }) => {
    const list = await handler.listTaskPushNotificationConfigs({ taskId: taskId(c), pageSize: 0, pageToken: '', tenant: '' });
    return json(ListTaskPushNotificationConfigsResponse.toJSON(list));
  }));
  routes.get('/tasks/:task{[^/]+}/pushNotificationConfigs/:config{.+}', rest(async ({ handler, c }) => {
    const request = { taskId: taskId(c), id: c.req.param('config') ?? '', tenant: '' };
    return json(TaskPushNotificationConfig.toJSON(await handler.getTaskPushNotificationConfig(request)));
  }));
  routes.delete('/tasks/:task{[^/]+}/pushNotificationConfigs/:config{.+}', rest(async ({ handler, c }) => {
    await handler.deleteTaskPushNotificationConfig({ taskId: taskId(c), id: c.req.param('config') ?? '', tenant: '' });
    return json(undefined, 204);
  }));
  routes.get('/tasks/:task{[^/]+}', rest(async ({ handler, c }) => {
    const historyLength = c.req.query('historyLength');
    const task = await handler.getTask({
      id: taskId(c),
      tenant: '',
      ...(historyLength !== undefined && historyLength !== '' ? { historyLength: wholeNumber(historyLength, 'historyLength') } : {}),
    });
    return json(Task.toJSON(task));
  }));
  return routes;
}
