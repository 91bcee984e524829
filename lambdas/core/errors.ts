/**
 * Refusals the core returns as values. Each door maps these codes once, to its own
 * status codes and error types.
 */
export type RefusalCode =
  | 'invalid_input'
  | 'payload_too_large'
  | 'agent_not_found'
  | 'agent_disabled'
  | 'agent_in_use'
  | 'thread_not_found'
  | 'thread_agent_mismatch'
  | 'thread_expired'
  | 'thread_queue_full'
  | 'tenant_rate_limited'
  | 'tenant_concurrency_limited'
  | 'tenant_budget_exhausted'
  | 'run_not_found'
  | 'run_id_conflict'
  | 'no_open_ask'
  | 'interrupt_expired'
  | 'task_not_cancelable'
  | 'content_type_not_supported'
  | 'push_config_not_found'
  | 'task_settled'
  // Who acts for whom (core/actors.ts): a chain, a bound thread, the signed acts on it.
  | 'presenter_required'
  | 'invalid_chain'
  | 'thread_membership_required'
  | 'invalid_resolution'
  | 'invalid_cancel'
  | 'principal_not_found';

export interface Refusal {
  ok: false;
  code: RefusalCode;
  message: string;
  /** For a refusal that passes (a full queue, a tenant's limit): when trying again may succeed. */
  retryAfterSeconds?: number;
}

export type Result<T> = { ok: true; value: T } | Refusal;

export function refuse(code: RefusalCode, message: string, retryAfterSeconds?: number): Refusal {
  return retryAfterSeconds === undefined ? { ok: false, code, message } : { ok: false, code, message, retryAfterSeconds };
}

export function ok<T>(value: T): { ok: true; value: T } {
  return { ok: true, value };
}

/**
 * Why a run failed, as stored on the run and carried by its final RUN_ERROR.
 * Providers throw this to end a run with their own code (`provider_http_502`, …).
 */
export class RunFailure extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'RunFailure';
  }
}

/** The store could not take a write after its retries: the run fails rather than losing events. */
export class StoreUnavailable extends Error {
  readonly code = 'store_unavailable';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreUnavailable';
  }
}
