import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { systemClock } from '../../lambdas/adapters/system-clock.js';
import type { Principal } from '../../lambdas/core/model.js';
import { a2aClient, asTask, BINDINGS, send, userMessage as a2aMessage } from '../support/a2a.js';
import { startHeldAgent, type HeldAgent } from '../support/held-agent.js';
import { readSse, startTestGateway, userMessage } from '../support/gateway.js';

const KEYS = new Map<string, Principal>([
  ['key-alice-0123456789', { id: 'alice', tenant: 'acme' }],
  ['key-alma-0123456789', { id: 'alma', tenant: 'acme' }],
  ['key-bob-0123456789', { id: 'bob', tenant: 'globex' }],
]);
const [ALICE, ALMA, BOB] = [...KEYS.keys()];

let gateway: LocalGateway;
let agent: HeldAgent;

beforeAll(async () => {
  agent = await startHeldAgent();
  agent.release();
  gateway = await startTestGateway({ apiKeys: KEYS });
  await gateway.gateway.putAgent({
    id: 'echo',
    description: 'an AG-UI agent on loopback',
    provider: { kind: 'agui-http', url: agent.url },
    takesInterjections: false,
    timeoutSeconds: 30,
    idleTimeoutSeconds: 30,
  });
});
afterAll(async () => {
  await gateway?.close();
  await agent?.close();
});

const id = (name: string) => `${name}-${Math.random().toString(36).slice(2)}`;

