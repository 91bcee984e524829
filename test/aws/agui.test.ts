import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADDRESSED_RUN_ID_KEY } from '../../lambdas/core/interjection.js';
import { runInput } from '../support/aws-box/run-input.js';
import { useAwsBox, type AwsBox } from '../support/aws-box/box.js';
import { eventually } from '../support/core-harness.js';
import { readSse, readSseUntil } from '../support/gateway.js';
import { startHeldAgent, type HeldAgent } from '../support/held-agent.js';
import { auditPublicKey, verifierDeps, sha256Hex } from '../../lambdas/adapters/crypto/audit-seal.js';
import { readExportLine } from '../../lambdas/core/audit/lines.js';
import type { AuditRecord } from '../../lambdas/core/audit/record.js';
import { verifyExport } from '../../lambdas/core/audit/verify.js';

/**
 * The AG-UI door on the deployed shape: every request goes through API Gateway (built from the
 * template) to the bundled door functions, runs through the thread queue to the bundled
 * dispatcher, and every AWS call is checked against the template's IAM.
 */
const aws = useAwsBox();
const held: HeldAgent[] = [];

beforeAll(async () => {
  const { box } = aws;
  const put = await box.admin('PUT', 'agents/demo', { provider: 'demo', description: 'the demo agent', takesInterjections: true });
  expect(put.status).toBe(201);
});

afterAll(async () => {
  for (const agent of held) {
    agent.release();
    await agent.close();
  }
});

/** An agent of its own that holds each run after RUN_STARTED until the test lets go. */
async function heldAgent(box: AwsBox, fields: Record<string, unknown> = {}): Promise<{ id: string; agent: HeldAgent }> {
  const agent = await startHeldAgent();
  held.push(agent);
  const id = `held-${held.length}`;
  const put = await box.admin('PUT', `agents/${id}`, { url: agent.url, description: 'holds its runs', ...fields });
  expect(put.status).toBe(201);
  return { id, agent };
}


