import { randomUUID } from 'node:crypto';
import { connect, generateKeyPair, type ProviderLink } from '../../packages/provider/src/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useAwsBox, type AwsBox } from '../support/aws-box/box.js';
import { runInput } from '../support/aws-box/run-input.js';
import { artifactTexts, asTask, send, stateName, userMessage as a2aMessage } from '../support/a2a.js';
import { eventually, Gate } from '../support/core-harness.js';
import { assistantText, readSse, userMessage } from '../support/gateway.js';
import { echoAgent, lastUserText, reply, ScriptAgent } from '../support/link.js';

/**
 * A provider that dials out, on the deployed shape: the provider SDK (`@funduq/provider`, its agents
 * in this process, no port) links to the box's API Gateway WebSocket API, the bundled link
 * functions take its frames, and the dispatcher offers each run and returns. One box for the file
 * (about 35 s of the suite on 2 cores, most of it the functions' cold starts).
 */
const aws = useAwsBox();
let provider: ProviderLink;
const gates = new Map<string, Gate>();
/** The runs offered to the echo agent, as its preparation was handed them (the context the offer carried). */
const offered: Array<{ runId: string; context: Readonly<Record<string, string>> }> = [];

/** Says it started, then waits for its test to let it finish. */
const gated = new ScriptAgent(async function* (input) {
  yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
  const gate = new Gate();
  gates.set(input.runId, gate);
  await gate.wait;
  yield* reply(input, 'let go', { started: true });
});

/** Says how long the last message was. */
const measure = new ScriptAgent((input) => reply(input, `${lastUserText(input).length} characters`));

/** Says it started, then runs until it is stopped. */
const stoppable = new ScriptAgent(async function* (input, signal) {
  yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
  yield { type: 'TEXT_MESSAGE_START', messageId: `m-${input.runId}`, role: 'assistant' };
  yield { type: 'TEXT_MESSAGE_CONTENT', messageId: `m-${input.runId}`, delta: 'working' };
  await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
});

beforeAll(async () => {
  const { box } = aws;
  const keys = generateKeyPair();
  expect((await box.admin('PUT', 'providers/behind-a-firewall', { publicKey: keys.publicKey, agents: ['echo', 'gated', 'measure', 'stoppable'], maxConcurrentRuns: 8 })).status).toBe(201);
  const { publicKey } = (await (await box.admin('GET', 'link')).json()) as { publicKey: string };
  provider = await connect({
    url: box.link.url,
    providerId: 'behind-a-firewall',
    privateKey: keys.privateKey,
    funduqPublicKey: publicKey,
    agents: { echo: { agent: echoAgent(), prepare: (_agent, run) => offered.push(run) }, gated, measure, stoppable },
  });
  expect([...provider.registered].sort()).toEqual(['echo', 'gated', 'measure', 'stoppable']);
}, 120_000);

afterAll(async () => {
  for (const gate of gates.values()) gate.open();
  await provider?.close();
});

async function runsOf(box: AwsBox, threadId: string): Promise<Array<{ runId: string; status: string; reason?: string }>> {
  const response = await box.request('GET', `/threads/${encodeURIComponent(threadId)}`);
  return ((await response.json()) as { runs?: Array<{ runId: string; status: string; reason?: string }> }).runs ?? [];
}

/** Invocations of these functions that have not returned. */
const held = (box: AwsBox, handlers: string[]) => box.lambda.invocations.filter((i) => handlers.includes(i.handler) && i.endedAt === undefined);

