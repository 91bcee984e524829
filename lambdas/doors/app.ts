import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { Gateway } from '../core/gateway.js';
import { ANONYMOUS, type Principal } from '../core/model.js';
import { a2aDoor, type A2aDoorOptions } from './a2a/index.js';
import { adminDoor, type AdminOptions } from './admin.js';
import { admission, inTurn, type AdmissionLimits } from './admission.js';
import { isEnabled, rosterEntry } from './agent-definition.js';
import { aguiDoor } from './agui.js';
import { consoleDoor, type ConsoleOptions } from './console/index.js';
import { usageDoor } from './usage.js';
import { auditRequests } from './audit.js';
import { lostAudit, tenantAuditDoor } from './audit-routes.js';
import type { AuditActor, AuditEntry } from '../core/audit/record.js';
import { errorResponse } from './http-errors.js';
import { jwksDoor, type PublishedKeys } from './jwks.js';
import { openMode, type PrincipalResolver } from './principal.js';
import type { SseOptions } from './sse.js';
import { requestSpans, type DoorTracer } from './tracing.js';

export interface AppOptions {
  gateway: Gateway;
  sse?: Partial<SseOptions>;
  principal?: PrincipalResolver;
  /** The admin routes (`/admin/agents`); absent, there are none. */
  admin?: AdminOptions;
  /** The A2A door's settings: public URL, the cards' version. */
  a2a?: A2aDoorOptions;
  /** The public keys push notifications are signed with: published at `JWKS_PATH`, and named on the agent cards. */
  pushKeys?: PublishedKeys;
  /** Largest request body accepted (default 350 KB: what one run item can hold, with room for its record). */
  maxBodyBytes?: number;
  /** How much one process takes in at once (see admission.ts); absent, no bound (a Lambda instance serves one request at a time). */
  admission?: AdmissionLimits;
  /** Logs unexpected errors (the caller gets a 500 with no detail). */
  onError?: (error: unknown) => void;
  /** Traces each request (and the A2A methods) with this tracer; absent, nothing is traced. */
  tracing?: DoorTracer;
  /** An audit record the store did not take: logged whole (`audit_write_failed`), by default through `onError`. */
  onAuditLost?: (entry: AuditEntry, error: unknown) => void;
  /** The operator's console at `/console` (its tokens, whether it shows content); absent, there is none. */
  console?: Omit<ConsoleOptions, 'sse' | 'publicUrl' | 'onAuditLost'>;
}

/** An agent's card, and where a client looks for one given an agent's URL without its "/". */
const AGENT_CARD = /^\/a2a\/(?:[^/]+\/)?\.well-known\/agent-card\.json$/;

/** Every door as one Hono app, written once and served by @hono/node-server or hono/aws-lambda. */
export function createApp(options: AppOptions) {
  const { gateway } = options;
  const sse: SseOptions = { heartbeatMs: 10_000, ...options.sse };
  const resolve = options.principal ?? openMode;
  const app = new Hono<{ Variables: { principal: Principal } }>();
  // A run's input is stored whole in one DynamoDB item, which holds at most 400 KB.
  const maxBodyBytes = options.maxBodyBytes ?? 350 * 1024;

  // First: a request's span covers its wait for admission too.
  if (options.tracing) app.use('*', requestSpans(options.tracing));
  if (options.admission) app.use('*', admission(options.admission, maxBodyBytes));
  app.use(
    '*',
    bodyLimit({
      maxSize: maxBodyBytes,
      onError: (c) => {
        // The unread rest of the body is still on the socket: the connection cannot be reused.
        c.header('Connection', 'close');
        return errorResponse(c, 'payload_too_large', 'the request body is too large');
      },
    }),
  );
  if (options.admission?.turn) app.use('*', inTurn(options.admission.turn));
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', async (c) => {
    await gateway.ready();
    return c.json({ status: 'ready' });
  });
  // Before the callers' principal: the admin routes have a credential of their own, and a push
  // receiver fetching the keys has none of the gateway's.
  if (options.admin) app.route('/admin', adminDoor(gateway, { ...options.admin, publicUrl: options.a2a?.publicUrl }));
  if (options.console) {
    // The console's pages are relative to `/console/`, its overview is `/console`: a slash typed after it is let go.
    app.get('/console/', (c) => c.redirect('../console', 308));
    app.route('/console', consoleDoor(gateway, { ...options.console, sse, publicUrl: options.a2a?.publicUrl, onAuditLost: options.onAuditLost ?? ((entry, error) => options.onError?.(lostAudit(entry, error))) }));
  }
  if (options.pushKeys) app.route('/', jwksDoor(options.pushKeys));
  app.use('*', async (c, next) => {
    // The agent card names no task and tells a caller which credential to bring (A2A discovery).
    const principal = c.req.method === 'GET' && AGENT_CARD.test(c.req.path) ? ANONYMOUS : await resolve(c);
    if (!principal) {
      c.header('WWW-Authenticate', 'Bearer realm="funduq"');
      return errorResponse(c, 'unauthorized', 'a valid credential is required');
    }
    c.set('principal', principal);
    await next();
  });
  app.use('*', auditRequests({ write: gateway.audit.write, actorOf: principalActor, onLost: options.onAuditLost ?? ((entry, error) => options.onError?.(lostAudit(entry, error))) }));

  app.route('/agui', aguiDoor(gateway, sse));
  app.route('/a2a', a2aDoor(gateway, sse, { onError: options.onError, signsPushes: options.pushKeys !== undefined, tracing: options.tracing, ...options.a2a }));

  app.get('/threads/:threadId', async (c) => {
    const view = await gateway.threadView(c.req.param('threadId'), c.get('principal'));
    return view.ok ? c.json(view.value) : errorResponse(c, view.code, view.message);
  });

  app.route('/usage', usageDoor(gateway));
  app.route('/audit', tenantAuditDoor(gateway));

  app.get('/agents', async (c) => {
    const agents = await gateway.listAgents();
    return c.json({ agents: agents.filter(isEnabled).map(rosterEntry) });
  });

  app.notFound((c) => errorResponse(c, 'not_found', `no route ${c.req.method} ${c.req.path}`));
  app.onError((error, c) => {
    options.onError?.(error);
    return errorResponse(c, 'internal_error', 'the gateway failed to answer; the error was logged');
  });
  return app;
}

export type App = ReturnType<typeof createApp>;

function principalActor(c: { get(name: 'principal'): Principal | undefined }): AuditActor | undefined {
  const principal = c.get('principal');
  return principal && { kind: 'principal', principal: principal.id, ...(principal.credentialId ? { credentialId: principal.credentialId } : {}) };
}
