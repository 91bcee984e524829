import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../lambdas/core/model.js';
import type { UsageRecord } from '../../lambdas/core/usage.js';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { a2aClient, asTask, send, userMessage as a2aMessage } from '../support/a2a.js';
import { aguiAgent, readSse, startTestGateway, userMessage } from '../support/gateway.js';
import { startMeteredAgent, USAGE, type MeteredAgent } from '../support/metered-agent.js';

const KEYS = new Map<string, Principal>([
  ['key-alice-0123456789', { id: 'alice', tenant: 'acme' }],
  ['key-bob-0123456789', { id: 'bob', tenant: 'globex' }],
]);
const [ALICE, BOB] = [...KEYS.keys()];
const ADMIN = 'admin-token-0123456789';

let gateway: LocalGateway;
let agent: MeteredAgent;

function call(path: string, key: string, init: RequestInit & { json?: unknown } = {}): Promise<Response> {
  const { json, ...rest } = init;
  return fetch(`${gateway.url}${path}`, {
    ...rest,
    headers: { Authorization: `Bearer ${key}`, ...(json !== undefined ? { 'Content-Type': 'application/json' } : {}), ...(rest.headers as Record<string, string>) },
    ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
  });
}

async function aguiRun(key: string, threadId: string, said = 'hello'): Promise<Response> {
  return call('/agui/metered', key, { method: 'POST', json: { threadId, runId: `${threadId}-${Math.random().toString(36).slice(2)}`, messages: [userMessage(said)] } });
}

beforeAll(async () => {
  agent = await startMeteredAgent();
  const { url } = agent;
  gateway = await startTestGateway({ apiKeys: KEYS, adminToken: ADMIN });
  const put = await call('/admin/agents/metered', ADMIN, {
    method: 'PUT',
    json: { url, description: 'reports its usage', prices: { currency: 'USD', perRun: 0.01, perThousandTokens: { m1: { input: 1, output: 2 } } } },
  });
  expect(put.status).toBe(201);
  expect(await put.json()).toMatchObject({ prices: { currency: 'USD', perRun: 0.01 } });
});
afterAll(async () => {
  await gateway?.close();
  await agent?.close();
});

// 0.01 per run + (100 input × 1 + 20 output × 2) / 1,000
const RUN_COST = 0.15;

