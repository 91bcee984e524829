import {
  A2A_CONTENT_TYPE,
  A2A_VERSION_HEADER,
  AgentCard as AgentCardJson,
  Extensions,
  HTTP_EXTENSION_HEADER,
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
import { LegacyJsonRpcTransportHandler } from '@a2a-js/sdk/compat/v0_3/server';
import { A2A_ERROR_CODE, A2AError, ContentTypeNotSupportedError, RequestMalformedError } from '@a2a-js/sdk/errors';
import { JsonRpcTransportHandler, ServerCallContext, STATE_HEADERS_KEY, validateVersion } from '@a2a-js/sdk/server';
import { Hono, type Context } from 'hono';
import { createTasks, type A2aSettings, type Tasks } from '../core/a2a/tasks.js';
import type { Gateway } from '../core/gateway.js';
import type { Agent, Principal } from '../core/model.js';
import type { PushSender } from '../core/ports.js';
import { PARSE_ERROR, restError, TryLaterError } from './a2a/errors.js';
import { agentCard, legacyAgentCard } from './a2a/card.js';
import { AgentRequestHandler } from './a2a/handler.js';
import { errorResponse, RETRY_AFTER_SECONDS } from './http-errors.js';
import { eventStream, SSE_HEADERS, type SseOptions } from './sse.js';

type Env = { Variables: { principal: Principal } };

export interface A2aDoorOptions {
  /** The origin (and path prefix) the gateway is reached at, for the card's URLs; else each request's own origin. */
  publicUrl?: string;
  /** Sends push notifications; without one the cards say `pushNotifications: false`. */
  push?: PushSender;
  settings?: Partial<A2aSettings>;
  /** The version the agent cards state. */
  version?: string;
  /** Errors no A2A error describes (the caller gets INTERNAL_ERROR). */
  onError?: (error: unknown) => void;
}

/** A2A 0.3 requests carry `A2A-Version: 0.3` or no version header at all (the SDK's rule). */
const LEGACY_VERSION = '0.3';
const LEGACY_EXTENSION_HEADER = 'X-A2A-Extensions';

/**
 * The A2A door (`/a2a/{agentId}`): the agent card, JSON-RPC at the agent's URL and HTTP+JSON
 * under `/rest`, through the SDK's transport handlers (JSON-RPC 1.0 and 0.3) over funduq's own
 * request handler. The SDK's REST transport handler is bundled only inside its Express adapter,
 * so the HTTP+JSON routes here follow that adapter route for route, with the SDK's codecs and
 * error bodies.
 */
export function a2aDoor(gateway: Gateway, sse: SseOptions, options: A2aDoorOptions = {}) {
  const tasks = createTasks(gateway.deps, { push: options.push, settings: options.settings });
  const door = new Hono<Env>();
  const version = options.version ?? '0.1.0';

  const cardFor = (c: Context<Env>, agent: Agent): AgentCard => {
    const origin = (options.publicUrl ?? new URL(c.req.url).origin).replace(/\/+$/, '');
    return agentCard(agent, {
      endpoint: `${origin}/a2a/${encodeURIComponent(agent.id)}`,
      pushNotifications: tasks.pushes,
      version,
    });
  };
  const agentOf = (c: Context<Env>) => gateway.deps.store.getAgent(c.req.param('agentId') ?? '');

  door.get('/:agentId/.well-known/agent-card.json', async (c) => {
    const agent = await agentOf(c);
    if (!agent) return errorResponse(c, 'agent_not_found', `no agent named "${c.req.param('agentId')}"`);
    const card = cardFor(c, agent);
    c.header('Vary', A2A_VERSION_HEADER);
    c.header('Cache-Control', 'no-cache');
    const requested = c.req.header(A2A_VERSION_HEADER) || LEGACY_VERSION;
    return c.json(requested === LEGACY_VERSION ? await legacyAgentCard(card) : AgentCardJson.toJSON(card));
  });

  door.post('/:agentId', async (c) => {
    const agent = await agentOf(c);
    if (!agent) return errorResponse(c, 'agent_not_found', `no agent named "${c.req.param('agentId')}"`);
    const requested = c.req.header(A2A_VERSION_HEADER);
    const legacy = (requested || LEGACY_VERSION) === LEGACY_VERSION;
    const mapError = legacy ? LegacyJsonRpcTransportHandler.mapToLegacyJSONRPCError : JsonRpcTransportHandler.mapToJSONRPCError;
    const contentType = mediaType(c.req.header('Content-Type'));
    if (contentType !== undefined && contentType !== 'application/json') {
      const error = new ContentTypeNotSupportedError(`Content-Type "${c.req.header('Content-Type')}" is not application/json`);
      return c.json({ jsonrpc: '2.0', id: null, error: mapError(error) });
    }
    let body: unknown;
    try {
      body = JSON.parse(await c.req.text());
    } catch {
      return c.json({ jsonrpc: '2.0', id: null, error: PARSE_ERROR });
    }
    const id = requestId(body);
    const card = cardFor(c, agent);
    const context = callContext(c, requested, legacy);
    try {
      validateVersion(context.requestedVersion, card, 'JSONRPC');
    } catch (error) {
      return c.json({ jsonrpc: '2.0', id, error: mapError(error) });
    }
    const stop = new AbortController();
    const handler = new AgentRequestHandler(tasks, { agentId: agent.id, principal: c.get('principal') }, card, stop.signal, cursorFrom(c, paramsMetadata(body)));
    const transport = legacy ? new LegacyJsonRpcTransportHandler(handler) : new JsonRpcTransportHandler(handler);
    // Arrays, primitives and null are the transport's to refuse (Invalid Request), not ours.
    const answer = await transport.handle(body as Record<string, unknown>, context);
    if (!isAsyncIterable(answer)) {
      stop.abort();
      return rpcResponse(c, answer as RpcResponse, handler.retryAfterSeconds, options.onError);
    }
    const iterator = answer[Symbol.asyncIterator]();
    let first: IteratorResult<unknown>;
    try {
      // An error before the first event (a refusal) is answered as JSON, as the SDK's adapter does.
      first = await iterator.next();
    } catch (error) {
      stop.abort();
      return rpcResponse(c, { jsonrpc: '2.0', id, error: mapError(error) as RpcResponse['error'] }, handler.retryAfterSeconds, options.onError);
    }
    const events = eventStream(
      (signal) => {
        signal.addEventListener('abort', () => stop.abort(), { once: true });
        return resume(first, iterator);
      },
      frame,
      { ...sse, onError: (error) => errorFrame({ jsonrpc: '2.0', id, error: mapError(error) }) },
    );
    return c.body(events, 200, SSE_HEADERS);
  });

  registerRest(door, tasks, cardFor, agentOf, sse, options.onError);
  return door;
}

type RpcResponse = { jsonrpc: string; id: string | number | null; result?: unknown; error?: { code: number; message: string } };

/** A JSON-RPC answer: 200 as the binding has it, but 429 with Retry-After for back-pressure. */
function rpcResponse(c: Context, response: RpcResponse, retryAfterSeconds: number | undefined, onError?: (error: unknown) => void): Response {
  if (response.error?.code === TryLaterError.CODE) {
    c.header('Retry-After', String(retryAfterSeconds ?? RETRY_AFTER_SECONDS));
    return c.json(response, 429);
  }
  if (response.error?.code === A2A_ERROR_CODE.INTERNAL_ERROR) onError?.(new Error(`A2A internal error: ${response.error.message}`));
  return c.json(response);
}

function registerRest(
  door: Hono<Env>,
  tasks: Tasks,
  cardFor: (c: Context<Env>, agent: Agent) => AgentCard,
  agentOf: (c: Context<Env>) => Promise<Agent | undefined>,
  sse: SseOptions,
  onError?: (error: unknown) => void,
): void {
  type Call = { handler: AgentRequestHandler; stop: AbortController; body: unknown };
  const rest =
    (work: (call: Call, c: Context<Env>) => Promise<Response>) =>
    async (c: Context<Env>): Promise<Response> => {
      const agent = await agentOf(c);
      if (!agent) return errorResponse(c, 'agent_not_found', `no agent named "${c.req.param('agentId')}"`);
      const stop = new AbortController();
      try {
        const contentType = mediaType(c.req.header('Content-Type'));
        if (contentType !== undefined && contentType !== 'application/json' && contentType !== A2A_CONTENT_TYPE) {
          throw new ContentTypeNotSupportedError(`Content-Type "${c.req.header('Content-Type')}" is not application/json or ${A2A_CONTENT_TYPE}`);
        }
        const text = c.req.method === 'GET' || c.req.method === 'DELETE' ? '' : await c.req.text();
        let body: unknown;
        try {
          body = text.trim() === '' ? undefined : JSON.parse(text);
        } catch {
          throw new RequestMalformedError('Invalid JSON payload.');
        }
        const card = cardFor(c, agent);
        const requested = c.req.header(A2A_VERSION_HEADER);
        const context = callContext(c, requested, false);
        validateVersion(context.requestedVersion, card, 'HTTP+JSON');
        const metadata = isObject(body) && isObject(body.metadata) ? body.metadata : undefined;
        const handler = new AgentRequestHandler(tasks, { agentId: agent.id, principal: c.get('principal') }, card, stop.signal, cursorFrom(c, metadata));
        return await work({ handler, stop, body }, c);
      } catch (error) {
        stop.abort();
        if (!(error instanceof A2AError)) onError?.(error);
        const { status, body, headers } = restError(error);
        return new Response(JSON.stringify(body), { status, headers: { ...headers, 'Content-Type': A2A_CONTENT_TYPE } });
      }
    };
  const json = (value: unknown, status = 200) =>
    new Response(status === 204 ? null : JSON.stringify(value), { status, headers: { 'Content-Type': A2A_CONTENT_TYPE } });
  const stream = async ({ stop }: Call, events: AsyncGenerator<StreamResponse>) => {
    const iterator = events[Symbol.asyncIterator]();
    const first = await iterator.next();
    const body = eventStream(
      (signal) => {
        signal.addEventListener('abort', () => stop.abort(), { once: true });
        return resume(first, iterator);
      },
      (event) => frame(StreamResponse.toJSON(event as StreamResponse)),
      { ...sse, onError: (error) => errorFrame(restError(error).body) },
    );
    return new Response(body, { status: 200, headers: SSE_HEADERS });
  };
  const sendRequest = (body: unknown) => {
    const request = SendMessageRequest.fromJSON(body ?? {});
    if (!request.message) throw new RequestMalformedError('message is required');
    if (!request.message.messageId) throw new RequestMalformedError('message.messageId is required');
    return request;
  };

  door.get(
    '/:agentId/rest/extendedAgentCard',
    rest(async ({ handler }) => json(AgentCardJson.toJSON(await handler.getAuthenticatedExtendedAgentCard({ tenant: '' })))),
  );
  door.post(
    '/:agentId/rest/:action{message:(?:send|stream)}',
    rest(async (call, c) => {
      const request = sendRequest(call.body);
      if (c.req.param('action') === 'message:stream') return stream(call, call.handler.sendMessageStream(request));
      const result = await call.handler.sendMessage(request);
      const payload = 'messageId' in result ? ({ $case: 'message', value: result } as const) : ({ $case: 'task', value: result } as const);
      return json(SendMessageResponse.toJSON({ payload }));
    }),
  );
  door.get(
    '/:agentId/rest/tasks',
    rest(async ({ handler }, c) => {
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
    }),
  );
  door.on(
    ['GET', 'POST', 'DELETE'],
    '/:agentId/rest/tasks/:path{.+}',
    rest(async (call, c) => {
      const { handler } = call;
      const path = c.req.param('path') ?? '';
      const method = c.req.method;
      let match: RegExpExecArray | null;
      if ((match = /^(.+):subscribe$/s.exec(path)) && (method === 'GET' || method === 'POST')) {
        return stream(call, handler.resubscribe({ id: match[1], tenant: '' }));
      }
      if ((match = /^(.+):cancel$/s.exec(path)) && method === 'POST') {
        return json(Task.toJSON(await handler.cancelTask({ id: match[1], tenant: '', metadata: {} })));
      }
      if ((match = /^([^/]+)\/pushNotificationConfigs$/.exec(path))) {
        const taskId = match[1];
        if (method === 'POST') {
          const config = TaskPushNotificationConfig.fromJSON({ ...(isObject(call.body) ? call.body : {}), taskId });
          return json(TaskPushNotificationConfig.toJSON(await handler.createTaskPushNotificationConfig(config)), 201);
        }
        if (method === 'GET') {
          const list = await handler.listTaskPushNotificationConfigs({ taskId, pageSize: 0, pageToken: '', tenant: '' });
          return json(ListTaskPushNotificationConfigsResponse.toJSON(list));
        }
      }
      if ((match = /^([^/]+)\/pushNotificationConfigs\/(.+)$/s.exec(path))) {
        const request = { taskId: match[1], id: match[2], tenant: '' };
        if (method === 'GET') return json(TaskPushNotificationConfig.toJSON(await handler.getTaskPushNotificationConfig(request)));
        if (method === 'DELETE') {
          await handler.deleteTaskPushNotificationConfig(request);
          return json(undefined, 204);
        }
      }
      if (/^[^/]+$/.test(path) && method === 'GET') {
        const historyLength = c.req.query('historyLength');
        const task = await handler.getTask({
          id: path,
          tenant: '',
          ...(historyLength !== undefined && historyLength !== '' ? { historyLength: wholeNumber(historyLength, 'historyLength') } : {}),
        });
        return json(Task.toJSON(task));
      }
      return errorResponse(c, 'not_found', `no route ${method} ${c.req.path}`);
    }),
  );
}

function callContext(c: Context, requested: string | undefined, legacy: boolean): ServerCallContext {
  const extensions = legacy ? (c.req.header(LEGACY_EXTENSION_HEADER) ?? c.req.header(HTTP_EXTENSION_HEADER)) : c.req.header(HTTP_EXTENSION_HEADER);
  return new ServerCallContext({
    requestedVersion: requested,
    requestedExtensions: Extensions.parseServiceParameter(extensions),
    state: new Map([[STATE_HEADERS_KEY, c.req.header()]]),
  });
}

/**
 * A subscriber's last-seen cursor: SSE's own `Last-Event-ID` (what stock clients can send, as a
 * service parameter), or `metadata.funduq.cursor` of the request.
 */
function cursorFrom(c: Context, metadata: Record<string, unknown> | undefined): string | undefined {
  const header = c.req.header('Last-Event-ID');
  if (header) return header;
  const funduq = metadata?.funduq;
  return isObject(funduq) && typeof funduq.cursor === 'string' ? funduq.cursor : undefined;
}

function paramsMetadata(body: unknown): Record<string, unknown> | undefined {
  const params = isObject(body) ? body.params : undefined;
  return isObject(params) && isObject(params.metadata) ? params.metadata : undefined;
}

function requestId(body: unknown): string | number | null {
  const id = isObject(body) ? body.id : undefined;
  return typeof id === 'string' || (typeof id === 'number' && Number.isInteger(id)) ? id : null;
}

/** One SSE event; its `id` is the cursor of the update it carries, so a reader can resume from it. */
function frame(data: unknown): string {
  const cursor = cursorOf(data);
  return `${cursor ? `id: ${cursor}\n` : ''}data: ${JSON.stringify(data)}\n\n`;
}

function errorFrame(data: unknown): string {
  return `event: error\ndata: ${JSON.stringify(data)}\n\n`;
}

function cursorOf(data: unknown): string | undefined {
  const result = isObject(data) && isObject(data.result) ? data.result : data;
  if (!isObject(result)) return undefined;
  const carriers = [result, result.task, result.statusUpdate, result.artifactUpdate];
  for (const carrier of carriers) {
    const metadata = isObject(carrier) && isObject(carrier.metadata) ? carrier.metadata : undefined;
    const funduq = metadata && isObject(metadata.funduq) ? metadata.funduq : undefined;
    if (funduq && typeof funduq.cursor === 'string') return funduq.cursor;
  }
  return undefined;
}

async function* resume<T>(first: IteratorResult<T>, rest: AsyncIterator<T>): AsyncGenerator<T> {
  if (first.done) return;
  yield first.value;
  for (;;) {
    const next = await rest.next();
    if (next.done) return;
    yield next.value;
  }
}

function mediaType(header: string | undefined): string | undefined {
  if (!header) return undefined;
  return header.split(';', 1)[0].trim().toLowerCase();
}

function wholeNumber(value: string, name: string): number {
  if (!/^\d{1,9}$/.test(value.trim())) throw new RequestMalformedError(`${name} must be a whole number ≥ 0`);
  return Number(value);
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
