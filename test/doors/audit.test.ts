import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { AgentCard, type StreamResponse, type Task } from '@a2a-js/sdk';
import { Client, ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory } from '@a2a-js/sdk/client';
import { LegacyJsonRpcTransport, LegacyRestTransport } from '@a2a-js/sdk/compat/v0_3/client';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditRecord } from '../../lambdas/core/audit/record.js';
import { parseApiKeys } from '../../lambdas/doors/api-keys.js';
import { createApp } from '../../lambdas/doors/app.js';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { send, userMessage as a2aMessage } from '../support/a2a.js';
import { readSse, startTestGateway } from '../support/gateway.js';

const ALICE = 'key-of-alice';
const ADMIN = 'the-admin-token';
const keys = parseApiKeys(JSON.stringify({ [ALICE]: { principal: 'alice', tenant: 'acme' } }));
if (!keys.ok) throw new Error(keys.message);

let gateway: LocalGateway;
/** Every route the doors serve (the route table), and a matcher from a request to its route. */
let routes: string[];
const matcher = new Hono();

/** What each HTTP request did to the audit log: the records it added. */
interface Observed {
  route: string;
  /** The JSON-RPC method, for a request to the JSON-RPC endpoint. */
  rpc?: string;
  status: number;
  identified: boolean;
  added: AuditRecord[];
}
const observed: Observed[] = [];

async function allRecords(): Promise<AuditRecord[]> {
  const now = Date.now();
  return (await gateway.store.audit.list({ from: new Date(now - 3_600_000).toISOString(), to: new Date(now + 3_600_000).toISOString(), limit: 1000 })).records;
}

/** fetch, with the request's route and the audit records it added noted (written before the response's head, so read once it is here). */
const watched: typeof fetch = async (input, init) => {
  const request = new Request(input, init);
  const url = new URL(request.url);
  const route = await (await matcher.request(url.pathname, { method: request.method })).text();
  const body = request.method === 'POST' ? await request.clone().text() : '';
  const rpc = route.startsWith('POST /a2a/:agentId') && !route.includes('rest') ? (JSON.parse(body) as { method?: string }).method : undefined;
  const before = new Set((await allRecords()).map((r) => r.id));
  const response = await fetch(request);
  const added = (await allRecords()).filter((r) => !before.has(r.id));
  const identified = request.headers.has('x-api-key') || request.headers.get('authorization') === `Bearer ${ADMIN}` || url.pathname.includes('agent-card');
  observed.push({ route, ...(rpc ? { rpc } : {}), status: response.status, identified, added });
  return response;
};