describe('a link provider on AWS', { timeout: 90_000 }, () => {
  it('serves a stock AG-UI caller and a stock A2A caller through API Gateway’s WebSocket API, from a process listening on no port', async () => {
    const { box } = aws;
    const agent = box.agui(`t-${randomUUID()}`, 'echo');
    agent.messages = [userMessage('hello over the link')];
    const { newMessages } = await agent.runAgent();
    expect(assistantText(newMessages)).toEqual(['echo: hello over the link']);

    // An input larger than API Gateway's 128 KB message reaches the agent in parts, each one
    // PostToConnection. (Events in parts, each a $default invocation of its own joined in the
    // record, are test/adapters/link-roster.test.ts's: here their concurrent cold starts would cost
    // the suite 15 s.)
    const large = 'x'.repeat(200 * 1024);
    const big = box.agui(`t-${randomUUID()}`, 'measure');
    big.messages = [userMessage(large)];
    expect(assistantText((await big.runAgent()).newMessages)).toEqual([`${large.length} characters`]);

    const client = await box.a2a('JSONRPC', 'echo');
    const task = asTask(await client.sendMessage(send(a2aMessage('hello by A2A'))));
    expect(stateName(task.status?.state)).toBe('TASK_STATE_COMPLETED');
    expect(artifactTexts(task)).toEqual(['echo: hello by A2A']);
  });

  it('hands the provider its caller’s trace: the offer’s traceparent names the trace the caller sent, and so does the record', async () => {
    const { box } = aws;
    const traceId = randomUUID().replace(/-/g, '');
    const threadId = `t-${randomUUID()}`;
    const agent = box.agui(threadId, 'echo');
    agent.headers = { ...agent.headers, traceparent: `00-${traceId}-00f067aa0ba902b7-01` };
    agent.messages = [userMessage('traced over the link')];
    const runId = `${threadId}-run`;
    expect(assistantText((await agent.runAgent({ runId })).newMessages)).toEqual(['echo: traced over the link']);
    const offer = offered.find((run) => run.runId === runId);
    expect(offer?.context.traceparent?.split('-')[1]).toBe(traceId);
    const view = (await (await box.request('GET', `/threads/${encodeURIComponent(threadId)}`)).json()) as { runs: Array<{ runId: string; traceId?: string }> };
    expect(view.runs.find((run) => run.runId === runId)?.traceId).toBe(traceId);
  });

  it('holds no function while its run runs: the dispatcher returned at the offer, each frame was one short invocation, and the thread’s next run waited', async () => {
    const { box } = aws;
    const threadId = `t-${randomUUID()}`;
    const first = runInput(threadId, 'wait for me');
    const second = runInput(threadId, 'then me');
    const firstStream = box.request('POST', '/agui/gated', first);
    await eventually(() => expect(gates.has(first.runId)).toBe(true), 30_000);
    const secondStream = box.request('POST', '/agui/gated', second);
    await eventually(async () => expect((await runsOf(box, threadId)).map((r) => [r.runId, r.status])).toEqual([[first.runId, 'running'], [second.runId, 'queued']]), 30_000);
    const since = Date.now();
    // While the agent holds the run, the dispatcher and the link's functions return (the caller's SSE stream is the doors').
    const link = ['dispatcher', 'link', 'link-timer'];
    await eventually(() => expect(held(box, link)).toEqual([]), 30_000);
    const dispatchers = box.lambda.invocations.filter((i) => i.handler === 'dispatcher').length;
    const letGo = Date.now();
    gates.get(first.runId)!.open();
    const { events } = await readSse(await firstStream);
    expect(events.at(-1)?.data).toMatchObject({ type: 'RUN_FINISHED' });
    const until = Date.now();
    // The thread's next run was held back by the first one's message, which its settle let go.
    await eventually(() => expect(gates.has(second.runId)).toBe(true), 30_000);
    gates.get(second.runId)!.open();
    expect((await readSse(await secondStream)).events.at(-1)?.data).toMatchObject({ type: 'RUN_FINISHED' });
    expect((await runsOf(box, threadId)).map((r) => r.status)).toEqual(['completed', 'completed']);
    // No invocation lasted the run: every dispatch so far ended before the first run did, and its
    // last frames came as invocations of their own, begun after the agent was let go.
    expect(box.lambda.invocations.filter((i) => link.includes(i.handler) && i.startedAt <= since && (i.endedAt ?? Infinity) >= until)).toEqual([]);
    expect(box.lambda.invocations.filter((i) => i.handler === 'dispatcher').slice(0, dispatchers).every((i) => i.endedAt! < letGo)).toBe(true);
    const frames = box.lambda.invocations.filter((i) => i.handler === 'link' && i.startedAt >= letGo && i.startedAt <= until);
    expect(frames.length).toBeGreaterThan(0);
    await eventually(() => expect(frames.every((i) => i.endedAt !== undefined && i.endedAt - i.startedAt < 10_000)).toBe(true), 15_000);
  });

  it('takes a cancel to the agent, which stops, and ends the run cancelled on the provider’s receipt', async () => {
    const { box } = aws;
    const threadId = `t-${randomUUID()}`;
    const input = runInput(threadId, 'count');
    const stream = box.request('POST', '/agui/stoppable', input);
    await eventually(() => expect(stoppable.received.map((r) => r.runId)).toContain(input.runId), 30_000);
    const cancel = await box.request('POST', `/agui/stoppable/runs/${input.runId}/cancel`);
    expect(cancel.status).toBe(202);
    await eventually(() => expect(stoppable.aborted).toContain(input.runId), 30_000);
    const { events } = await readSse(await stream);
    expect(events.at(-1)?.data).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'cancelled' } });
    await eventually(async () => expect(await runsOf(box, threadId)).toEqual([expect.objectContaining({ runId: input.runId, status: 'cancelled', reason: 'cancel_requested' })]), 30_000);
  });
});