function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  return fetch(`${gateway.url}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

describe('principals from an API keys file', () => {
  it('refuses a request with no key or an unknown key on every caller route with 401 unauthorized', async () => {
    const input = { threadId: 't', runId: id('r'), messages: [userMessage('hi')] };
    const rpc = { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 'x' } };
    const credentials: Record<string, string>[] = [{}, { 'x-api-key': 'not-a-key' }, { Authorization: 'Bearer not-a-key' }, { Authorization: `Basic ${ALICE}` }];
    for (const headers of credentials) {
      const responses = [
        await post('/agui/demo', input, headers),
        await fetch(`${gateway.url}/agui/demo/runs/x/events`, { headers }),
        await post('/agui/demo/runs/x/cancel', {}, headers),
        await fetch(`${gateway.url}/threads/t`, { headers }),
        await fetch(`${gateway.url}/agents`, { headers }),
        await post('/a2a/demo', rpc, { ...headers, 'A2A-Version': '1.0' }),
        await fetch(`${gateway.url}/a2a/demo/rest/tasks/x`, { headers: { ...headers, 'A2A-Version': '1.0' } }),
      ];
      for (const response of responses) {
        expect(response.status).toBe(401);
        expect(response.headers.get('WWW-Authenticate')).toMatch(/^Bearer/);
        expect(await response.json()).toMatchObject({ error: { code: 'unauthorized' } });
      }
    }
    expect((await gateway.store.runs.get(input.runId))).toBeUndefined();
  });

  it('takes a key as Authorization: Bearer or as x-api-key; the run records who asked and the agent is told', async () => {
    const threadId = id('keys');
    const first = await readSse(await post('/agui/echo', { threadId, runId: id('r'), messages: [userMessage('one')] }, { Authorization: `Bearer ${ALICE}` }));
    const second = await readSse(await post('/agui/echo', { threadId, runId: id('r'), messages: [userMessage('two')] }, { 'x-api-key': ALMA }));
    expect(first.events.at(-1)?.data.type).toBe('RUN_FINISHED');
    expect(second.events.at(-1)?.data.type).toBe('RUN_FINISHED');

    const view = await (await fetch(`${gateway.url}/threads/${threadId}`, { headers: { 'x-api-key': ALICE } })).json();
    const runs = await Promise.all(view.runs.map((run: { runId: string }) => gateway.store.runs.get(run.runId)));
    expect(runs.map((run) => [run?.principal, run?.tenant])).toEqual([
      ['alice', 'acme'],
      ['alma', 'acme'],
    ]);
    const told = agent.received.filter((input) => input.threadId === threadId).map((input) => input.forwardedProps.funduq.caller);
    expect(told).toEqual([
      { principal: 'alice', tenant: 'acme' },
      { principal: 'alma', tenant: 'acme' },
    ]);
  });

  it('serves the agent card without a key: it tells a caller which credential to bring', async () => {
    const response = await fetch(`${gateway.url}/a2a/demo/.well-known/agent-card.json`, { headers: { 'A2A-Version': '1.0' } });
    expect(response.status).toBe(200);
    // Where a client given the agent's URL without its "/" looks: it is told where the card is, not to bring a key.
    const misplaced = await fetch(`${gateway.url}/a2a/.well-known/agent-card.json`);
    expect(misplaced.status).toBe(404);
  });

  it("scopes a caller's thread id to its tenant: two tenants' \"shared\" are two threads", async () => {
    const threadId = id('shared');
    await readSse(await post('/agui/demo', { threadId, runId: id('r'), messages: [userMessage('from acme')] }, { 'x-api-key': ALICE }));
    await readSse(await post('/agui/demo', { threadId, runId: id('r'), messages: [userMessage('from globex')] }, { 'x-api-key': BOB }));
    const view = async (key: string) => (await (await fetch(`${gateway.url}/threads/${threadId}`, { headers: { 'x-api-key': key } })).json()) as { messages: { content: string }[] };
    expect((await view(ALICE)).messages.map((m) => m.content)).toEqual(['from acme', 'echo: from acme']);
    expect((await view(BOB)).messages.map((m) => m.content)).toEqual(['from globex', 'echo: from globex']);
  });

  it.each(BINDINGS)('lets the stock A2A client speak for a tenant over %s, and no other tenant see its task', async (binding) => {
    const alice = await a2aClient(gateway, binding, 'demo', ALICE);
    const bob = await a2aClient(gateway, binding, 'demo', BOB);
    const task = asTask(await alice.sendMessage(send(a2aMessage('hello'))));
    expect((await alice.getTask({ id: task.id, tenant: '' })).id).toBe(task.id);
    await expect(bob.getTask({ id: task.id, tenant: '' })).rejects.toMatchObject({ name: 'TaskNotFoundError' });
    expect((await gateway.store.runs.get(task.id))?.principal).toBe('alice');
  });
});

describe("a tenant's limits over HTTP", () => {
  let limited: LocalGateway;
  beforeAll(async () => {
    // The rate is counted per clock minute: this gateway's minute starts as the test does, so a
    // real minute's end cannot fall between the runs that spend it and the one it refuses.
    const started = Date.now();
    const minuteStart = Math.floor(started / 60_000) * 60_000 + 1_000;
    const clock = { ...systemClock, now: () => minuteStart + (Date.now() - started) };
    limited = await startTestGateway({ apiKeys: KEYS, tenantRunsPerMinute: 3, tenantConcurrentRuns: 2, clock });
  });
  afterAll(async () => {
    await limited?.close();
  });

  const postTo = (path: string, body: unknown, key: string, headers: Record<string, string> = {}) =>
    fetch(`${limited.url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json', 'x-api-key': key, ...headers }, body: JSON.stringify(body) });

  it('refuses past the unsettled runs with 429 tenant_concurrency_limited, past the minute with 429 tenant_rate_limited, on both doors', async () => {
    // Two slow runs hold the tenant's two places.
    const slow = [1, 2].map(() => postTo('/agui/demo', { threadId: id('t'), runId: id('r'), messages: [userMessage('/slow 40')] }, ALICE));
    expect((await Promise.all(slow)).map((r) => r.status)).toEqual([200, 200]);

    const busy = await postTo('/agui/demo', { threadId: id('t'), runId: id('r'), messages: [userMessage('hi')] }, ALMA);
    expect(busy.status).toBe(429);
    expect(busy.headers.get('Retry-After')).toBe('2');
    expect(await busy.json()).toMatchObject({ error: { code: 'tenant_concurrency_limited' } });
    // Another tenant is not held back by acme's runs.
    expect((await postTo('/agui/demo', { threadId: id('t'), runId: id('r'), messages: [userMessage('hi')] }, BOB)).status).toBe(200);

    for (const response of await Promise.all(slow)) await readSse(response);
    const third = await postTo('/agui/demo', { threadId: id('t'), runId: id('r'), messages: [userMessage('third')] }, ALICE);
    await readSse(third);
    expect(third.status).toBe(200);

    // The minute's three runs are spent: every door says when the next minute starts.
    const agui = await postTo('/agui/demo', { threadId: id('t'), runId: id('r'), messages: [userMessage('fourth')] }, ALICE);
    expect(agui.status).toBe(429);
    const wait = Number(agui.headers.get('Retry-After'));
    expect(wait).toBeGreaterThanOrEqual(1);
    expect(wait).toBeLessThanOrEqual(60);
    expect(await agui.json()).toMatchObject({ error: { code: 'tenant_rate_limited' } });

    const message = { messageId: id('m'), role: 'ROLE_USER', parts: [{ text: 'fourth' }] };
    const rpc = await postTo('/a2a/demo', { jsonrpc: '2.0', id: 7, method: 'SendMessage', params: { message } }, ALICE, { 'A2A-Version': '1.0' });
    expect(rpc.status).toBe(429);
    expect(Number(rpc.headers.get('Retry-After'))).toBeGreaterThanOrEqual(1);
    expect(await rpc.json()).toMatchObject({ id: 7, error: { code: -32000, message: expect.stringContaining('this minute') } });

    const rest = await postTo('/a2a/demo/rest/message:send', { message }, ALICE, { 'A2A-Version': '1.0' });
    expect(rest.status).toBe(429);
    expect(rest.headers.get('Retry-After')).toMatch(/^\d+$/);
    expect(await rest.json()).toMatchObject({ error: { code: 429, status: 'RESOURCE_EXHAUSTED', details: [{ reason: 'TENANT_RATE_LIMITED' }] } });
  });
});
