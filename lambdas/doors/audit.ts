import type { Context, MiddlewareHandler } from 'hono';
import type { AuditAction, AuditActor, AuditEntry } from '../core/audit/record.js';
import type { Principal, Run } from '../core/model.js';
import { runHeaders } from './tracing.js';

/**
 * The audit records of requests (issue 27). A route that changes something notes what it is about
 * to do (`noteAudit`: the action and its target) before it checks anything, and adds what it learns
 * (the values before and after, the run an answer became); `auditRequests`, around every route,
 * writes one record for each note once the response is made, with who asked (the principal and the
 * credential it showed, or the admin), the request's id and trace id, and the outcome: `ok`, or the
 * code the request was refused with. A read notes nothing and writes nothing.
 */
export interface AuditNote {
  action: AuditAction;
  target: string;
  /** Whose record it is, when not the caller's own tenant (an admin change of a tenant's), or none (a gateway-wide change). */
  tenant?: string | null;
  /** Set by a route that knows better than the response's status (A2A answers refusals with 200). */
  outcome?: string;
  before?: unknown;
  after?: unknown;
  detail?: Record<string, unknown>;
  /** Written already, with the act itself (a run's submission, the cancel that changed a run: `core/audit/acts.ts`). */
  recorded?: boolean;
}

/** A request's notes not written yet, and how to write one now. */
interface Scope {
  notes: AuditNote[];
  /** Whether a route noted an act (written since, or not yet). */
  noted: boolean;
  write(note: AuditNote): Promise<void>;
}

/**
 * Each request's scope, by its Request (the one object every route of the request shares): not an
 * AsyncLocalStorage, whose context every promise of a run's relay would carry.
 */
const scopes = new WeakMap<Request, Scope>();

/** Notes the request's act (a no-op for a request `auditRequests` does not audit); returns the note to add to. */
export function noteAudit(c: Context, note: AuditNote): AuditNote {
  const scope = scopes.get(c.req.raw);
  if (scope) {
    scope.notes.push(note);
    scope.noted = true;
  }
  return note;
}

/**
 * Writes the note's record now, its outcome `ok` unless it says another: for an act decided well
 * before its response ends (a blocking SendMessage answers when its task settles).
 */
export async function auditDone(c: Context, note: AuditNote): Promise<void> {
  const scope = scopes.get(c.req.raw);
  const at = scope?.notes.indexOf(note) ?? -1;
  if (!scope || at < 0) return;
  scope.notes.splice(at, 1);
  if (!note.recorded) await scope.write({ outcome: 'ok', ...note });
}

/** A request's notes, for code that holds no Context (the A2A request handler). */
export interface RequestAudit {
  note(note: AuditNote): AuditNote;
  done(note: AuditNote): Promise<void>;
}

export function requestAudit(c: Context): RequestAudit {
  return { note: (note) => noteAudit(c, note), done: (note) => auditDone(c, note) };
}

/**
 * A run started (or, for a repeat of its request, found): its record was written with the run's
 * (`core/audit/acts.ts`), so the request's note writes nothing more.
 */
export function noteStarted(note: AuditNote, run: Run): void {
  note.target = `run:${run.runId}`;
  note.recorded = true;
}

/** A cancel that changed the run (this request's, by its id) was recorded with the run's write; any other is the note's to record. */
export function noteCancelled(note: AuditNote, run: Run, requestId: string): void {
  if (run.cancelRequest?.requestId === requestId) note.recorded = true;
  else note.detail = { status: run.status };
}

const requestIds = new WeakMap<object, string>();

/** The request's id: API Gateway's on AWS, else the caller's `X-Request-Id` (bounded), else one made for it. */
export function requestIdOf(c: Context): string {
  let id = requestIds.get(c.req.raw);
  if (id === undefined) {
    const fromAws = (c.env as { event?: { requestContext?: { requestId?: unknown } } } | undefined)?.event?.requestContext?.requestId;
    const given = c.req.header('X-Request-Id')?.trim();
    id = typeof fromAws === 'string' ? fromAws : given && given.length <= 200 ? given : crypto.randomUUID();
    requestIds.set(c.req.raw, id);
  }
  return id;
}

