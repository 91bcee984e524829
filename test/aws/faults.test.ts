import { randomUUID } from 'node:crypto';
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ObservedCall } from '../support/aws-box/aws-endpoint.js';
import { runInput } from '../support/aws-box/run-input.js';
import { BOX_CONTEXT, useAwsBox, type AwsBox } from '../support/aws-box/box.js';
import { eventually } from '../support/core-harness.js';
import { readSse } from '../support/gateway.js';
import { startHeldAgent } from '../support/held-agent.js';
import { recordBreaks } from '../support/record-invariants.js';

/**
 * Functions killed between two of their AWS calls, and what the record's repair (the runs table's
 * stream, `lambdas/handlers/repair.ts`) makes of what they left: every accepted run runs or ends
 * with a reason, every place goes back once, every replay ends.
 */
// A thread's first run is the dispatcher's here: no run is relayed at its door (the fault matrix kills a door relaying one).
const aws = useAwsBox({ context: { ...BOX_CONTEXT, relayAtDoor: 'false' } });

beforeAll(async () => {
  expect((await aws.box.admin('PUT', 'agents/demo', { provider: 'demo', description: 'the demo agent' })).status).toBe(201);
});


function post(box: AwsBox, input: ReturnType<typeof runInput>, agentId = 'demo'): Promise<Response> {
  return box.fetch(`${box.url}/agui/${agentId}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(input) });
}

/** A run's item as the table holds it now, read past IAM. */
async function runItem(box: AwsBox, runId: string): Promise<Record<string, any> | undefined> {
  const runs = [...box.dynamodb.tables.values()].find((table) => table.keys.includes('pk'))!.name;
  const { Item } = await box.dynamodb.client.send(new GetItemCommand({ TableName: runs, Key: { pk: { S: `run#${runId}` }, sk: { S: 'run' } }, ConsistentRead: true }));
  return Item && unmarshall(Item);
}

/** Kills the first call `matches` accepts, once; every other call is served. */
function killOnce(box: AwsBox, matches: (call: ObservedCall) => boolean | Promise<boolean>): { killed: () => boolean } {
  let killed = false;
  box.hook = async (call) => {
    if (killed || !(await matches(call))) return 'serve';
    killed = true;
    return 'kill';
  };
  return { killed: () => killed };
}

async function replayEnds(box: AwsBox, runId: string, agentId = 'demo'): Promise<Record<string, unknown> | undefined> {
  const { events } = await readSse(await box.fetch(`${box.url}/agui/${agentId}/runs/${runId}/events`));
  return events.at(-1)?.data;
}

describe('a function killed between its AWS calls', { timeout: 90_000 }, () => {
  it('door, new run, killed at SendMessage after createRun: the repair sends the message and the run runs', async () => {
    const { box } = aws;
    const input = runInput(`t-${randomUUID()}`, 'hello');
    const fault = killOnce(box, (call) => call.caller === 'doors-stream' && call.action === 'sqs:SendMessage');
    try {
      await post(box, input).then((r) => r.text()).catch(() => undefined);
      expect(fault.killed()).toBe(true);
      await eventually(async () => expect((await runItem(box, input.runId))?.status).toBe('completed'), 30_000);
      expect(await replayEnds(box, input.runId)).toMatchObject({ type: 'RUN_FINISHED' });
      await eventually(async () => expect(recordBreaks(await box.record())).toEqual([]), 10_000);
    } finally {
      box.hook = () => 'serve';
    }
  });

  it('dispatcher killed right after the final transition: the repair gives back the place once, stores the closing events and lets its message go', async () => {
    const { box } = aws;
    const input = runInput(`t-${randomUUID()}`, 'hello');
    const fault = killOnce(
      box,
      async (call) => call.caller === 'dispatcher' && call.action === 'dynamodb:UpdateItem' && (await runItem(box, input.runId))?.status === 'completed',
    );
    try {
      const stream = post(box, input);
      await eventually(() => expect(fault.killed()).toBe(true), 30_000);
      // Its caller's stream ends: the end is on the record before anything that followed it.
      expect((await readSse(await stream)).events.at(-1)?.data).toMatchObject({ type: 'RUN_FINISHED' });
      await eventually(async () => expect((await runItem(box, input.runId))?.closingEvents).toBeUndefined(), 30_000);
      expect(await replayEnds(box, input.runId)).toMatchObject({ type: 'RUN_FINISHED' });
      await eventually(async () => expect(recordBreaks(await box.record())).toEqual([]), 10_000);
      // The thread takes its next run at once: the repair deleted the dead dispatcher's message by
      // the receipt handle its run recorded, rather than leaving it to come back after the visibility timeout.
      const queue = [...box.sqs.queues.values()].find((q) => q.redrive)!;
      await eventually(() => expect(queue.messages.filter((m) => m.body.includes(input.runId))).toEqual([]), 20_000);
      expect((await readSse(await post(box, runInput(input.threadId, 'again')))).events.at(-1)?.data).toMatchObject({ type: 'RUN_FINISHED' });
    } finally {
      box.hook = () => 'serve';
    }
  });

  it('door killed right after cancelling a queued run: the repair stores its closing events and gives back its place', async () => {
    const { box } = aws;
    const agent = await startHeldAgent();
    try {
      expect((await box.admin('PUT', 'agents/held', { url: agent.url, description: 'holds its runs' })).status).toBe(201);
      const threadId = `t-${randomUUID()}`;
      const running = runInput(threadId, 'long');
      const queued = runInput(threadId, 'waiting');
      const first = post(box, running, 'held');
      await eventually(() => expect(agent.received).toHaveLength(1), 20_000);
      const second = post(box, queued, 'held');
      await eventually(async () => expect((await runItem(box, queued.runId))?.status).toBe('queued'), 20_000);
      const fault = killOnce(box, async (call) => call.caller === 'doors' && call.action === 'dynamodb:UpdateItem' && (await runItem(box, queued.runId))?.status === 'cancelled');
      await box.request('POST', `/agui/held/runs/${queued.runId}/cancel`).catch(() => undefined);
      expect(fault.killed()).toBe(true);
      box.hook = () => 'serve';
      expect((await readSse(await second)).events.at(-1)?.data).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'cancelled' } });
      await eventually(async () => expect((await runItem(box, queued.runId))?.closingEvents).toBeUndefined(), 30_000);
      expect(await replayEnds(box, queued.runId, 'held')).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'cancelled' } });
      agent.release();
      expect((await readSse(await first)).events.at(-1)?.data).toMatchObject({ type: 'RUN_FINISHED' });
      await eventually(async () => expect(recordBreaks(await box.record())).toEqual([]), 10_000);
    } finally {
      box.hook = () => 'serve';
      agent.release();
      await agent.close();
    }
  });

  it('door killed answering an expiring ask, after closing it: the sweep opens it again under a timer of its own, and it expires on time', async () => {
    const { box } = aws;
    const threadId = `t-${randomUUID()}`;
    const asking = runInput(threadId, '/ask 3600');
    const { events } = await readSse(await post(box, asking));
    const interruptId = (events.at(-1)?.data as { outcome: { interrupts: Array<{ id: string }> } }).outcome.interrupts[0].id;
    const first = await eventually(() => {
      const found = [...box.stepFunctions.executions.values()].find((e) => e.name === asking.runId);
      expect(found?.status).toBe('RUNNING');
      return found!;
    }, 30_000);
    const answer = runInput(threadId, '', { messages: [], resume: [{ interruptId, status: 'resolved', payload: { approved: true } }] });
    // The answer's door dies recording its run: the asks were closed for it and their timer stopped.
    const fault = killOnce(box, async (call) => call.caller === 'doors-stream' && call.action === 'dynamodb:PutItem' && (await runItem(box, asking.runId))?.asks?.[interruptId]?.state === 'answered' && !(await runItem(box, answer.runId)));
    try {
      await post(box, answer).then((r) => r.text()).catch(() => undefined);
      expect(fault.killed()).toBe(true);
      box.hook = () => 'serve';
      await eventually(() => expect(first.status).toBe('ABORTED'), 10_000);
      const sweeps = box.schedules.invocations.length;
      // Past the doors' timeout and a minute, and the sweep's next firing.
      box.clock.advance(21 * 60_000 + 1_000);
      await eventually(() => expect(box.schedules.invocations.length).toBeGreaterThan(sweeps), 30_000);
      await eventually(async () => expect((await runItem(box, asking.runId))?.asks?.[interruptId]).toMatchObject({ state: 'open' }), 10_000);
      expect((await runItem(box, asking.runId))?.asksReopened).toBe(1);
      const again = await eventually(() => {
        const found = [...box.stepFunctions.executions.values()].find((e) => e.name !== asking.runId && JSON.parse(e.input).runId === asking.runId);
        expect(found?.status).toBe('RUNNING');
        return found!;
      }, 30_000);
      await eventually(async () => expect(recordBreaks(await box.record())).toEqual([]), 10_000);
      box.clock.advance(40 * 60_000);
      await eventually(() => expect(again.status).toBe('SUCCEEDED'), 20_000);
      expect((await runItem(box, asking.runId))?.asks?.[interruptId]).toMatchObject({ state: 'expired' });
    } finally {
      box.hook = () => 'serve';
    }
  });

  it('dispatcher killed at StartExecution as a run settles with an ask: the repair arms the timer, and the ask expires on time', async () => {
    const { box } = aws;
    const input = runInput(`t-${randomUUID()}`, '/ask 60');
    const fault = killOnce(box, (call) => call.caller === 'dispatcher' && call.action === 'states:StartExecution');
    try {
      const { events } = await readSse(await post(box, input));
      expect(events.at(-1)?.data).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'interrupt' } });
      // The stream ends at the run's end; the dispatcher reaches the timer just after.
      await eventually(() => expect(fault.killed()).toBe(true), 10_000);
      const execution = await eventually(() => {
        const found = [...box.stepFunctions.executions.values()].find((e) => e.name === input.runId);
        expect(found?.states.at(-1)).toBe('Wait until the earliest expiresAt');
        return found!;
      }, 30_000);
      box.clock.advance(61_000);
      await eventually(() => expect(execution.status).toBe('SUCCEEDED'), 20_000);
      expect(Object.values((await runItem(box, input.runId))?.asks ?? {})).toMatchObject([{ state: 'expired' }]);
      await eventually(async () => expect(recordBreaks(await box.record())).toEqual([]), 10_000);
    } finally {
      box.hook = () => 'serve';
    }
  });
});