const asAlice = (init: RequestInit = {}): RequestInit => ({ ...init, headers: { 'content-type': 'application/json', 'x-api-key': ALICE, ...(init.headers as Record<string, string>) } });
const asAdmin = (init: RequestInit = {}): RequestInit => ({ ...init, headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN}`, ...(init.headers as Record<string, string>) } });
const aliceFetch: typeof fetch = (input, init) => {
  const headers = new Headers(init?.headers);
  headers.set('x-api-key', ALICE);
  return watched(input, { ...init, headers });
};
const url = (path: string) => `${gateway.url}${path}`;

/** The routes whose requests change something, and the JSON-RPC methods that do. */
const CHANGES = [
  /^PUT \/admin\//,
  /^DELETE \/admin\//,
  /^POST \/agui\//,
  /^POST \/a2a\/:agentId\/rest(\/v1)?\/(:verb|tasks\/:task\{\.\+:cancel\}|tasks\/:task\{\[\^\/\]\+\}\/pushNotificationConfigs$)/,
  /^DELETE \/a2a\//,
];
const RPC_CHANGES = new Set(['SendMessage', 'SendStreamingMessage', 'CancelTask', 'CreateTaskPushNotificationConfig', 'DeleteTaskPushNotificationConfig', 'message/send', 'message/stream', 'tasks/cancel', 'tasks/pushNotificationConfig/set', 'tasks/pushNotificationConfig/delete']);
const changes = (o: Observed) => (o.rpc !== undefined ? RPC_CHANGES.has(o.rpc) : CHANGES.some((pattern) => pattern.test(o.route)));

beforeAll(async () => {
  gateway = await startTestGateway({ apiKeys: keys.keys, adminToken: ADMIN, pushAllowHttp: true, push: { allowLoopback: true }, auditSealMs: 3_600_000 });
  const app = createApp({ gateway: gateway.gateway, admin: { agents: { view: (a: unknown) => a, parse: () => ({ ok: false }) } as never }, pushKeys: async () => [] });
  routes = [...new Set(app.routes.filter((r) => r.method !== 'ALL').map((r) => `${r.method} ${r.path}`))];
  for (const route of routes) {
    const [method, path] = route.split(' ');
    matcher.on(method, path, (c) => c.text(route));
  }
  matcher.notFound((c) => c.text('none'));
});
afterAll(async () => {
  await gateway?.close();
});

function stockClient(binding: 'JSONRPC' | 'HTTP+JSON'): Promise<Client> {
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      preferredTransports: [binding],
      transports: [new JsonRpcTransportFactory({ fetchImpl: aliceFetch }), new RestTransportFactory({ fetchImpl: aliceFetch })],
    }),
  );
  return factory.createFromUrl(`${gateway.url}/a2a/demo/`);
}

async function legacyClients(): Promise<Client[]> {
  const legacyCard = await (await watched(url('/a2a/demo/.well-known/agent-card.json'))).json();
  const card = AgentCard.fromJSON(await (await watched(url('/a2a/demo/.well-known/agent-card.json'), { headers: { 'A2A-Version': '1.0' } })).json());
  const restUrl = legacyCard.additionalInterfaces.find((i: { transport: string }) => i.transport === 'HTTP+JSON').url;
  return [new Client(new LegacyJsonRpcTransport({ endpoint: legacyCard.url, fetchImpl: aliceFetch }), card), new Client(new LegacyRestTransport({ endpoint: restUrl, fetchImpl: aliceFetch }), card)];
}

async function collect(stream: AsyncGenerator<StreamResponse>): Promise<StreamResponse[]> {
  const events: StreamResponse[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

const quietly = <T>(work: Promise<T>) => work.catch((error: unknown) => error);

/** Every A2A method a stock client has, the changes among them valid and refused. */
async function driveA2a(client: Client): Promise<void> {
  const task = (await client.sendMessage(send(a2aMessage('hello')))) as Task;
  const asked = (await collect(client.sendMessageStream(send(a2aMessage('/ask')))))[0].payload!.value as Task;
  await client.sendMessage(send(a2aMessage('yes', { taskId: asked.id })));
  await client.getTask({ tenant: '', id: task.id, historyLength: undefined });
  await quietly(client.listTasks({ tenant: '', contextId: '', status: 0, pageSize: 10, pageToken: '', historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: false }));
  await client.createTaskPushNotificationConfig({ tenant: '', id: 'hook', taskId: task.id, url: 'http://127.0.0.1:9/hook', token: '', authentication: undefined });
  await client.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'hook' });
  await client.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' });
  await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'hook' });
  // Refused: the task is done, or there is none.
  await quietly(client.cancelTask({ tenant: '', id: task.id, metadata: undefined }));
  await quietly(client.deleteTaskPushNotificationConfig({ tenant: '', taskId: 'no-such-task', id: 'hook' }));
  await quietly(collect(client.resubscribeTask({ tenant: '', id: task.id })));
}

describe('the audit log of every route', () => {
  beforeAll(async () => {
    const run = (body: Record<string, unknown>, init = asAlice()) =>
      watched(url('/agui/demo'), { method: 'POST', ...init, body: JSON.stringify({ threadId: 't-audit', runId: `r-${Math.random().toString(36).slice(2)}`, messages: [{ id: `m-${Math.random()}`, role: 'user', content: 'hi' }], tools: [], context: [], state: {}, forwardedProps: {}, ...body }) });
    // AG-UI: a run, an ask and its answer, a refused answer, a bad body, an unknown agent, a cancel of a settled run, a replay.
    const first = await run({});
    const runId = (await readSse(first)).events[0].data.runId as string;
    const ask = await readSse(await run({ messages: [{ id: 'ask-1', role: 'user', content: '/ask' }] }));
    const interrupt = (ask.events.at(-1)!.data.outcome as { interrupts: { id: string }[] }).interrupts[0];
    await readSse(await run({ messages: [], resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { approved: true } }] }));
    await readSse(await run({ messages: [], resume: [{ interruptId: 'no-such-interrupt', status: 'resolved', payload: {} }] }));
    await watched(url('/agui/demo'), { method: 'POST', ...asAlice(), body: '{not json' });
    await watched(url('/agui/nobody'), { method: 'POST', ...asAlice(), body: JSON.stringify({ threadId: 't-x', runId: 'r-x', messages: [], tools: [], context: [], state: {}, forwardedProps: {} }) });
    await watched(url(`/agui/demo/runs/${runId}/cancel`), { method: 'POST', ...asAlice() });
    await readSse(await watched(url(`/agui/demo/runs/${runId}/events`), asAlice()));
    // Without a credential: no identity, no record.
    await watched(url('/agui/demo'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    // The tenant's reads.
    for (const path of ['/agents', '/threads/t-audit', '/usage', '/usage/runs', '/audit', '/readyz', '/healthz', '/.well-known/jwks.json', '/a2a/.well-known/agent-card.json']) await watched(url(path), asAlice());

    // A2A: 1.0 over both bindings, and 0.3 over both through the compat layer.
    for (const client of [await stockClient('JSONRPC'), await stockClient('HTTP+JSON'), ...(await legacyClients())]) await driveA2a(client);
    await quietly(collect((await stockClient('HTTP+JSON')).resubscribeTask({ tenant: '', id: 'no-such-task' })));
    // The streaming send of the 0.3 bindings' own routes (message:stream), and a GET subscribe.
    await watched(url('/a2a/demo/rest/tasks/none:subscribe'), asAlice());
    await watched(url('/a2a/demo/rest/v1/tasks/none:subscribe'), asAlice());
    await watched(url('/a2a/demo/rest/v1/tasks/none:subscribe'), asAlice({ method: 'POST', body: '{}' }));
    await watched(url('/a2a/demo/rest/v1/card'), asAlice());
    await watched(url('/a2a/demo/rest/extendedAgentCard'), asAlice());
    await watched(url('/a2a/demo'), asAlice({ method: 'POST', headers: { 'A2A-Version': '1.0' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'GetExtendedAgentCard', params: {} }) }));
    await watched(url('/a2a/demo/rest/tasks?pageSize=5'), asAlice());
    // Refused before any route could note its act: by the SDK's transport, or for want of the agent.
    const rpc = (agentId: string, method: string, params: unknown) =>
      watched(url(`/a2a/${agentId}`), asAlice({ method: 'POST', headers: { 'A2A-Version': '1.0' }, body: JSON.stringify({ jsonrpc: '2.0', id: 7, method, params }) }));
    await rpc('demo', 'SendMessage', { message: 42 });
    await rpc('nobody', 'CancelTask', { id: 'some-task' });
    await rpc('demo', 'GetTask', { id: 42 });
    await watched(url('/a2a/nobody/rest/message:send'), asAlice({ method: 'POST', body: '{}' }));
    await watched(url('/a2a/demo/rest/message:send'), asAlice({ method: 'POST', body: '{oops' }));
    await watched(url('/a2a/demo/rest/v1/tasks/t1/pushNotificationConfigs'), asAlice({ method: 'POST', body: '[]' }));

    // Admin: every change with its values, valid and refused, and every read.
    const agent = { url: 'http://127.0.0.1:9/agent', description: 'an agent at nowhere' };
    await watched(url('/admin/agents/helper'), asAdmin({ method: 'PUT', body: JSON.stringify(agent) }));
    await watched(url('/admin/agents/helper'), asAdmin({ method: 'PUT', body: JSON.stringify({ ...agent, description: 'changed' }) }));
    await watched(url('/admin/agents/helper'), asAdmin({ method: 'PUT', body: JSON.stringify({ nonsense: true }) }));
    await watched(url('/admin/agents/helper'), asAdmin({ method: 'DELETE' }));
    await watched(url('/admin/agents/helper'), asAdmin({ method: 'DELETE' }));
    await watched(url('/admin/tenants/acme'), asAdmin({ method: 'PUT', body: JSON.stringify({ budget: { period: 'day', tokens: 1_000_000 } }) }));
    await watched(url('/admin/tenants/acme'), asAdmin({ method: 'PUT', body: JSON.stringify({ budget: { period: 'year' } }) }));
    const provider = { publicKey: gateway.link.publicKey, agents: ['demo'], maxConcurrentRuns: 2 };
    await watched(url('/admin/providers/p1'), asAdmin({ method: 'PUT', body: JSON.stringify(provider) }));
    await watched(url('/admin/providers/p1'), asAdmin({ method: 'DELETE' }));
    await watched(url('/admin/tenants/acme/principals/alice'), asAdmin({ method: 'PUT', body: JSON.stringify({ publicKeys: [gateway.link.publicKey] }) }));
    await watched(url('/admin/tenants/acme/principals/alice'), asAdmin({ method: 'GET' }));
    await watched(url('/admin/tenants/acme/principals/alice'), asAdmin({ method: 'DELETE' }));
    await watched(url('/admin/tenants/acme/principals/alice'), asAdmin({ method: 'DELETE' }));
    // Retention: a tenant's policy (valid and refused), a hold on the tenant and on one of its threads (and on none).
    await watched(url('/admin/tenants/acme/retention'), asAdmin({ method: 'PUT', body: JSON.stringify({ contentDays: 400 }) }));
    await watched(url('/admin/tenants/acme/retention'), asAdmin({ method: 'PUT', body: JSON.stringify({ contentDays: 0 }) }));
    await watched(url('/admin/tenants/acme/hold'), asAdmin({ method: 'PUT', body: JSON.stringify({ reason: 'a case' }) }));
    await watched(url('/admin/tenants/acme/hold'), asAdmin({ method: 'DELETE' }));
    await watched(url('/admin/tenants/acme/threads/t-audit/hold'), asAdmin({ method: 'PUT' }));
    await watched(url('/admin/tenants/acme/threads/no-such-thread/hold'), asAdmin({ method: 'PUT' }));
    await watched(url('/admin/tenants/acme/threads/t-audit/hold'), asAdmin({ method: 'DELETE' }));
    // A wrong admin token: no identity, no record.
    await watched(url('/admin/agents/helper'), { method: 'DELETE', headers: { authorization: 'Bearer wrong' } });
    for (const path of ['/admin/agents', '/admin/agents/demo', '/admin/link', '/admin/providers', '/admin/providers/p1', '/admin/usage', '/admin/usage/export', '/admin/tenants/acme', '/admin/tenants/acme/retention', '/admin/audit', '/admin/audit/key', '/admin/audit/head', '/admin/audit/export']) {
      await (await watched(url(path), asAdmin())).text();
    }
  });

  it('drives every route of the route table', () => {
    const driven = new Set(observed.map((o) => o.route));
    expect(routes.filter((route) => !driven.has(route))).toEqual([]);
  });

  it('writes exactly one record for each request that changed something or was refused after its caller was known, and none for a read', () => {
    const wrong = observed.filter((o) => o.added.length !== (changes(o) && o.identified && o.route !== 'none' ? 1 : 0));
    expect(wrong.map((o) => `${o.route} ${o.rpc ?? ''} (${o.status}): ${o.added.length} records`)).toEqual([]);
    // Each names what was done and to what, who did it, and how it ended.
    for (const o of observed.filter((o) => o.added.length === 1)) {
      const [record] = o.added;
      expect(record.target).toMatch(/^(run|task|agent|tenant|thread|provider|principal|push_config):./);
      expect(record.actor).toEqual(o.route.includes('/admin/') ? { kind: 'admin', principal: 'admin', credentialId: expect.stringMatching(/^[0-9a-f]{16}$/) } : { kind: 'principal', principal: 'alice', credentialId: expect.stringMatching(/^[0-9a-f]{16}$/) });
      expect(JSON.stringify(record)).not.toContain(ALICE);
      expect(JSON.stringify(record)).not.toContain(ADMIN);
    }
  });

  it('names the outcome: ok, or the code a request was refused with', () => {
    const outcomes = observed.flatMap((o) => o.added.map((r) => `${r.action} ${r.outcome}`));
    expect(outcomes).toEqual(
      expect.arrayContaining([
        'run.submitted ok',
        'ask.answered ok',
        'ask.answered no_open_ask',
        'run.submitted invalid_input',
        'run.submitted agent_not_found',
        'run.cancel_requested task_not_cancelable',
        'push_config.deleted run_not_found',
        'push_config.created ok',
        'push_config.deleted ok',
        'agent.registered ok',
        'agent.changed ok',
        'agent.changed invalid_input',
        'agent.deleted ok',
        'agent.deleted agent_not_found',
        'tenant.budget_changed ok',
        'tenant.budget_changed invalid_input',
        'provider.registered ok',
        'provider.deleted ok',
        'principal.keys_changed ok',
        'principal.keys_deleted ok',
        'tenant.retention_changed ok',
        'tenant.retention_changed invalid_input',
        'tenant.hold_placed ok',
        'tenant.hold_lifted ok',
        'thread.hold_placed ok',
        'thread.hold_placed thread_not_found',
        'thread.hold_lifted ok',
        'principal.keys_deleted principal_not_found',
        'run.cancel_requested agent_not_found',
        'run.submitted agent_not_found',
        'run.submitted invalid_argument',
        'push_config.created http_400',
      ]),
    );
  });

  it('keeps an admin change\'s values before and after, and an answer\'s run', async () => {
    const records = await allRecords();
    expect(records.find((r) => r.action === 'agent.changed' && r.outcome === 'ok')).toMatchObject({ before: { description: 'an agent at nowhere' }, after: { description: 'changed' } });
    expect(records.find((r) => r.action === 'tenant.budget_changed' && r.outcome === 'ok')).toMatchObject({ tenant: 'acme', before: null, after: { period: 'day', tokens: 1_000_000 } });
    const answered = records.find((r) => r.action === 'ask.answered' && r.outcome === 'ok');
    expect(answered?.detail).toMatchObject({ threadId: 't-audit', answers: expect.any(String) });
  });

  it('lists by filter for the admin, and only the tenant\'s own for a caller', async () => {
    const admin = await (await fetch(url('/admin/audit?action=agent.registered'), asAdmin())).json();
    expect(admin.records.map((r: AuditRecord) => r.target)).toEqual(['agent:helper']);
    const page = await (await fetch(url('/admin/audit?limit=2'), asAdmin())).json();
    expect(page.records).toHaveLength(2);
    const next = await (await fetch(url(`/admin/audit?limit=2&cursor=${encodeURIComponent(page.cursor)}`), asAdmin())).json();
    expect(next.records[0].id > page.records[1].id).toBe(true);
    const own = await (await fetch(url('/audit?actor=alice'), asAlice())).json();
    expect(own.records.length).toBeGreaterThan(10);
    expect(own.records.every((r: AuditRecord) => r.tenant === 'acme')).toBe(true);
    // A tenant's listing names no gateway-wide change (an agent registered).
    expect(((await (await fetch(url('/audit?action=agent.registered'), asAlice())).json()).records as unknown[]).length).toBe(0);
    expect((await fetch(url('/admin/audit?from=yesterday'), asAdmin())).status).toBe(400);
    expect((await fetch(url('/admin/audit?action=run.exploded'), asAdmin())).status).toBe(400);
    expect((await fetch(url('/admin/audit?cursor=forged'), asAdmin())).status).toBe(400);
  });

  it('exports the log sealed, and the offline verifier proves it with the key the gateway publishes', async () => {
    expect(await gateway.gateway.audit.seal()).toBe((await allRecords()).length);
    const key = await (await fetch(url('/admin/audit/key'), asAdmin())).json();
    expect(key).toMatchObject({ kty: 'OKP', crv: 'Ed25519', x: gateway.link.publicKey });
    const exported = await (await fetch(url('/admin/audit/export'), asAdmin())).text();
    const dir = mkdtempSync(join(tmpdir(), 'funduq-audit-'));
    writeFileSync(join(dir, 'export.ndjson'), exported);
    writeFileSync(join(dir, 'key.json'), JSON.stringify(key));
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'bin/audit.ts', 'verify', join(dir, 'export.ndjson'), '--key', join(dir, 'key.json')], { cwd: process.cwd() });
    const head = await (await fetch(url('/admin/audit/head'), asAdmin())).json();
    expect(stdout).toMatch(new RegExp(`^verified: \\d+ records in \\d+ segments; the last segment is ${head.seq}, hash ${head.hash}`, 'm'));
  });
});