describe('usage over HTTP', () => {
  let task: string;

  it('is counted for every run of both doors, summed by agent and model on GET /usage, and shown with each run of a thread', async () => {
    const a = await aguiRun(ALICE, 'alice-1');
    expect(a.status).toBe(200);
    await readSse(a);
    const failed = await aguiRun(ALICE, 'alice-2', 'fail');
    await readSse(failed);
    const client = await a2aClient(gateway, 'JSONRPC', 'metered', ALICE);
    task = asTask(await client.sendMessage(send(a2aMessage('hello')))).id;

    const report = await (await call('/usage?groupBy=agent,model', ALICE)).json();
    expect(report.tenant).toBe('acme');
    expect(report.totals).toMatchObject({ runs: 3, tokens: [{ provider: 'openai', model: 'm1', inputTokens: 300, outputTokens: 60, totalTokens: 360 }], cost: [{ amount: 0.45, currency: 'USD' }] });
    expect(report.groups).toMatchObject([{ agent: 'metered', model: 'm1', runs: 3 }]);

    const thread = await (await call('/threads/alice-2', ALICE)).json();
    expect(thread.runs[0]).toMatchObject({ status: 'failed', reason: 'refused', usage: { tokens: USAGE, cost: { amount: RUN_COST, currency: 'USD' } } });
  });

  it('carries the task’s usage in A2A metadata (GetTask, ListTasks)', async () => {
    for (const binding of ['JSONRPC', 'HTTP+JSON'] as const) {
      const client = await a2aClient(gateway, binding, 'metered', ALICE);
      const got = await client.getTask({ id: task, tenant: '' });
      expect((got.metadata as { funduq: { usage: unknown } }).funduq.usage).toEqual({
        runs: 1,
        events: 5,
        bytes: expect.any(Number),
        tokens: USAGE,
        cost: [{ amount: RUN_COST, currency: 'USD' }],
      });
      const listed = await client.listTasks({ tenant: '', contextId: got.contextId, status: 0, pageToken: '', includeArtifacts: false, statusTimestampAfter: undefined });
      expect((listed.tasks[0].metadata as { funduq: { usage: { runs: number } } }).funduq.usage.runs).toBe(1);
    }
  });

  it('pages the records with an opaque cursor, and shows no other tenant any of them', async () => {
    const first = await (await call('/usage/runs?limit=2', ALICE)).json();
    expect(first.records).toHaveLength(2);
    expect(typeof first.cursor).toBe('string');
    const second = await (await call(`/usage/runs?limit=2&cursor=${encodeURIComponent(first.cursor)}`, ALICE)).json();
    expect(second.records).toHaveLength(1);
    expect(second.cursor).toBeUndefined();
    const all: UsageRecord[] = [...first.records, ...second.records];
    expect(all.map((record) => record.outcome).sort()).toEqual(['failed', 'success', 'success']);
    expect(all.every((record) => record.tenant === 'acme' && record.principal === 'alice')).toBe(true);

    expect((await (await call('/usage', BOB)).json()).totals).toEqual({ runs: 0, events: 0, bytes: 0 });
    expect((await (await call('/usage/runs', BOB)).json()).records).toEqual([]);
    // Another tenant's cursor is no cursor of this listing, as a made-up one is not.
    expect((await call(`/usage/runs?cursor=${encodeURIComponent(first.cursor)}`, BOB)).status).toBe(400);
    expect((await call('/usage/runs?cursor=not-a-cursor', ALICE)).status).toBe(400);
    expect((await call('/usage?groupBy=tenant', ALICE)).status).toBe(400);
    expect((await call('/usage?from=yesterday', ALICE)).status).toBe(400);
  });

  it('is read across tenants by the admin, and exported as CloudEvents a meter can ingest', async () => {
    await readSse(await aguiRun(BOB, 'bob-1'));
    expect((await call('/admin/usage', ALICE)).status).toBe(401);
    const everyone = await (await call('/admin/usage?groupBy=agent', ADMIN)).json();
    expect(everyone.totals.runs).toBe(4);
    expect((await (await call('/admin/usage?tenant=globex', ADMIN)).json()).totals.runs).toBe(1);

    const exported = await call('/admin/usage/export', ADMIN);
    expect(exported.headers.get('content-type')).toBe('application/x-ndjson');
    const events = (await exported.text()).trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    const records = [...(await (await call('/usage/runs', ALICE)).json()).records, ...(await (await call('/usage/runs', BOB)).json()).records] as UsageRecord[];
    expect(events.map((event) => event.id).sort()).toEqual(records.map((record) => record.runId).sort());
    for (const event of events) {
      const record = records.find((r) => r.runId === event.id)!;
      expect(event).toEqual({
        specversion: '1.0',
        type: 'dev.funduq.run.usage',
        source: gateway.url,
        subject: record.tenant,
        id: record.runId,
        time: record.endedAt,
        datacontenttype: 'application/json',
        data: record,
      });
    }
  });

  it('refuses a tenant past its budget on both doors with tenant_budget_exhausted and Retry-After to the period’s end, and no one else', async () => {
    const put = await call('/admin/tenants/acme', ADMIN, { method: 'PUT', json: { budget: { period: 'month', tokens: 360 } } });
    expect(put.status).toBe(200);
    expect((await put.json()).budget).toMatchObject({ period: 'month', tokens: 360, spent: { tokens: 360 }, left: { tokens: 0 }, exhausted: true });
    const now = new Date();
    const monthEnd = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1);
    const expectedWait = (monthEnd - Date.now()) / 1000;

    const agui = await aguiRun(ALICE, 'alice-3');
    expect(agui.status).toBe(429);
    expect(await agui.json()).toMatchObject({ error: { code: 'tenant_budget_exhausted' } });
    expect(Math.abs(Number(agui.headers.get('Retry-After')) - expectedWait)).toBeLessThan(60);

    const rpc = await call('/a2a/metered', ALICE, {
      method: 'POST',
      headers: { 'A2A-Version': '1.0' },
      json: { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: 'budget-1', role: 'ROLE_USER', parts: [{ text: 'hi' }] } } },
    });
    expect(rpc.status).toBe(429);
    expect((await rpc.json()).error.code).toBe(-32000);
    expect(Math.abs(Number(rpc.headers.get('Retry-After')) - expectedWait)).toBeLessThan(60);
    const rest = await call('/a2a/metered/rest/message:send', ALICE, {
      method: 'POST',
      headers: { 'A2A-Version': '1.0' },
      json: { message: { messageId: 'budget-2', role: 'ROLE_USER', parts: [{ text: 'hi' }] } },
    });
    expect(rest.status).toBe(429);
    expect((await rest.json()).error).toMatchObject({ status: 'RESOURCE_EXHAUSTED', details: [{ reason: 'TENANT_BUDGET_EXHAUSTED' }] });

    expect((await (await call('/usage', ALICE)).json()).budget).toMatchObject({ exhausted: true, left: { tokens: 0 } });
    const bob = await aguiRun(BOB, 'bob-2');
    expect(bob.status).toBe(200);
    await readSse(bob);

    expect((await call('/admin/tenants/acme', ADMIN, { method: 'PUT', json: { budget: null } })).status).toBe(200);
    const again = await aguiRun(ALICE, 'alice-4');
    expect(again.status).toBe(200);
    await readSse(again);
    expect((await call('/admin/tenants/acme', ADMIN, { method: 'PUT', json: { budget: { period: 'week', tokens: 1 } } })).status).toBe(400);
    // Numbers no store keeps (DynamoDB: 1e-130 to 1e125) are refused with the field, not a 500 at the write.
    for (const budget of [{ period: 'day', tokens: 1e300 }, { period: 'day', cost: { amount: 1e-200, currency: 'USD' } }]) {
      const refused = await call('/admin/tenants/acme', ADMIN, { method: 'PUT', json: { budget } });
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(/budget\.(tokens|cost\.amount)/);
    }
  });

  it('works with the stock AG-UI client too: the refusal is its run error', async () => {
    await call('/admin/tenants/acme', ADMIN, { method: 'PUT', json: { budget: { period: 'day', tokens: 1 } } });
    const agent = aguiAgent(gateway, 'alice-5', 'metered');
    agent.headers = { Authorization: `Bearer ${ALICE}` };
    agent.messages = [userMessage('hello')];
    await expect(agent.runAgent()).rejects.toThrow(/429/);
    await call('/admin/tenants/acme', ADMIN, { method: 'PUT', json: { budget: null } });
  });
});
