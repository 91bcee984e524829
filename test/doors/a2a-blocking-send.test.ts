import type { AddressInfo } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANONYMOUS, type Principal } from '../../lambdas/core/model.js';
import { a2aDoor } from '../../lambdas/doors/a2a/index.js';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { a2aClient, asTask, BINDINGS, send, stateName, userMessage } from '../support/a2a.js';
import { eventually } from '../support/core-harness.js';
import { startTestGateway } from '../support/gateway.js';
import { startHeldAgent, type HeldAgent } from '../support/held-agent.js';

let gateway: LocalGateway;
let held: HeldAgent;
let bounded: { server: ServerType; url: string };

/**
 * The A2A door as the AWS functions serve it, whose streams end at a bound (`maxDurationMs`, 13.5
 * minutes there, 300 ms here), over the same gateway as the local one.
 */
async function boundedDoor(maxDurationMs: number): Promise<{ server: ServerType; url: string }> {
  const app = new Hono<{ Variables: { principal: Principal } }>();
  app.use(async (c, next) => {
    c.set('principal', ANONYMOUS);
    await next();
  });
  app.route('/a2a', a2aDoor(gateway.gateway, { heartbeatMs: 10_000, maxDurationMs }));
  const server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

beforeAll(async () => {
  held = await startHeldAgent();
  gateway = await startTestGateway();
  const admin = await fetch(`${gateway.url}/admin/agents/held`, {
    method: 'PUT',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ url: held.url, description: 'holds every run until the test lets go', timeoutSeconds: 60, idleTimeoutSeconds: 60 }),
  });
  expect(admin.status).toBe(201);
  bounded = await boundedDoor(300);
});
afterAll(async () => {
  held?.release();
  bounded?.server.close();
  await gateway?.close();
  await held?.close();
});

describe.each(BINDINGS)('a blocking SendMessage over %s whose task does not settle within the door’s bound', (binding) => {
  it('answers with the task as it stands once the bound is over (on AWS, before Lambda ends the function), and the task goes on', async () => {
    const client = await a2aClient(bounded, binding, 'held');
    const startedAt = Date.now();
    const task = asTask(await client.sendMessage(send(userMessage('hold on'))));
    expect(Date.now() - startedAt).toBeLessThan(10_000);
    expect(['TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING']).toContain(stateName(task.status?.state));
    await eventually(() => expect(held.received.map((input) => input.runId)).toContain(task.id), 10_000);
  });
});

describe('a blocking SendMessage through a collection of garbage while it waits', () => {
  it('still answers at its bound: nothing the bound rests on is held only weakly', async () => {
    // The collector, asked for by hand (V8's own, exposed at run time): what a busy process does unasked.
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const client = await a2aClient(bounded, 'JSONRPC', 'held');
    let answered = false;
    const sent = client.sendMessage(send(userMessage('hold on through a GC'))).finally(() => (answered = true));
    while (!answered) {
      gc();
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    expect(['TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING']).toContain(stateName(asTask(await sent).status?.state));
  });
});

describe('a blocking SendMessage at a door with no bound (one machine)', () => {
  it('waits until its task settles, as A2A asks', async () => {
    const client = await a2aClient(gateway, 'JSONRPC', 'held');
    const sent = client.sendMessage(send(userMessage('hold on, then finish')));
    await eventually(() => expect(held.received.length).toBeGreaterThanOrEqual(BINDINGS.length + 2), 10_000);
    held.release();
    expect(stateName(asTask(await sent).status?.state)).toBe('TASK_STATE_COMPLETED');
  });
});
