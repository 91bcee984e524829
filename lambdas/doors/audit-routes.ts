import { Hono, type Context } from 'hono';
import { AUDIT_ACTIONS, type AuditAction, type AuditEntry, type AuditQuery } from '../core/audit/record.js';
import type { Gateway } from '../core/gateway.js';
import type { Principal } from '../core/model.js';
import { errorResponse } from './http-errors.js';

type Env = { Variables: { principal: Principal } };

const PAGE_LIMIT = { default: 100, most: 1000 };
const DAY_MS = 24 * 60 * 60_000;
const MAX_RANGE_DAYS = 400;

/**
 * A listing's query from the URL: `tenant`, `actor`, `action`, `target`, `from`, `to` (ISO times;
 * by default the last day), `limit`, `cursor`. A bad one is `invalid_input` naming the parameter.
 */
function readQuery(c: Context, now: number, tenant?: string): { ok: true; value: AuditQuery } | { ok: false; message: string } {
  const from = c.req.query('from') || new Date(now - DAY_MS).toISOString();
  const to = c.req.query('to') || new Date(now + 60_000).toISOString();
  for (const [name, value] of [['from', from], ['to', to]] as const) {
    if (Number.isNaN(Date.parse(value))) return { ok: false, message: `${name} must be an ISO 8601 time, such as 2026-12-01T00:00:00Z` };
  }
  // A listing reads the log a day at a time (DynamoDB): a range is at most the audit records' default retention.
  if (Date.parse(to) - Date.parse(from) > MAX_RANGE_DAYS * DAY_MS) return { ok: false, message: `from and to may be at most ${MAX_RANGE_DAYS} days apart: list a longer time in parts` };
  const limitText = c.req.query('limit');
  const limit = limitText === undefined || limitText === '' ? PAGE_LIMIT.default : /^\d{1,4}$/.test(limitText) ? Number(limitText) : NaN;
  if (!(limit >= 1 && limit <= PAGE_LIMIT.most)) return { ok: false, message: `limit must be a whole number from 1 to ${PAGE_LIMIT.most}` };
  const action = c.req.query('action') || undefined;
  if (action !== undefined && !AUDIT_ACTIONS.includes(action as AuditAction)) return { ok: false, message: `action must be one of ${AUDIT_ACTIONS.join(', ')}` };
  const given = tenant ?? (c.req.query('tenant') || undefined);
  const actor = c.req.query('actor') || undefined;
  const target = c.req.query('target') || undefined;
  const cursor = c.req.query('cursor') || undefined;
  return {
    ok: true,
    value: {
      from: new Date(from).toISOString(),
      to: new Date(to).toISOString(),
      limit,
      ...(given !== undefined ? { tenant: given } : {}),
      ...(actor !== undefined ? { actor } : {}),
      ...(action !== undefined ? { action: action as AuditAction } : {}),
      ...(target !== undefined ? { target } : {}),
      ...(cursor !== undefined ? { cursor } : {}),
    },
  };
}

async function listing(c: Context, gateway: Gateway, query: AuditQuery): Promise<Response> {
  try {
    const page = await gateway.audit.list(query);
    return c.json({ records: page.records, ...(page.cursor ? { cursor: page.cursor } : {}) });
  } catch (error) {
    if (error instanceof RangeError) return errorResponse(c, 'invalid_input', 'cursor: not one this listing gave; start again without it');
    throw error;
  }
}

/** The admin's audit routes: `GET /admin/audit` (every tenant's), `/admin/audit/export` (NDJSON), `/admin/audit/key`, `/admin/audit/head`. */
export function adminAuditRoutes(door: Hono, gateway: Gateway): void {
  door.get('/audit', async (c) => {
    const query = readQuery(c, gateway.audit.now());
    return query.ok ? listing(c, gateway, query.value) : errorResponse(c, 'invalid_input', query.message);
  });

  door.get('/audit/key', (c) =>
    gateway.audit.publicKey ? c.json(auditPublicJwk(gateway.audit.publicKey)) : errorResponse(c, 'not_found', 'this gateway seals no audit log (it has no identity key)'),
  );

  door.get('/audit/head', async (c) => {
    const head = await gateway.audit.head();
    return c.json(head ? { seq: head.seq, hash: head.hash, to: head.to } : { seq: 0 });
  });

  door.get('/audit/export', async (c) => {
    const lines = gateway.audit.export();
    const encoder = new TextEncoder();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const next = await lines.next();
        if (next.done) controller.close();
        else controller.enqueue(encoder.encode(`${next.value}\n`));
      },
      async cancel() {
        await lines.return(undefined);
      },
    });
    return c.body(body, 200, { 'Content-Type': 'application/x-ndjson', 'Content-Disposition': 'attachment; filename="funduq-audit.ndjson"' });
  });
}

/** A tenant's own records: `GET /audit`, with the admin listing's filters but the tenant its caller's. */
export function tenantAuditDoor(gateway: Gateway) {
  const door = new Hono<Env>();
  door.get('/', async (c) => {
    const query = readQuery(c, gateway.audit.now(), c.get('principal').tenant);
    return query.ok ? listing(c, gateway, query.value) : errorResponse(c, 'invalid_input', query.message);
  });
  return door;
}

/** funduq's public key as a JWK (RFC 8037), for `GET /admin/audit/key`: what the verifier is given. */
function auditPublicJwk(publicKey: string) {
  return { kty: 'OKP', crv: 'Ed25519', x: publicKey, alg: 'EdDSA', kid: publicKey, use: 'sig' };
}

/** An audit record the store did not take, as the error an operator reads in the log: the record whole, so it can be kept by hand. */
export function lostAudit(entry: AuditEntry, error: unknown): Error & { code: string } {
  const lost = new Error(`audit_write_failed: an audit record was not written (${error instanceof Error ? error.message : String(error)}); keep it from this line: ${JSON.stringify(entry)}`, { cause: error });
  return Object.assign(lost, { code: 'audit_write_failed' });
}
