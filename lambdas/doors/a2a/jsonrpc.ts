import { requestAudit } from '../audit.js';
import { A2A_VERSION_HEADER, type AgentCard } from '@a2a-js/sdk';
import { LegacyJsonRpcTransportHandler } from '@a2a-js/sdk/compat/v0_3/server';
import { A2A_ERROR_CODE, ContentTypeNotSupportedError } from '@a2a-js/sdk/errors';
import { JsonRpcTransportHandler, validateVersion } from '@a2a-js/sdk/server';
import type { Context } from 'hono';
import type { Tasks } from '../../core/a2a/tasks.js';
import type { Agent, Principal } from '../../core/model.js';
import type { SseOptions } from '../sse.js';
import { requestTraceContext, tracedA2a, type DoorTracer } from '../tracing.js';
import { a2aError, PARSE_ERROR, retryAfterIn } from './errors.js';
import { AgentRequestHandler } from './handler.js';
import { legacyStream } from './legacy.js';
import { callContext, callerOf, cursorFrom, isObject, LEGACY_VERSION, mediaType, streamResponse, tooDeep } from './wire.js';

type Env = { Variables: { principal: Principal } };
type RpcResponse = { jsonrpc: string; id: string | number | null; result?: unknown; error?: { code: number; message: string } };

/**
 * The JSON-RPC binding at the agent's URL, through the SDK's transport handlers (A2A 1.0, and 0.3
 * by its compat layer) over funduq's request handler. Answers are JSON-RPC's 200, but a refusal
 * that passes (a full queue, a tenant's limit) is 429 with Retry-After.
 */
export async function jsonRpc(
  c: Context<Env>,
  tasks: Tasks,
  agent: Agent,
  card: AgentCard,
  sse: SseOptions,
  onError?: (error: unknown) => void,
  tracing?: DoorTracer,
): Promise<Response> {
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
  const context = callContext(c, requested, legacy);
  try {
    validateVersion(context.requestedVersion, card, 'JSONRPC');
  } catch (error) {
    return c.json({ jsonrpc: '2.0', id, error: mapError(error) });
  }
  const deep = tooDeep(body);
  if (deep) return c.json({ jsonrpc: '2.0', id, error: mapError(a2aError({ ok: false, code: 'invalid_input', message: deep })) });
  const stop = new AbortController();
  const caller = callerOf(c, agent);
  const handler = tracedA2a(new AgentRequestHandler(tasks, caller, card, requestAudit(c), stop.signal, cursorFrom(c, paramsMetadata(body)), sse.maxDurationMs), tracing, requestTraceContext(c));
  const transport = legacy ? new LegacyJsonRpcTransportHandler(handler) : new JsonRpcTransportHandler(handler);
  // Arrays, primitives and null are the transport's to refuse (Invalid Request), not ours.
  const answer = await transport.handle(body as Record<string, unknown>, context);
  if (!isAsyncIterable(answer)) {
    stop.abort();
    return rpcResponse(c, answer as RpcResponse, onError);
  }
  const iterator = (legacy ? legacyStream(answer, true) : answer)[Symbol.asyncIterator]();
  let first: IteratorResult<unknown>;
  try {
    // An error before the first event (a refusal) is answered as JSON, as the SDK's adapter does.
    first = await iterator.next();
  } catch (error) {
    stop.abort();
    return rpcResponse(c, { jsonrpc: '2.0', id, error: mapError(error) as RpcResponse['error'] }, onError);
  }
  return streamResponse(first, iterator, stop, (item) => item, (error) => ({ jsonrpc: '2.0', id, error: mapError(error) }), sse);
}

function rpcResponse(c: Context, response: RpcResponse, onError?: (error: unknown) => void): Response {
  const retryAfter = retryAfterIn(response.error);
  if (retryAfter !== undefined) {
    c.header('Retry-After', String(retryAfter));
    return c.json(response, 429);
  }
  if (response.error?.code === A2A_ERROR_CODE.INTERNAL_ERROR) onError?.(new Error(`A2A internal error: ${response.error.message}`));
  return c.json(response);
}

function paramsMetadata(body: unknown): Record<string, unknown> | undefined {
  const params = isObject(body) ? body.params : undefined;
  return isObject(params) && isObject(params.metadata) ? params.metadata : undefined;
}

function requestId(body: unknown): string | number | null {
  const id = isObject(body) ? body.id : undefined;
  return typeof id === 'string' || (typeof id === 'number' && Number.isInteger(id)) ? id : null;
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value;
}