export interface AuditRequestsOptions {
  /** Writes a record (the gateway's `audit.write`). */
  write(entry: AuditEntry): Promise<unknown>;
  /** Who asked: a principal's actor, or the admin's. */
  actorOf(c: Context): AuditActor | undefined;
  /** A record that could not be written: logged with the record, for an operator to keep. */
  onLost(entry: AuditEntry, error: unknown): void;
}

/** Records every note of the request once the response is made (a stream's, when its first event is ready). */
export function auditRequests(options: AuditRequestsOptions): MiddlewareHandler {
  return async (c, next) => {
    const entryOf = (note: AuditNote, refusal: string | undefined): AuditEntry | undefined => {
      const actor = options.actorOf(c);
      if (!actor) return undefined;
      const principal = (c.get('principal') as Principal | undefined)?.tenant;
      const tenant = note.tenant === undefined ? principal : (note.tenant ?? undefined);
      const traceId = traceIdOf(c);
      return {
        ...(tenant !== undefined ? { tenant } : {}),
        actor,
        action: note.action,
        target: note.target,
        outcome: note.outcome ?? refusal ?? 'ok',
        requestId: requestIdOf(c),
        ...(traceId ? { traceId } : {}),
        ...(note.before !== undefined ? { before: note.before } : {}),
        ...(note.after !== undefined ? { after: note.after } : {}),
        ...(note.detail ? { detail: note.detail } : {}),
      };
    };
    const write = async (note: AuditNote, refusal?: string) => {
      const entry = entryOf(note, refusal);
      if (entry) await options.write(entry).catch((error: unknown) => options.onLost(entry, error));
    };
    const scope: Scope = { notes: [], noted: false, write };
    scopes.set(c.req.raw, scope);
    await next();
    // A refusal made before any route could note its act (a body the A2A SDK's transport refused,
    // an agent that does not exist) is recorded as the act it asked for.
    if (!scope.noted) {
      const unnoted = await refusedAct(c);
      if (unnoted) scope.notes.push(unnoted);
    }
    const notes = scope.notes.splice(0).filter((note) => !note.recorded);
    if (notes.length === 0) return;
    const refusal = notes.some((note) => note.outcome === undefined) ? await refusalCode(c.res) : undefined;
    for (const note of notes) await write(note, refusal);
  };
}

/** JSON-RPC's and A2A's error codes (JSON-RPC 2.0 §5.1, A2A §8.2), by name, for a refusal's outcome. */
const RPC_ERRORS: Record<number, string> = {
  [-32700]: 'parse_error',
  [-32600]: 'invalid_request',
  [-32601]: 'method_not_found',
  [-32602]: 'invalid_params',
  [-32603]: 'internal_error',
  [-32001]: 'task_not_found',
  [-32002]: 'task_not_cancelable',
  [-32003]: 'push_notification_not_supported',
  [-32004]: 'unsupported_operation',
  [-32005]: 'content_type_not_supported',
  [-32006]: 'invalid_agent_response',
};

/** The JSON-RPC methods (A2A 1.0's and 0.3's) that change something, and the act each is. */
const RPC_ACTS: Record<string, AuditAction> = {
  SendMessage: 'run.submitted',
  SendStreamingMessage: 'run.submitted',
  'message/send': 'run.submitted',
  'message/stream': 'run.submitted',
  CancelTask: 'run.cancel_requested',
  'tasks/cancel': 'run.cancel_requested',
  CreateTaskPushNotificationConfig: 'push_config.created',
  'tasks/pushNotificationConfig/set': 'push_config.created',
  DeleteTaskPushNotificationConfig: 'push_config.deleted',
  'tasks/pushNotificationConfig/delete': 'push_config.deleted',
};

