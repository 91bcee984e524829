import {
  A2A_ERROR_CODE,
  ContentTypeNotSupportedError,
  ERROR_INFO_TYPE,
  JsonRpcTransportError,
  RequestMalformedError,
  restStatusFor,
  TaskNotCancelableError,
  TaskNotFoundError,
  toRestErrorBody,
  UnsupportedOperationError,
} from '@a2a-js/sdk/errors';
import type { Refusal, RefusalCode } from '../../core/errors.js';
import { RETRY_AFTER_SECONDS } from '../http-errors.js';

/**
 * Back-pressure (a full thread queue, a tenant's limits): the caller may come back later. A2A 1.0
 * has no error for it and every error it does have says "never" (UnsupportedOperation would tell
 * a client to give up), so this takes JSON-RPC's implementation-defined server-error code, -32000,
 * which A2A's own codes (-32001…-32009) leave free; HTTP+JSON answers 429 with Retry-After.
 */
export class TryLaterError extends JsonRpcTransportError {
  static readonly CODE = -32000;
  constructor(
    /** The `google.rpc.ErrorInfo` reason HTTP+JSON gives: `THREAD_QUEUE_FULL`, `TENANT_RATE_LIMITED`, … */
    override readonly reason: string,
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super({ jsonrpc: '2.0', id: null, error: { code: TryLaterError.CODE, message: `${message}; retry after ${retryAfterSeconds} s` } });
  }
}

/** A2A has no error of its own for a refused actor: invalid params, the code first in the message so a caller can tell which. */
const actorRefused = (message: string, refusal: Refusal) => new RequestMalformedError(`${refusal.code}: ${message}`);

const tryLater = (message: string, refusal: Refusal) =>
  new TryLaterError(refusal.code.toUpperCase(), message, retryAfterOf(refusal));

/** The one table from core refusal codes to A2A errors, for both bindings and both versions. */
const A2A_ERRORS: Record<RefusalCode, (message: string, refusal: Refusal) => Error> = {
  invalid_input: (m) => new RequestMalformedError(m),
  payload_too_large: (m) => new RequestMalformedError(m),
  thread_not_found: (m) => new RequestMalformedError(m),
  thread_agent_mismatch: (m) => new RequestMalformedError(m),
  run_id_conflict: (m) => new RequestMalformedError(m),
  run_not_found: (m) => new TaskNotFoundError(m),
  push_config_not_found: (m) => new TaskNotFoundError(m),
  principal_not_found: (m) => new RequestMalformedError(m),
  agent_not_found: (m) => new UnsupportedOperationError(m),
  agent_disabled: (m) => new UnsupportedOperationError(m),
  agent_in_use: (m) => new UnsupportedOperationError(m),
  no_open_ask: (m) => new UnsupportedOperationError(m),
  interrupt_expired: (m) => new UnsupportedOperationError(m),
  thread_expired: (m) => new UnsupportedOperationError(m),
  task_settled: (m) => new UnsupportedOperationError(m),
  task_not_cancelable: (m) => new TaskNotCancelableError(m),
  content_type_not_supported: (m) => new ContentTypeNotSupportedError(m),
  presenter_required: actorRefused,
  invalid_chain: actorRefused,
  thread_membership_required: actorRefused,
  invalid_resolution: actorRefused,
  invalid_cancel: actorRefused,
  thread_queue_full: tryLater,
  tenant_rate_limited: tryLater,
  tenant_concurrency_limited: tryLater,
  tenant_budget_exhausted: tryLater,
};

export function a2aError(refusal: Refusal): Error {
  // The refusal's own code rides along, for the request's audit record (the wire carries the A2A error).
  return Object.assign(A2A_ERRORS[refusal.code](refusal.message, refusal), { refusalCode: refusal.code });
}

/** The code an audit record names for a thrown A2A error: the refusal's, or the error's kind. */
export function outcomeOf(error: unknown): string {
  const code = (error as { refusalCode?: unknown } | undefined)?.refusalCode;
  if (typeof code === 'string') return code;
  const name = error instanceof Error ? error.name : 'Error';
  return name.replace(/Error$/, '').replace(/([a-z])([A-Z])/g, '$1_$2').toLowerCase() || 'error';
}

/** How long a refused caller should wait, for a refusal that passes. */
function retryAfterOf(refusal: Refusal): number {
  return refusal.retryAfterSeconds ?? RETRY_AFTER_SECONDS;
}

/**
 * The wait a JSON-RPC answer's error asks for: JSON-RPC carries an error's code and message only
 * (the SDK drops other data of an error it has no spec for), so the wait rides in the message,
 * where `TryLaterError` puts it.
 */
export function retryAfterIn(error: { code: number; message: string } | undefined): number | undefined {
  if (error?.code !== TryLaterError.CODE) return undefined;
  const seconds = / retry after (\d{1,9}) s$/.exec(error.message)?.[1];
  return seconds === undefined ? RETRY_AFTER_SECONDS : Number(seconds);
}

/** A refusal, thrown as its A2A error: the SDK's transport handlers map thrown errors to the wire. */
export function orThrow<T>(result: { ok: true; value: T } | Refusal): T {
  if (!result.ok) throw a2aError(result);
  return result.value;
}

/** HTTP+JSON: the SDK's status and `google.rpc.Status` body, and 429 for back-pressure. */
export function restError(error: unknown): { status: number; body: unknown; headers: Record<string, string> } {
  if (error instanceof TryLaterError) {
    return {
      status: 429,
      headers: { 'Retry-After': String(error.retryAfterSeconds) },
      body: {
        error: {
          code: 429,
          status: 'RESOURCE_EXHAUSTED',
          message: error.message,
          details: [{ '@type': ERROR_INFO_TYPE, reason: error.reason, domain: 'funduq' }],
        },
      },
    };
  }
  const status = restStatusFor(error);
  return { status, headers: {}, body: toRestErrorBody(error, status) };
}

export const PARSE_ERROR = { code: A2A_ERROR_CODE.PARSE_ERROR, message: 'Invalid JSON payload.' };
