import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { RefusalCode } from '../core/errors.js';

/** The one table from core refusal codes to HTTP statuses, for the AG-UI and admin doors. */
const STATUS: Record<RefusalCode, ContentfulStatusCode> = {
  invalid_input: 400,
  payload_too_large: 413,
  agent_not_found: 404,
  thread_not_found: 404,
  run_not_found: 404,
  push_config_not_found: 404,
  principal_not_found: 404,
  agent_disabled: 409,
  agent_in_use: 409,
  thread_agent_mismatch: 409,
  run_id_conflict: 409,
  no_open_ask: 409,
  task_not_cancelable: 409,
  task_settled: 409,
  presenter_required: 403,
  invalid_chain: 403,
  thread_membership_required: 403,
  invalid_resolution: 403,
  invalid_cancel: 403,
  interrupt_expired: 410,
  thread_expired: 410,
  content_type_not_supported: 415,
  thread_queue_full: 429,
  tenant_rate_limited: 429,
  tenant_concurrency_limited: 429,
  tenant_budget_exhausted: 429,
};

/**
 * How long a caller refused for back-pressure should wait before trying again, when the refusal
 * does not say (a full thread queue or a tenant's unsettled runs: a place frees when a run settles).
 */
export const RETRY_AFTER_SECONDS = 2;

export type DoorErrorCode = RefusalCode | ConsoleErrorCode | 'not_found' | 'unauthorized' | 'gateway_busy' | 'internal_error';

/** The console's own refusals (`doors/console/session.ts`). */
export type ConsoleErrorCode = 'console_session_required' | 'console_csrf_invalid' | 'console_cross_origin' | 'console_read_only';

const CONSOLE_STATUS: Record<ConsoleErrorCode, ContentfulStatusCode> = {
  console_session_required: 401,
  console_csrf_invalid: 403,
  console_cross_origin: 403,
  console_read_only: 403,
};

/** A 429 carries `Retry-After`: the refusal's own (a tenant's next minute) or `RETRY_AFTER_SECONDS`. */
export function errorResponse(c: Context, code: DoorErrorCode, message: string, retryAfterSeconds?: number): Response {
  const status: ContentfulStatusCode =
    code in STATUS
      ? STATUS[code as RefusalCode]
      : code in CONSOLE_STATUS
        ? CONSOLE_STATUS[code as ConsoleErrorCode]
        : code === 'not_found'
        ? 404
        : code === 'unauthorized'
          ? 401
          : code === 'gateway_busy'
            ? 503
            : 500;
  if (status === 429) c.header('Retry-After', String(retryAfterSeconds ?? RETRY_AFTER_SECONDS));
  return c.json({ error: { code, message } }, status);
}