/** POSTs a run and leaves its stream unread; the response once its headers arrived. */
function post(box: AwsBox, agentId: string, input: ReturnType<typeof runInput>, signal?: AbortSignal, headers: Record<string, string> = {}): Promise<Response> {
  return box.fetch(`${box.url}/agui/${agentId}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(input), signal });
}

async function thread(box: AwsBox, threadId: string): Promise<{ activeRun?: { runId: string; status: string }; queue: Array<{ runId: string }>; runs: Array<{ runId: string; status: string; parentRunId?: string; reason?: string }>; openAsks: unknown[] }> {
  const response = await box.request('GET', `/threads/${encodeURIComponent(threadId)}`);
  expect(response.status).toBe(200);
  return response.json() as never;
}

async function runOf(box: AwsBox, threadId: string, runId: string) {
  return (await thread(box, threadId)).runs.find((run) => run.runId === runId);
}

// First of the file's tests, so the record holds no thread of another for the pass to delete beside it.
describe('retention on AWS', { timeout: 90_000 }, () => {
  it("hides a thread past its tenant's days at the deployed doors at once, and the sweep deletes it with its record", async () => {
    const { box } = aws;
    const threadId = `t-${randomUUID()}`;
    const input = runInput(threadId, 'hello');
    await readSse(await post(box, 'demo', input));
    // The run's record names its tenant (the box's API key's).
    const tenant = await eventually(async () => {
      const [submitted] = ((await (await box.admin('GET', `audit?target=run:${input.runId}`)).json()) as { records: AuditRecord[] }).records;
      expect(submitted?.tenant).toEqual(expect.any(String));
      return submitted.tenant!;
    }, 20_000);
    expect((await box.admin('PUT', `tenants/${encodeURIComponent(tenant)}/retention`, { contentDays: 1 })).status).toBe(200);
    expect((await box.request('GET', `/threads/${threadId}`)).status).toBe(200);
    box.clock.advance(2 * 86_400_000);
    // Gone from the reads at once (each door reads the tenant's policy again within seconds).
    await eventually(async () => expect((await box.request('GET', `/threads/${threadId}`)).status).toBe(404), 20_000);
    expect((await box.request('GET', `/agui/demo/runs/${input.runId}/events`)).status).toBe(404);
    // The schedule's sweep (the clock moved past its period) runs retention's pass, under its role's IAM.
    // The thread's item goes last, once its runs and events are gone.
    await eventually(async () => {
      const record = await box.record();
      expect({ run: record.runs.some((run) => run.runId === input.runId), thread: record.threads.some((thread) => thread.threadId === threadId) }).toEqual({ run: false, thread: false });
    }, 60_000);
    const deleted = ((await (await box.admin('GET', `audit?action=retention.deleted&target=thread:${threadId}`)).json()) as { records: AuditRecord[] }).records;
    expect(deleted).toEqual([expect.objectContaining({ tenant, actor: { kind: 'funduq' }, detail: expect.objectContaining({ kind: 'content', runs: 1 }) })]);
    expect(box.iam.denials).toEqual([]);
    expect((await box.admin('PUT', `tenants/${encodeURIComponent(tenant)}/retention`, {})).status).toBe(200);
  });
});

describe.concurrent('the AG-UI door on AWS', { timeout: 90_000 }, () => {
  it('streams a run posted through API Gateway to its end, on the bundled door and dispatcher functions', async () => {
    const { box } = aws;
    const agent = box.agui(`t-${randomUUID()}`);
    agent.messages = [{ id: randomUUID(), role: 'user', content: 'hello there' }];
    const { newMessages } = await agent.runAgent();
    expect(newMessages.at(-1)).toMatchObject({ role: 'assistant', content: 'echo: hello there' });
  });

  it('exports usage from the response-streaming function, and answers the admin routes beside it buffered', async () => {
    const { box } = aws;
    const agent = box.agui(`t-${randomUUID()}`);
    agent.messages = [{ id: randomUUID(), role: 'user', content: 'metered' }];
    const { newMessages } = await agent.runAgent();
    expect(newMessages.at(-1)).toMatchObject({ content: 'echo: metered' });
    // Usage records are read through a GSI, which DynamoDB updates after the write.
    await eventually(async () => {
      const exported = await box.admin('GET', 'usage/export');
      expect([exported.status, exported.headers.get('content-type')]).toEqual([200, 'application/x-ndjson']);
      const events = (await exported.text()).trim().split('\n').map((line) => JSON.parse(line) as { type: string; data: { threadId: string } });
      expect(events.find((event) => event.data.threadId === agent.threadId)).toMatchObject({ type: 'dev.funduq.run.usage' });
    }, 20_000);
    expect((await box.admin('GET', 'usage')).status).toBe(200);
    expect((await box.admin('GET', 'tenants/someone')).status).toBe(200);
    expect((await box.admin('POST', 'usage/export')).status).toBe(404);
  });

  it('runs the runs queued on one thread in the order they arrived, one at a time', async () => {
    const { box } = aws;
    const { id, agent } = await heldAgent(box);
    const threadId = `t-${randomUUID()}`;
    const inputs = [runInput(threadId, 'first'), runInput(threadId, 'second'), runInput(threadId, 'third')];
    const streams: Array<Promise<Response>> = [];
    for (const [i, input] of inputs.entries()) {
      streams.push(post(box, id, input));
      await eventually(async () => expect((await thread(box, threadId)).runs).toHaveLength(i + 1), 20_000);
    }
    await eventually(() => expect(agent.received.map((input) => input.runId)).toEqual([inputs[0].runId]), 20_000);
    expect((await thread(box, threadId)).queue.map((run) => run.runId)).toEqual([inputs[1].runId, inputs[2].runId]);
    agent.release();
    const bodies = await Promise.all(streams.map(async (response) => readSse(await response)));
    expect(bodies.map(({ events }) => events.at(-1)?.data.type)).toEqual(['RUN_FINISHED', 'RUN_FINISHED', 'RUN_FINISHED']);
    expect(agent.received.map((input) => input.runId)).toEqual(inputs.map((input) => input.runId));
  });

  it('refuses the run beyond a full thread queue with 429 thread_queue_full and Retry-After, writing nothing', async () => {
    const { box } = aws;
    const { id, agent } = await heldAgent(box);
    const threadId = `t-${randomUUID()}`;
    const stop = new AbortController();
    const accepted: Array<Promise<Response>> = [];
    // One running and eight queued: the stack's threadQueueLimit.
    for (let i = 0; i < 9; i += 1) {
      accepted.push(post(box, id, runInput(threadId, `run ${i}`), stop.signal).catch(() => new Response(null)));
      await eventually(async () => expect((await thread(box, threadId)).runs).toHaveLength(i + 1), 20_000);
    }
    const refused = await post(box, id, runInput(threadId, 'one too many'));
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(await refused.json()).toMatchObject({ error: { code: 'thread_queue_full' } });
    expect((await thread(box, threadId)).runs).toHaveLength(9);
    stop.abort();
    agent.release();
    await eventually(async () => expect((await thread(box, threadId)).runs.map((run) => run.status)).toEqual(Array(9).fill('completed')), 60_000);
  });

  it('answers an interrupt with a child run whose resume names it', async () => {
    const { box } = aws;
    const threadId = `t-${randomUUID()}`;
    const asking = await readSse(await post(box, 'demo', runInput(threadId, '/ask')));
    const finished = asking.events.at(-1)!.data as { type: string; outcome: { type: string; interrupts: Array<{ id: string }> } };
    expect(finished).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'interrupt' } });
    const interruptId = finished.outcome.interrupts[0].id;
    const answer = runInput(threadId, '', { messages: [], resume: [{ interruptId, status: 'resolved', payload: { approved: true } }] });
    const answered = await readSse(await post(box, 'demo', answer));
    const said = answered.events.filter((e) => e.data.type === 'TEXT_MESSAGE_CONTENT').map((e) => e.data.delta).join('');
    expect(said).toBe('answer: {"approved":true}');
    expect((await runOf(box, threadId, answer.runId))?.parentRunId).toBe((await thread(box, threadId)).runs[0].runId);
  });

  it('takes an answer sent the moment RUN_FINISHED with its interrupt arrives, before the stream has closed', async () => {
    const { box } = aws;
    for (let attempt = 1; attempt <= 3; attempt++) {
      const threadId = `t-${randomUUID()}`;
      const asking = await readSseUntil(await post(box, 'demo', runInput(threadId, '/ask')), (e) => e.data.type === 'RUN_FINISHED');
      const finished = asking.at(-1)!.data as { type: string; outcome: { interrupts: Array<{ id: string }> } };
      const answer = runInput(threadId, '', { messages: [], resume: [{ interruptId: finished.outcome.interrupts[0].id, status: 'resolved', payload: { n: attempt } }] });
      const response = await post(box, 'demo', answer);
      expect({ attempt, status: response.status }).toEqual({ attempt, status: 200 });
      expect((await readSse(response)).events.at(-1)?.data.type).toBe('RUN_FINISHED');
    }
  });

  it('cancels a queued run at once, and a running one by asking its agent to stop', async () => {
    const { box } = aws;
    const { id, agent } = await heldAgent(box);
    const threadId = `t-${randomUUID()}`;
    const running = runInput(threadId, 'long');
    const queued = runInput(threadId, 'waiting');
    const streams = [post(box, id, running)];
    await eventually(() => expect(agent.received).toHaveLength(1), 20_000);
    streams.push(post(box, id, queued));
    await eventually(async () => expect((await thread(box, threadId)).queue).toHaveLength(1), 20_000);

    const cancelQueued = await box.request('POST', `/agui/${id}/runs/${queued.runId}/cancel`);
    expect(cancelQueued.status).toBe(202);
    expect(await cancelQueued.json()).toMatchObject({ runId: queued.runId, status: 'cancelled' });
    const cancelRunning = await box.request('POST', `/agui/${id}/runs/${running.runId}/cancel`);
    expect(cancelRunning.status).toBe(202);
    expect(await cancelRunning.json()).toMatchObject({ runId: running.runId, status: 'cancelling', cancelRequested: true });

    await eventually(() => expect(agent.closed.has(running.runId)).toBe(true), 20_000);
    const [first, second] = await Promise.all(streams.map(async (response) => readSse(await response)));
    expect(first.events.at(-1)?.data).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'cancelled' } });
    expect(second.events.at(-1)?.data).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'cancelled' } });
    expect(agent.received.map((input) => input.runId)).toEqual([running.runId]);
  });

  it('replays a run after its Last-Event-ID', async () => {
    const { box } = aws;
    const input = runInput(`t-${randomUUID()}`, 'replay me');
    const whole = await readSse(await post(box, 'demo', input));
    const replay = await box.request('GET', `/agui/demo/runs/${input.runId}/events`, undefined, { 'last-event-id': '3' });
    expect(replay.status).toBe(200);
    const after = await readSse(replay);
    expect(after.events.map((e) => e.id)).toEqual(whole.events.filter((e) => Number(e.id) > 3).map((e) => e.id));
    expect(after.events.map((e) => e.data)).toEqual(whole.events.filter((e) => Number(e.id) > 3).map((e) => e.data));
  });

  it('dispatches an interjection beside its thread’s running run, by an asynchronous invoke of the dispatcher', async () => {
    const { box } = aws;
    const { id, agent } = await heldAgent(box, { takesInterjections: true });
    const threadId = `t-${randomUUID()}`;
    const running = runInput(threadId, 'long');
    const target = post(box, id, running);
    await eventually(() => expect(agent.received).toHaveLength(1), 20_000);
    const interjection = runInput(threadId, 'also this', { forwardedProps: { [ADDRESSED_RUN_ID_KEY]: running.runId } });
    const joined = post(box, id, interjection);
    await eventually(() => expect(agent.received.map((input) => input.runId)).toEqual([running.runId, interjection.runId]), 20_000);
    expect(agent.received[1].forwardedProps?.funduq).toMatchObject({ addressedRunId: running.runId });
    expect((await runOf(box, threadId, running.runId))?.status).toBe('running');
    agent.release();
    const bodies = await Promise.all([target, joined].map(async (response) => readSse(await response)));
    expect(bodies.map(({ events }) => events.at(-1)?.data.type)).toEqual(['RUN_FINISHED', 'RUN_FINISHED']);
  });

  it('makes an interjection whose run settled before its dispatch the thread’s next ordinary run', async () => {
    const { box } = aws;
    const { id, agent } = await heldAgent(box, { takesInterjections: true });
    const threadId = `t-${randomUUID()}`;
    const running = runInput(threadId, 'short');
    const target = post(box, id, running);
    await eventually(() => expect(agent.received).toHaveLength(1), 20_000);
    // The doors hand the interjection to the dispatcher while its target runs; the target settles
    // before that invoke is served, so the dispatcher finds it settled.
    const interjection = runInput(threadId, 'too late', { forwardedProps: { [ADDRESSED_RUN_ID_KEY]: running.runId } });
    let handedOver = false;
    box.hook = async (call): Promise<'serve'> => {
      if (call.action !== 'lambda:InvokeFunction' || handedOver) return 'serve';
      handedOver = true;
      agent.release();
      await readSse(await target);
      return 'serve';
    };
    try {
      const { events } = await readSse(await post(box, id, interjection));
      expect(events.at(-1)?.data.type).toBe('RUN_FINISHED');
    } finally {
      box.hook = () => 'serve';
    }
    expect(handedOver).toBe(true);
    expect(agent.received.map((input) => input.runId)).toEqual([running.runId, interjection.runId]);
    expect((await runOf(box, threadId, interjection.runId))?.status).toBe('completed');
  });

  it('answers a run that waits in the queue with 200 and text/event-stream at once, before any heartbeat', async () => {
    const { box } = aws;
    const { id, agent } = await heldAgent(box);
    const threadId = `t-${randomUUID()}`;
    void post(box, id, runInput(threadId, 'holding'));
    await eventually(() => expect(agent.received).toHaveLength(1), 20_000);
    const waiting = runInput(threadId, 'waiting');
    const response = await post(box, id, waiting);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    expect((await runOf(box, threadId, waiting.runId))?.status).toBe('queued');
    const reader = response.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first.startsWith(':')).toBe(true);
    expect(first).not.toContain('heartbeat');
    await reader.cancel();
    agent.release();
  });

  it('stops following a run once its caller is gone, leaving the run to go on', async () => {
    const { box } = aws;
    const { id, agent } = await heldAgent(box);
    const input = runInput(`t-${randomUUID()}`, 'nobody listens');
    void post(box, id, input);
    await eventually(() => expect(agent.received).toHaveLength(1), 20_000);
    const stop = new AbortController();
    const tail = await box.fetch(`${box.url}/agui/${id}/runs/${input.runId}/events`, { signal: stop.signal });
    expect(tail.status).toBe(200);
    stop.abort();
    const gone = box.clock.now();
    // A door left following has work outside any invocation: it polls the record for a caller that is gone.
    await eventually(() => {
      const strays = box.endpoint.calls.filter((call) => call.caller === 'doors-stream' && !call.duringInvocation);
      const quietSince = Math.max(gone, strays.at(-1)?.at ?? 0);
      expect(box.clock.now() - quietSince).toBeGreaterThan(5_000);
    }, 80_000);
    expect((await runOf(box, input.threadId, input.runId))?.status).toBe('running');
    agent.release();
  }, 100_000);
});

// Moving the box's clock moves every queue's visibility window too: a run in flight beside it
// would see its message come back, so this test runs alone, after the concurrent ones.
describe('an ask on AWS, as its clock passes', { timeout: 90_000 }, () => {
  it('expires an ask at its expiresAt by the state machine, after which an answer is refused 410 interrupt_expired', async () => {
    const { box } = aws;
    const threadId = `t-${randomUUID()}`;
    const asking = runInput(threadId, '/ask 60');
    // The caller's trace context rides with the run: door, record, thread queue, dispatcher, the ask waiter's rounds.
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const { events } = await readSse(await post(box, 'demo', asking, undefined, { traceparent }));
    const interruptId = (events.at(-1)!.data as { outcome: { interrupts: Array<{ id: string }> } }).outcome.interrupts[0].id;
    const execution = await eventually(() => {
      const found = [...box.stepFunctions.executions.values()].find((e) => e.name === asking.runId);
      expect(found?.states.at(-1)).toBe('Wait until the earliest expiresAt');
      return found!;
    }, 20_000);
    expect((await thread(box, threadId)).openAsks).toHaveLength(1);
    expect(JSON.parse(execution.input)).toMatchObject({ runId: asking.runId, context: { traceparent } });
    box.clock.advance(61_000);
    await eventually(() => expect(execution.status).toBe('SUCCEEDED'), 20_000);
    expect(execution.states).toEqual(['Has an expiry?', 'Wait until the earliest expiresAt', 'Expire the open asks', 'Has an expiry?', 'Nothing left to expire']);
    expect(JSON.parse(execution.output!)).toEqual({ runId: asking.runId, context: { traceparent } });
    expect((await thread(box, threadId)).openAsks).toEqual([]);
    const late = await post(box, 'demo', runInput(threadId, '', { messages: [], resume: [{ interruptId, status: 'resolved', payload: {} }] }));
    expect(late.status).toBe(410);
    expect(await late.json()).toMatchObject({ error: { code: 'interrupt_expired' } });
  });
});

describe('the audit log on AWS', { timeout: 90_000 }, () => {
  it("records a run, an answer and a cancel at the deployed doors, is sealed by the sweep with funduq's key, and its export verifies", async () => {
    const { box } = aws;
    const threadId = `t-${randomUUID()}`;
    const asking = runInput(threadId, '/ask');
    const finished = (await readSse(await post(box, 'demo', asking))).events.at(-1)!.data as { outcome: { interrupts: Array<{ id: string }> } };
    const answer = runInput(threadId, '', { messages: [], resume: [{ interruptId: finished.outcome.interrupts[0].id, status: 'resolved', payload: { approved: true } }] });
    await readSse(await post(box, 'demo', answer));
    const { id, agent } = await heldAgent(box);
    const heldThread = `t-${randomUUID()}`;
    const running = runInput(heldThread, 'long');
    const queued = runInput(heldThread, 'waiting');
    const streams = [post(box, id, running)];
    await eventually(() => expect(agent.received).toHaveLength(1), 20_000);
    streams.push(post(box, id, queued));
    await eventually(async () => expect((await thread(box, heldThread)).queue).toHaveLength(1), 20_000);
    expect((await box.request('POST', `/agui/${id}/runs/${queued.runId}/cancel`)).status).toBe(202);
    agent.release();
    await Promise.all(streams.map(async (response) => readSse(await response)));

    const listed = async (target: string) => ((await (await box.admin('GET', `audit?target=${encodeURIComponent(target)}`)).json()) as { records: AuditRecord[] }).records;
    expect(await listed(`run:${asking.runId}`)).toEqual([expect.objectContaining({ action: 'run.submitted', outcome: 'ok', actor: expect.objectContaining({ kind: 'principal' }), requestId: expect.any(String) })]);
    expect(await listed(`run:${answer.runId}`)).toEqual([expect.objectContaining({ action: 'ask.answered', outcome: 'ok', detail: expect.objectContaining({ answers: asking.runId }) })]);
    expect((await listed(`run:${queued.runId}`)).map((r) => r.action)).toEqual(['run.submitted', 'run.cancel_requested']);
    const agentChange = ((await (await box.admin('GET', `audit?target=agent:${id}`)).json()) as { records: AuditRecord[] }).records;
    expect(agentChange).toEqual([expect.objectContaining({ action: 'agent.registered', actor: expect.objectContaining({ kind: 'admin', credentialId: expect.stringMatching(/^[0-9a-f]{16}$/) }) })]);

    // The sweep seals with the identity key it reads from the link key's secret (under its role's IAM).
    expect(await box.lambda.invoke('sweep', { olderThanSeconds: 21 * 60 })).toMatchObject({ ok: true });
    const key = auditPublicKey(JSON.stringify(await (await box.admin('GET', 'audit/key')).json()))!;
    const exported = (await (await box.admin('GET', 'audit/export')).text()).trim().split('\n');
    const verification = await verifyExport(exported.map((line) => readExportLine(line, sha256Hex)), verifierDeps(key));
    expect(verification.problems).toEqual([]);
    const sealed = exported.map((line) => JSON.parse(line) as { segment?: number; record?: AuditRecord }).filter((line) => line.segment !== undefined).map((line) => line.record!.target);
    expect(sealed).toEqual(expect.arrayContaining([`run:${asking.runId}`, `run:${answer.runId}`, `run:${queued.runId}`, `agent:${id}`]));
    expect((await (await box.admin('GET', 'audit/head')).json()).seq).toBe(verification.head?.seq);
    expect(box.iam.denials).toEqual([]);
  });
});

describe('the console on AWS', { timeout: 90_000 }, () => {
  it('is served by the bundled doors under the stage, signs in with the admin token (and read-only with the stack’s second token), and shows a run made through API Gateway', async () => {
    const { box } = aws;
    const agent = box.agui(`t-${randomUUID()}`);
    agent.messages = [{ id: randomUUID(), role: 'user', content: 'seen from the console' }];
    const runId = `run-${randomUUID()}`;
    await agent.runAgent({ runId });
    // The API key's tenant: the console names a run by its tenant.
    const tenant = encodeURIComponent(((await box.run(runId)) as { tenant: string }).tenant);
    // Where a browser reaches the stage: the agent card's URL says.
    const card = (await (await box.fetch(`${box.url}/a2a/demo/.well-known/agent-card.json`)).json()) as { url: string };
    const origin = new URL(card.url).origin;
    const stage = new URL(card.url).pathname.split('/')[1];

    // Public to API Gateway (a browser brings no API key), refused by the doors without a session.
    const unsigned = await fetch(`${box.url}/console`, { redirect: 'manual' });
    expect([unsigned.status, unsigned.headers.get('location')]).toEqual([303, `/${stage}/console/sign-in?next=`]);
    const signIn = await fetch(`${box.url}/console/sign-in`, {
      method: 'POST',
      redirect: 'manual',
      headers: { origin, 'x-forwarded-proto': 'https', 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: box.secret(), next: `tenants/${tenant}/runs/${runId}` }),
    });
    expect([signIn.status, signIn.headers.get('location')]).toEqual([303, `/${stage}/console/tenants/${tenant}/runs/${runId}`]);
    const setCookie = signIn.headers.get('set-cookie') ?? '';
    expect(setCookie).toMatch(new RegExp(`; Path=/${stage}/console; .*HttpOnly; Secure; SameSite=Strict$`));
    const cookie = setCookie.split(';')[0];

    const page = await fetch(`${box.url}/console/tenants/${tenant}/runs/${runId}`, { headers: { cookie } });
    const html = await page.text();
    expect(page.status).toBe(200);
    expect(html).toContain(`<base href="/${stage}/console/"/>`);
    expect(html).toContain(`<h1>Run ${runId}</h1>`);
    const script = /<script src="([^"]+)"/.exec(html)![1];
    expect((await fetch(`${box.url}/console/${script}`)).headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    const log = (await (await fetch(`${box.url}/console/tenants/${tenant}/runs/${runId}/events.json`, { headers: { cookie } })).json()) as { events: { type: string; text: string }[] };
    expect(log.events.at(-1)).toMatchObject({ type: 'RUN_FINISHED' });
    expect(log.events.filter((event) => event.type === 'TEXT_MESSAGE_CONTENT').map((event) => event.text).join('')).toBe('echo: seen from the console');

    // The stack's read-only token (consoleReadToken) signs in to the same page, and acts on nothing.
    const reader = await fetch(`${box.url}/console/sign-in`, {
      method: 'POST',
      redirect: 'manual',
      headers: { origin, 'x-forwarded-proto': 'https', 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: box.secret('ConsoleReadToken'), next: '' }),
    });
    expect(reader.status).toBe(303);
    const readCookie = (reader.headers.get('set-cookie') ?? '').split(';')[0];
    const readPage = await (await fetch(`${box.url}/console`, { headers: { cookie: readCookie } })).text();
    expect(readPage).toContain('Signed in read-only');
    const csrf = /name="csrf" value="([^"]+)"/.exec(readPage)![1];
    const refused = await fetch(`${box.url}/console/tenants/${tenant}/runs/${runId}/cancel`, {
      method: 'POST',
      headers: { cookie: readCookie, origin, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ csrf }),
    });
    expect({ status: refused.status, body: await refused.json() }).toMatchObject({ status: 403, body: { error: { code: 'console_read_only' } } });
  });
});
