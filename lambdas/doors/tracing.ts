import { TaskState, type Message, type Task } from '@a2a-js/sdk';
import { SpanKind, SpanStatusCode, trace, type Attributes, type Context as TraceContext, type Span, type Tracer } from '@opentelemetry/api';
import type { Context, MiddlewareHandler } from 'hono';
import { routePath } from 'hono/route';
import { A2A_METHOD, ATTR, SPAN, TRACEPARENT, TRACESTATE } from '../core/traces.js';
import { endingWith } from './body-end.js';

/**
 * What the doors trace with (the OpenTelemetry adapter's `Tracing`, `adapters/otel/tracing.ts`):
 * a tracer and W3C Trace Context's propagation. The doors hold no provider and read no setting.
 */
export interface DoorTracer {
  readonly tracer: Tracer;
  extract(carrier: Readonly<Record<string, string | undefined>>): TraceContext;
  inject(context: TraceContext): Record<string, string>;
}

/**
 * Each request's span context and its W3C headers, for what it calls (the A2A methods) and the
 * runs it starts: keyed by the request's Hono context, which its sub-apps share (not by the
 * `Request`, which a middleware may replace: `bodyLimit` wraps a body sent without a length, as
 * API Gateway's events become).
 */
const requestContexts = new WeakMap<Context, { context: TraceContext; headers: Record<string, string> }>();

/** The trace context of the request `c` answers: its server span's, or undefined when it is not traced. */
export function requestTraceContext(c: Context): TraceContext | undefined {
  return requestContexts.get(c)?.context;
}

/**
 * The trace headers a run started by this request carries (`Run.context`): its server span's when
 * traced, so the run's spans are children of the request that made it even when the caller sent
 * no `traceparent`; the caller's own otherwise (carried on for whoever traces further on).
 */
export function runHeaders(c: Context): (name: string) => string | undefined {
  const headers = requestContexts.get(c)?.headers;
  return (name) => headers?.[name] ?? c.req.header(name);
}

/**
 * The HTTP server span of each request (HTTP semconv: `{method} {route}`, kind SERVER),
 * continuing the caller's `traceparent`/`tracestate`, and ending when the response's body has been
 * taken whole (a stream's span lasts as long as the stream). The response names the span in its
 * own `traceparent` header, so a caller whose request carried none can still find its trace.
 */
export function requestSpans(tracing: DoorTracer): MiddlewareHandler {
  return async (c, next) => {
    const parent = tracing.extract({ [TRACEPARENT]: c.req.header(TRACEPARENT), [TRACESTATE]: c.req.header(TRACESTATE) });
    const url = new URL(c.req.url);
    const span = tracing.tracer.startSpan(
      c.req.method,
      {
        kind: SpanKind.SERVER,
        attributes: {
          [ATTR.httpMethod]: c.req.method,
          [ATTR.urlPath]: url.pathname,
          [ATTR.urlScheme]: url.protocol.replace(':', ''),
          ...(c.req.header('User-Agent') ? { [ATTR.userAgent]: c.req.header('User-Agent') } : {}),
        },
      },
      parent,
    );
    const context = trace.setSpan(parent, span);
    const headers = tracing.inject(context);
    requestContexts.set(c, { context, headers });
    try {
      await next();
    } catch (error) {
      end(span, c, 500);
      throw error;
    }
    const route = routePath(c, -1);
    if (route && !route.includes('*')) {
      span.setAttribute(ATTR.httpRoute, route);
      span.updateName(SPAN.http(c.req.method, route));
    }
    const status = c.res.status;
    const body = c.res.body;
    c.res = new Response(body ? endingWith(body, () => end(span, c, status)) : null, c.res);
    if (headers[TRACEPARENT]) c.res.headers.set(TRACEPARENT, headers[TRACEPARENT]);
    if (!body) end(span, c, status);
  };
}

