import { requestIdOf } from '../audit.js';
import { Extensions, HTTP_EXTENSION_HEADER } from '@a2a-js/sdk';
import { ContentTypeNotSupportedError, RequestMalformedError } from '@a2a-js/sdk/errors';
import { ServerCallContext, STATE_HEADERS_KEY } from '@a2a-js/sdk/server';
import type { Context } from 'hono';
import type { Caller } from '../../core/a2a/deps.js';
import type { Agent, Principal } from '../../core/model.js';
import { contextOfHeaders } from '../../core/run-context.js';
import { MAX_DEPTH, nestedDeeperThan } from '../../core/storable.js';
import { eventStream, framedByTurn, SSE_HEADERS, type SseOptions } from '../sse.js';
import { runHeaders } from '../tracing.js';

/** A2A 0.3 requests carry `A2A-Version: 0.3` or no version header at all (the SDK's rule). */
export const LEGACY_VERSION = '0.3';
const LEGACY_EXTENSION_HEADER = 'X-A2A-Extensions';

/** Who calls at this agent, and what the runs their request starts carry from its headers. */
export function callerOf(c: Context<{ Variables: { principal: Principal } }>, agent: Agent): Caller {
  const context = contextOfHeaders(runHeaders(c));
  return { agentId: agent.id, principal: c.get('principal'), agent, ...(context ? { context } : {}), requestId: requestIdOf(c) };
}

export function callContext(c: Context, requested: string | undefined, legacy: boolean): ServerCallContext {
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
export function cursorFrom(c: Context, metadata: Record<string, unknown> | undefined): string | undefined {
  const header = c.req.header('Last-Event-ID');
  if (header) return header;
  const funduq = metadata?.funduq;
  return isObject(funduq) && typeof funduq.cursor === 'string' ? funduq.cursor : undefined;
}

/**
 * An SSE response of a stream whose first item was already taken (so that a refusal before it is
 * answered as an error body instead): each item framed with its cursor as the SSE id, the frames
 * of one turn joined, an error after the first item as an `error` event. The reader going away aborts `stop`.
 */
export function streamResponse<T>(
  first: IteratorResult<T>,
  rest: AsyncIterator<T>,
  stop: AbortController,
  toWire: (item: T) => unknown,
  errorBody: (error: unknown) => unknown,
  sse: SseOptions,
): Response {
  const body = eventStream(
    (signal) => {
      signal.addEventListener('abort', () => stop.abort(), { once: true });
      // The updates of one turn go out as one write, as on the AG-UI door: a burst's chunks would
      // otherwise cost a body chunk, a socket write and a TCP segment each.
      return framedByTurn(resume(first, rest), (item) => frame(toWire(item)));
    },
    (frames) => frames,
    { ...sse, onError: (error) => `event: error\ndata: ${JSON.stringify(errorBody(error))}\n\n` },
  );
  return new Response(body, { status: 200, headers: SSE_HEADERS });
}

/** One SSE event; its `id` is the cursor of the update it carries, so a reader can resume from it. */
function frame(data: unknown): string {
  const cursor = cursorOf(data);
  return `${cursor ? `id: ${cursor}\n` : ''}data: ${JSON.stringify(data)}\n\n`;
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

/**
 * An HTTP+JSON request's body: none for GET and DELETE (and for an empty one, or a 0.3 reference
 * client's `null`), else JSON of one of the media types the binding takes.
 */
export async function jsonBody(c: Context, types: readonly string[]): Promise<unknown> {
  const contentType = mediaType(c.req.header('Content-Type'));
  if (contentType !== undefined && !types.includes(contentType)) {
    throw new ContentTypeNotSupportedError(`Content-Type "${c.req.header('Content-Type')}" is not ${types.join(' or ')}`);
  }
  const text = c.req.method === 'GET' || c.req.method === 'DELETE' ? '' : await c.req.text();
  let body: unknown;
  try {
    body = text.trim() === '' ? undefined : (JSON.parse(text) ?? undefined);
  } catch {
    throw new RequestMalformedError('Invalid JSON payload.');
  }
  const deep = tooDeep(body);
  if (deep) throw new RequestMalformedError(deep);
  return body;
}

/** A value's nesting limit (MAX_DEPTH) and room for the request around it (params, message, parts, a part). */
const REQUEST_DEPTH = MAX_DEPTH + 10;

/**
 * Why a request is refused before the SDK reads it: its transports read a request recursively
 * (proto JSON, 0.3's compat layer), and one nested far past what the record takes would overflow
 * their stack. One within REQUEST_DEPTH is refused by the handler, naming the field.
 */
export function tooDeep(body: unknown): string | undefined {
  return nestedDeeperThan(body, REQUEST_DEPTH) ? `the request nests more than ${REQUEST_DEPTH} levels deep (a value may nest ${MAX_DEPTH})` : undefined;
}

export function mediaType(header: string | undefined): string | undefined {
  if (!header) return undefined;
  return header.split(';', 1)[0].trim().toLowerCase();
}

export function wholeNumber(value: string, name: string): number {
  if (!/^\d{1,9}$/.test(value.trim())) throw new RequestMalformedError(`${name} must be a whole number ≥ 0`);
  return Number(value);
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
