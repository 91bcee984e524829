import { Hono, type Context } from 'hono';
import { z } from 'zod';
import type { Gateway } from '../core/gateway.js';
import type { UsageGroup } from '../core/metering.js';
import type { Principal } from '../core/model.js';
import { errorResponse } from './http-errors.js';
import { describeIssue, readJson } from './input.js';
import { noteAudit } from './audit.js';

type Env = { Variables: { principal: Principal } };

const GROUPS: readonly UsageGroup[] = ['agent', 'day', 'model'];
const PAGE_LIMIT = { default: 50, most: 500 };

/** A tenant's budget as `PUT /admin/tenants/{tenant}` takes it: tokens and/or a cost, per UTC day or month. */
export const BudgetSchema = z
  .object({
    period: z.enum(['day', 'month']),
    // Bounded as prices are: a store keeps numbers between 1e-130 and 1e125 (DynamoDB), and a budget past these means none.
    tokens: z.number().int().positive().max(Number.MAX_SAFE_INTEGER).optional(),
    cost: z.object({ amount: z.number().min(1e-6, 'must be at least 0.000001').max(1e15), currency: z.string().regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code such as "USD"') }).strict().optional(),
  })
  .strict()
  .refine((budget) => budget.tokens !== undefined || budget.cost !== undefined, 'needs tokens, cost or both');
const TenantSchema = z.object({ budget: BudgetSchema.nullable() }).strict();

/** The range and groups of a usage read, from its query: `from`, `to` (ISO times), `agentId`, `groupBy=agent,day,model`. */
function readQuery(c: Context, gateway: Gateway) {
  const range = gateway.usage.range({ from: c.req.query('from') || undefined, to: c.req.query('to') || undefined });
  if (!range.ok) return range;
  const groupBy = (c.req.query('groupBy') ?? '').split(',').map((group) => group.trim()).filter((group) => group !== '');
  const unknown = groupBy.find((group) => !GROUPS.includes(group as UsageGroup));
  if (unknown !== undefined) return { ok: false as const, code: 'invalid_input' as const, message: `groupBy takes ${GROUPS.join(', ')}, not "${unknown}"` };
  const agentId = c.req.query('agentId') || undefined;
  return { ok: true as const, value: { ...range.value, ...(agentId ? { agentId } : {}), groupBy: groupBy as UsageGroup[] } };
}

function readLimit(c: Context): number | undefined {
  const given = c.req.query('limit');
  if (given === undefined || given === '') return PAGE_LIMIT.default;
  return /^\d{1,4}$/.test(given) && Number(given) >= 1 && Number(given) <= PAGE_LIMIT.most ? Number(given) : undefined;
}

/** The caller's own tenant's usage: `GET /usage` (sums, groups, its budget) and `GET /usage/runs` (a page of records). */
export function usageDoor(gateway: Gateway) {
  const door = new Hono<Env>();

  door.get('/', async (c) => {
    const query = readQuery(c, gateway);
    if (!query.ok) return errorResponse(c, query.code, query.message);
    const { groupBy, ...range } = query.value;
    return c.json(await gateway.usage.report({ ...range, tenant: c.get('principal').tenant }, groupBy));
  });

  door.get('/runs', async (c) => {
    const query = readQuery(c, gateway);
    if (!query.ok) return errorResponse(c, query.code, query.message);
    const limit = readLimit(c);
    if (limit === undefined) return errorResponse(c, 'invalid_input', `limit must be a whole number from 1 to ${PAGE_LIMIT.most}`);
    const { groupBy: _groupBy, ...range } = query.value;
    const page = await gateway.usage.page({ ...range, tenant: c.get('principal').tenant, limit, cursor: c.req.query('cursor') || undefined });
    return page.ok ? c.json(page.value) : errorResponse(c, page.code, page.message);
  });

  return door;
}

/**
 * Usage across tenants and the tenants' budgets, for the admin door: `GET /usage` (a `tenant`
 * filter), `GET /usage/export` (newline-delimited CloudEvents 1.0, one per run: OpenMeter, Stripe
 * meter events and Lago ingest them), `PUT` and `GET /tenants/{tenant}`.
 */
export function adminUsageRoutes(door: Hono, gateway: Gateway, source: (c: Context) => string): void {
  door.get('/usage', async (c) => {
    const query = readQuery(c, gateway);
    if (!query.ok) return errorResponse(c, query.code, query.message);
    const { groupBy, ...range } = query.value;
    const tenant = c.req.query('tenant') || undefined;
    return c.json(await gateway.usage.report({ ...range, ...(tenant ? { tenant } : {}) }, groupBy));
  });

  door.get('/usage/export', async (c) => {
    const query = readQuery(c, gateway);
    if (!query.ok) return errorResponse(c, query.code, query.message);
    const { groupBy: _groupBy, ...range } = query.value;
    const from = source(c);
    const encoder = new TextEncoder();
    const records = gateway.usage.records(range);
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const next = await records.next();
        if (next.done) {
          controller.close();
          return;
        }
        const record = next.value;
        // The run id is the event's id: a meter that ingests an export twice counts each run once.
        const event = {
          specversion: '1.0',
          type: 'dev.funduq.run.usage',
          source: from,
          subject: record.tenant,
          id: record.runId,
          time: record.endedAt,
          datacontenttype: 'application/json',
          data: record,
        };
        controller.enqueue(encoder.encode(`${JSON.stringify(event)}\n`));
      },
      async cancel() {
        await records.return(undefined);
      },
    });
    return c.body(body, 200, { 'Content-Type': 'application/x-ndjson' });
  });

  door.get('/tenants/:tenant', async (c) => c.json(await gateway.usage.tenant(c.req.param('tenant'))));

  door.put('/tenants/:tenant', async (c) => {
    const tenant = c.req.param('tenant');
    const note = noteAudit(c, { action: 'tenant.budget_changed', target: `tenant:${tenant}`, tenant });
    const body = await readJson(c);
    if (!body.ok) return errorResponse(c, 'invalid_input', body.message);
    const parsed = TenantSchema.safeParse(body.value);
    if (!parsed.success) return errorResponse(c, 'invalid_input', describeIssue('Tenant', parsed.error));
    note.before = (await gateway.usage.tenant(tenant)).budget ?? null;
    await gateway.usage.setBudget(tenant, parsed.data.budget);
    const view = await gateway.usage.tenant(tenant);
    note.after = view.budget ?? null;
    return c.json(view);
  });
}