function end(span: Span, c: Context, status: number): void {
  span.setAttribute(ATTR.httpStatus, status);
  // HTTP semconv: a server span is an error for 5xx only; a 4xx is the caller's.
  if (status >= 500) {
    span.setAttribute(ATTR.errorType, String(status));
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
  requestContexts.delete(c);
}

type Method = keyof typeof A2A_METHOD;

/**
 * One request's A2A handler with a span per method (named as A2A names it, under the request's
 * server span) carrying `a2a.task.id`, `a2a.task.state`, `a2a.message.id` and
 * `gen_ai.conversation.id` (the task's contextId, which is funduq's thread id). A stream's span
 * lasts until its stream ends. The handler keeps its type: only the A2A methods are intercepted.
 */
export function tracedA2a<T extends object>(handler: T, tracing: DoorTracer | undefined, parent: TraceContext | undefined): T {
  if (tracing === undefined || parent === undefined) return handler;
  const start = (method: Method, params: unknown) =>
    tracing.tracer.startSpan(A2A_METHOD[method], { kind: SpanKind.INTERNAL, attributes: { [ATTR.rpcMethod]: A2A_METHOD[method], ...paramsAttributes(params) } }, parent);
  const failed = (span: Span, error: unknown) => {
    span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
    span.setAttribute(ATTR.errorType, error instanceof Error ? error.constructor.name : 'Error');
  };
  const unary =
    (method: Method, call: (...args: unknown[]) => Promise<unknown>) =>
    async (...args: unknown[]): Promise<unknown> => {
      const span = start(method, args[0]);
      try {
        const result = await call(...args);
        span.setAttributes(resultAttributes(result));
        return result;
      } catch (error) {
        failed(span, error);
        throw error;
      } finally {
        span.end();
      }
    };
  const streaming = (method: Method, call: (...args: unknown[]) => AsyncIterable<unknown>) =>
    async function* (...args: unknown[]): AsyncGenerator<unknown, void, undefined> {
      const span = start(method, args[0]);
      try {
        for await (const item of call(...args)) {
          span.setAttributes(resultAttributes(item));
          yield item;
        }
      } catch (error) {
        failed(span, error);
        throw error;
      } finally {
        span.end();
      }
    };
  return new Proxy(handler, {
    get(target, name, receiver) {
      const value: unknown = Reflect.get(target, name, receiver);
      if (typeof name !== 'string' || !Object.hasOwn(A2A_METHOD, name) || typeof value !== 'function') return value;
      const call = value.bind(target) as (...args: unknown[]) => never;
      return STREAMS.has(name) ? streaming(name as Method, call) : unary(name as Method, call);
    },
  });
}

const STREAMS: ReadonlySet<string> = new Set<Method>(['sendMessageStream', 'resubscribe']);

/** The ids a request names: its message's, its task's (ids only: no part of a message's content). */
function paramsAttributes(params: unknown): Attributes {
  if (typeof params !== 'object' || params === null) return {};
  const given = params as { id?: unknown; taskId?: unknown; message?: { messageId?: unknown; taskId?: unknown; contextId?: unknown } };
  const taskId = given.message?.taskId || given.taskId || given.id;
  return {
    ...(typeof given.message?.messageId === 'string' && given.message.messageId ? { [ATTR.messageId]: given.message.messageId } : {}),
    ...(typeof taskId === 'string' && taskId ? { [ATTR.taskId]: taskId } : {}),
    ...(typeof given.message?.contextId === 'string' && given.message.contextId ? { [ATTR.conversationId]: given.message.contextId } : {}),
  };
}

/** What an answer says of its task: a Task, a Message, or a stream's item (one of those, or a status or artifact update). */
function resultAttributes(result: unknown): Attributes {
  if (typeof result !== 'object' || result === null) return {};
  const item = result as { payload?: { $case?: string; value?: unknown } } & Partial<Task & Message>;
  const inner = item.payload?.value ?? result;
  const value = inner as { id?: string; taskId?: string; contextId?: string; status?: { state?: number } };
  const taskId = value.taskId || (item.payload?.$case === 'message' ? undefined : value.id);
  const state = value.status?.state;
  return {
    ...(taskId ? { [ATTR.taskId]: taskId } : {}),
    ...(value.contextId ? { [ATTR.conversationId]: value.contextId } : {}),
    ...(state !== undefined && TaskState[state] ? { [ATTR.taskState]: TaskState[state] } : {}),
  };
}