/** The HTTP+JSON routes (both versions) that change something, by method and path, and the act each is. */
const REST_ACTS: Array<[method: string, path: RegExp, action: AuditAction]> = [
  ['POST', /^\/a2a\/[^/]+\/rest(?:\/v1)?\/message:(?:send|stream)$/, 'run.submitted'],
  ['POST', /^\/a2a\/[^/]+\/rest(?:\/v1)?\/tasks\/.+:cancel$/, 'run.cancel_requested'],
  ['POST', /^\/a2a\/[^/]+\/rest(?:\/v1)?\/tasks\/[^/]+\/pushNotificationConfigs$/, 'push_config.created'],
  ['DELETE', /^\/a2a\/[^/]+\/rest(?:\/v1)?\/tasks\/[^/]+\/pushNotificationConfigs\/.+$/, 'push_config.deleted'],
];

/** A refused A2A request no route noted: the act it asked for, its agent as the target, and the refusal's code. */
async function refusedAct(c: Context): Promise<AuditNote | undefined> {
  const agent = /^\/a2a\/([^/]+)(?:\/|$)/.exec(c.req.path)?.[1];
  if (agent === undefined || agent === '.well-known') return undefined;
  const target = `agent:${decodedOr(agent)}`;
  const rest = REST_ACTS.find(([method, path]) => method === c.req.method && path.test(c.req.path));
  if (rest) {
    const code = await refusalCode(c.res);
    return code === undefined ? undefined : { action: rest[2], target, outcome: code };
  }
  if (c.req.method !== 'POST' || !/^\/a2a\/[^/]+\/?$/.test(c.req.path)) return undefined;
  let method: unknown;
  try {
    method = (JSON.parse(await c.req.text()) as { method?: unknown }).method;
  } catch {
    return undefined;
  }
  const action = typeof method === 'string' ? RPC_ACTS[method] : undefined;
  if (!action) return undefined;
  const status = c.res.status >= 400 ? await refusalCode(c.res) : undefined;
  if (status) return { action, target, outcome: status };
  // A stream is an act under way (and its route noted it): only a JSON answer can be a refusal.
  if (!(c.res.headers.get('Content-Type') ?? '').includes('json')) return undefined;
  try {
    const error = ((await c.res.clone().json()) as { error?: { code?: unknown } }).error;
    if (typeof error?.code === 'number') return { action, target, outcome: RPC_ERRORS[error.code] ?? 'jsonrpc_error' };
  } catch {
    // Not JSON after all: no refusal to record.
  }
  return undefined;
}

/** A path segment decoded, or as it came when it is no valid percent-encoding (a caller's path may be anything). */
function decodedOr(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/** `undefined` for a success; else the error's code as the doors write it (`{ error: { code } }`), or the HTTP status. */
async function refusalCode(response: Response): Promise<string | undefined> {
  if (response.status < 400) return undefined;
  if (!(response.headers.get('Content-Type') ?? '').includes('json')) return `http_${response.status}`;
  try {
    // funduq's `{ error: { code } }`; A2A's HTTP+JSON `google.rpc.Status` (`{ error: { code: 400, status: "INVALID_ARGUMENT" } }`).
    const body = (await response.clone().json()) as { error?: { code?: unknown; status?: unknown } };
    const code = [body.error?.code, body.error?.status].find((value) => typeof value === 'string') as string | undefined;
    if (code !== undefined) return code.toLowerCase();
  } catch {
    // Not JSON: the status says it.
  }
  return `http_${response.status}`;
}

/** The trace the request is part of: its server span's (or the caller's) `traceparent`. */
function traceIdOf(c: Context): string | undefined {
  const traceparent = runHeaders(c)('traceparent');
  const traceId = traceparent?.split('-')[1];
  return traceId && /^[0-9a-f]{32}$/.test(traceId) ? traceId : undefined;
}
