import { randomUUID } from 'node:crypto';
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DAY_MS } from '../../lambdas/core/retention/policy.js';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { asTask, send, userMessage } from '../support/a2a.js';
import { FakeClock } from '../support/core-harness.js';
import { aguiAgent, readSse, startTestGateway } from '../support/gateway.js';

/**
 * Retention through the doors, on a clock the test moves: the admin's routes, and a thread whose
 * retention ended read by the stock clients of both doors as gone, then deleted by the pass.
 */
const clock = new FakeClock();
let gateway: LocalGateway;
const url = (path: string) => `${gateway.url}${path}`;
const admin = (path: string, method: string, body?: unknown) =>
  fetch(url(`/admin${path}`), { method, headers: { 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

beforeAll(async () => {
  gateway = await startTestGateway({ clock });
});
afterAll(async () => {
  await gateway?.close();
});

describe('retention through the doors', () => {
  it('takes a tenant’s policy from the admin, and refuses one that is not days', async () => {
    expect(await (await admin('/tenants/anonymous/retention', 'GET')).json()).toEqual({
      tenant: 'anonymous',
      policy: { contentDays: null, usageDays: null, auditDays: 400 },
      defaults: { contentDays: null, usageDays: null, auditDays: 400 },
    });
    for (const bad of [{ contentDays: 0 }, { contentDays: 2.5 }, { contentDays: 'a month' }, { auditDays: 30 }, []]) {
      const refused = await admin('/tenants/anonymous/retention', 'PUT', bad);
      expect({ bad, status: refused.status, body: await refused.json() }).toMatchObject({ bad, status: 400, body: { error: { code: 'invalid_input' } } });
    }
    const set = await admin('/tenants/anonymous/retention', 'PUT', { contentDays: 30, usageDays: null });
    expect(await set.json()).toMatchObject({ policy: { contentDays: 30, usageDays: null, auditDays: 400 }, own: { contentDays: 30, usageDays: null } });
  });

  it('reads a thread past its days as gone on both doors, refuses it a run, and deletes it in the next pass', async () => {
    const threadId = `t-${randomUUID()}`;
    const agent = aguiAgent(gateway, threadId);
    agent.messages = [{ id: 'm1', role: 'user', content: 'hello' }];
    await agent.runAgent({ runId: 'run-kept-30-days' });
    const a2a = await new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: ['JSONRPC'], transports: [new JsonRpcTransportFactory()] })).createFromUrl(url('/a2a/demo/'));
    const task = asTask(await a2a.sendMessage(send(userMessage('hello'))));
    expect((await fetch(url(`/threads/${threadId}`))).status).toBe(200);

    clock.advance(31 * DAY_MS);
    expect(await (await fetch(url(`/threads/${threadId}`))).json()).toMatchObject({ error: { code: 'thread_not_found' } });
    expect((await fetch(url('/agui/demo/runs/run-kept-30-days/events'))).status).toBe(404);
    const again = await fetch(url('/agui/demo'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ threadId, runId: 'run-too-late', messages: [{ id: 'm2', role: 'user', content: 'again' }], tools: [], context: [], state: {}, forwardedProps: {} }) });
    expect({ status: again.status, body: await again.json() }).toMatchObject({ status: 410, body: { error: { code: 'thread_expired' } } });
    await expect(a2a.getTask({ tenant: '', id: task.id, historyLength: undefined })).rejects.toThrow(/no task/);
    await expect(a2a.sendMessage(send(userMessage('more', { contextId: task.contextId })))).rejects.toThrow(/retention has ended/);

    // A hold placed before the pass keeps the A2A task's thread: it reads again.
    expect((await admin(`/tenants/anonymous/threads/${task.contextId}/hold`, 'PUT', { reason: 'a case' })).status).toBe(200);
    expect(asTask(await a2a.getTask({ tenant: '', id: task.id, historyLength: undefined })).id).toBe(task.id);

    expect(await gateway.gateway.retention.apply()).toMatchObject({ threads: 1, runs: 1 });
    const from = new Date(clock.now() - DAY_MS).toISOString();
    const records = (await (await fetch(url(`/audit?from=${from}&action=retention.deleted`))).json()) as { records: Array<{ target: string; detail: unknown }> };
    expect(records.records).toEqual([expect.objectContaining({ target: `thread:${threadId}`, detail: expect.objectContaining({ kind: 'content', runs: 1 }) })]);
    // Deleted: the thread id starts a new conversation.
    const fresh = await fetch(url('/agui/demo'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ threadId, runId: 'run-new-start', messages: [{ id: 'm3', role: 'user', content: 'anew' }], tools: [], context: [], state: {}, forwardedProps: {} }) });
    expect((await readSse(fresh)).events.at(-1)?.data.type).toBe('RUN_FINISHED');
  });
});
