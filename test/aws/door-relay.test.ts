import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { runInput } from '../support/aws-box/run-input.js';
import { BOX_CONTEXT, useAwsBox, type AwsBox } from '../support/aws-box/box.js';
import { eventually } from '../support/core-harness.js';
import { readSse } from '../support/gateway.js';
import { startHeldAgent, type HeldAgent } from '../support/held-agent.js';
import { recordBreaks } from '../support/record-invariants.js';

/**
 * A run on an idle thread is relayed by the streaming door that admitted it (`relayAtDoor`): its
 * message is queued all the same, and the dispatcher that receives it keeps it for the door until
 * the run settles, so the thread's order holds. The lease's shortest lapse lets a dead door's run
 * be failed within the test's time.
 */
const LAPSE_SECONDS = 10;
const aws = useAwsBox({ context: { ...BOX_CONTEXT, leaseLapseSeconds: String(LAPSE_SECONDS), leaseRenewSeconds: '2' } });
const agents: HeldAgent[] = [];

afterAll(async () => {
  for (const agent of agents) {
    agent.release();
    await agent.close();
  }
});

async function heldAgent(box: AwsBox): Promise<{ agentId: string; agent: HeldAgent }> {
  const agent = await startHeldAgent();
  agents.push(agent);
  const agentId = `held-${randomUUID()}`;
  expect((await box.admin('PUT', `agents/${agentId}`, { url: agent.url, description: 'holds its runs' })).status).toBe(201);
  return { agentId, agent };
}

function post(box: AwsBox, agentId: string, input: ReturnType<typeof runInput>, signal?: AbortSignal): Promise<Response> {
  return box.fetch(`${box.url}/agui/${agentId}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(input), signal });
}

/** The thread queue (the FIFO queue with a dead-letter queue), and the messages it holds of a run. */
function messagesOf(box: AwsBox, runId: string) {
  const queue = [...box.sqs.queues.values()].find((q) => q.redrive)!;
  return queue.messages.filter((m) => m.body.includes(runId));
}

describe('a run relayed at its door', { timeout: 120_000 }, () => {
  it("is run by the streaming door on an idle thread, its message kept by a dispatcher until it settles, and the thread's next run after it", async () => {
    const { box } = aws;
    const { agentId, agent } = await heldAgent(box);
    const threadId = `t-${randomUUID()}`;
    const first = runInput(threadId, 'first');
    const second = runInput(threadId, 'second');
    // Which function reads the agent's stream: only a relay of the run writes its events.
    const writers = new Map<string, Set<string>>();
    box.hook = (call) => {
      if (call.action === 'dynamodb:BatchWriteItem' && call.duringInvocation) {
        const set = writers.get(call.caller) ?? new Set();
        set.add(call.environment ?? '');
        writers.set(call.caller, set);
      }
      return 'serve';
    };
    try {
      const firstStream = post(box, agentId, first).then(readSse);
      await eventually(() => expect(agent.received.map((input) => input.runId)).toEqual([first.runId]), 30_000);
      // The dispatcher that received its message left the receipt on the run and keeps the message in flight.
      await eventually(async () => expect(await box.run(first.runId)).toMatchObject({ status: 'running', atDoor: expect.stringMatching(/^door:/), receipt: expect.any(String) }), 30_000);
      expect(messagesOf(box, first.runId)).toHaveLength(1);
      expect(messagesOf(box, first.runId)[0].invisibleUntil).toBeGreaterThan(box.clock.now());

      // Posted while the first runs: queued behind it, and not relayed at its door.
      const secondStream = post(box, agentId, second).then(readSse);
      await eventually(async () => expect((await box.run(second.runId))?.status).toBe('queued'), 30_000);
      expect(agent.received.map((input) => input.runId)).toEqual([first.runId]);

      agent.release();
      expect((await firstStream).events.at(-1)?.data).toMatchObject({ type: 'RUN_FINISHED' });
      expect((await secondStream).events.at(-1)?.data).toMatchObject({ type: 'RUN_FINISHED' });
      expect(agent.received.map((input) => input.runId)).toEqual([first.runId, second.runId]);
      // The first was relayed by the door, the second by a dispatcher (its thread was busy when it came).
      expect(await box.run(first.runId)).toMatchObject({ status: 'completed', atDoor: expect.stringMatching(/^door:/) });
      expect((await box.run(second.runId))?.atDoor).toBeUndefined();
      expect([...writers.keys()].sort()).toEqual(['dispatcher', 'doors-stream']);
      // Both messages gone: the first's let go by its settle at the door, the second's by its dispatcher.
      await eventually(() => expect([...messagesOf(box, first.runId), ...messagesOf(box, second.runId)]).toEqual([]), 30_000);
      expect(box.iam.denials).toEqual([]);
      await eventually(async () => expect(recordBreaks(await box.record())).toEqual([]), 20_000);
    } finally {
      box.hook = () => 'serve';
    }
  });

  it('goes on relaying a run whose caller went away, and settles it', async () => {
    const { box } = aws;
    const { agentId, agent } = await heldAgent(box);
    const input = runInput(`t-${randomUUID()}`, 'left alone');
    const caller = new AbortController();
    const response = await post(box, agentId, input, caller.signal);
    expect(response.status).toBe(200);
    await eventually(async () => expect(await box.run(input.runId)).toMatchObject({ status: 'running', atDoor: expect.stringMatching(/^door:/) }), 30_000);
    caller.abort();
    agent.release();
    await eventually(async () => expect((await box.run(input.runId))?.status).toBe('completed'), 30_000);
    const { events } = await readSse(await box.fetch(`${box.url}/agui/${agentId}/runs/${input.runId}/events`));
    expect(events.map((event) => event.data.type)).toEqual(['RUN_STARTED', 'TEXT_MESSAGE_START', 'TEXT_MESSAGE_CONTENT', 'TEXT_MESSAGE_END', 'RUN_FINISHED']);
    await eventually(() => expect(messagesOf(box, input.runId)).toEqual([]), 30_000);
  });

  it("fails dispatch_lost a run whose door died mid-run, once its lease lapsed, and runs the thread's next run", async () => {
    const { box } = aws;
    const { agentId, agent } = await heldAgent(box);
    const threadId = `t-${randomUUID()}`;
    const first = runInput(threadId, 'first');
    const behind = runInput(threadId, 'queued behind');
    let killed = false;
    // The door dies at its first write of the run's events (RUN_STARTED), the run running.
    box.hook = (call) => {
      if (killed || call.caller !== 'doors-stream' || !call.duringInvocation || call.action !== 'dynamodb:BatchWriteItem') return 'serve';
      killed = true;
      return 'kill';
    };
    try {
      // Its caller's stream breaks with the door.
      const firstStream = post(box, agentId, first)
        .then(readSse)
        .catch(() => undefined);
      await eventually(() => expect(killed).toBe(true), 30_000);
      box.hook = () => 'serve';
      const sweeps = box.schedules.invocations.length;
      expect(await box.run(first.runId)).toMatchObject({ status: 'running', atDoor: expect.stringMatching(/^door:/) });
      await firstStream;
      const behindStream = post(box, agentId, behind).then(readSse);
      await eventually(async () => expect((await box.run(behind.runId))?.status).toBe('queued'), 30_000);

      // A caller following the run learns of the death from the lease, without a sweep.
      const { events } = await readSse(await box.fetch(`${box.url}/agui/${agentId}/runs/${first.runId}/events`));
      expect(events.at(-1)?.data).toMatchObject({ type: 'RUN_ERROR', code: 'dispatch_lost' });
      expect(box.schedules.invocations.length).toBe(sweeps);
      await eventually(() => expect(agent.received.map((input) => input.runId)).toEqual([first.runId, behind.runId]), 30_000);
      agent.release();
      expect((await behindStream).events.at(-1)?.data).toMatchObject({ type: 'RUN_FINISHED' });
      await eventually(() => expect([...messagesOf(box, first.runId), ...messagesOf(box, behind.runId)]).toEqual([]), 30_000);
      expect(box.iam.denials).toEqual([]);
      await eventually(async () => expect(recordBreaks(await box.record())).toEqual([]), 20_000);
    } finally {
      box.hook = () => 'serve';
    }
  });
});

describe('a stack that relays nothing at its doors (relayAtDoor false)', { timeout: 60_000 }, () => {
  const plain = useAwsBox({ context: { ...BOX_CONTEXT, relayAtDoor: 'false' } });

  it('hands every run to a dispatcher', async () => {
    const { box } = plain;
    expect((await box.admin('PUT', 'agents/demo', { provider: 'demo', description: 'the demo agent' })).status).toBe(201);
    const input = runInput(`t-${randomUUID()}`, 'hello');
    const callers = new Set<string>();
    box.hook = (call) => {
      if (call.action === 'dynamodb:BatchWriteItem' && call.duringInvocation) callers.add(call.caller);
      return 'serve';
    };
    try {
      const { events } = await readSse(await post(box, 'demo', input));
      expect(events.at(-1)?.data).toMatchObject({ type: 'RUN_FINISHED' });
      expect((await box.run(input.runId))?.atDoor).toBeUndefined();
      expect([...callers]).toEqual(['dispatcher']);
    } finally {
      box.hook = () => 'serve';
    }
  });
});
