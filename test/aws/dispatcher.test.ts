import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import type { RunAgentInput } from '@ag-ui/client';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import { describe, expect, it } from 'vitest';
import { runInput } from '../support/aws-box/run-input.js';
import { BOX_CONTEXT, useAwsBox, type AwsBox } from '../support/aws-box/box.js';
import { eventually, Gate } from '../support/core-harness.js';
import { readSse } from '../support/gateway.js';
import { startHeldAgent } from '../support/held-agent.js';
import { recordBreaks } from '../support/record-invariants.js';

/**
 * The dispatcher on the AWS box, where its environment may die mid-run (out of memory, a lost
 * host) or fall behind, and where DynamoDB throttles a partition past its write units: a dead
 * dispatcher's run fails `dispatch_lost` within its lease's lapse and one sweep period, not at its
 * message's visibility timeout, and a hot run is slowed, not failed.
 */
// A thread's first run is the dispatcher's here: no run is relayed at its door (a door that dies relaying one is test/aws/door-relay.test.ts's).
const aws = useAwsBox({ context: { ...BOX_CONTEXT, relayAtDoor: 'false' } });

/** The stack's defaults: `leaseLapseSeconds` 60, `arrivalSweepMinutes` 5. */
const LAPSE_MS = 60_000;
const SWEEP_PERIOD_MS = 5 * 60_000;

type Input = ReturnType<typeof runInput>;

/** Posts a run and reads its stream to the end: its events' data, or undefined when the stream failed. */
async function streamOf(box: AwsBox, input: Input, agentId: string): Promise<Array<Record<string, unknown>> | undefined> {
  const response = await box.fetch(`${box.url}/agui/${agentId}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(input) });
  if (response.status !== 200) return undefined;
  return (await readSse(response)).events.map((event) => event.data);
}

async function registered(box: AwsBox, url: string): Promise<string> {
  const agentId = `agent-${randomUUID()}`;
  expect((await box.admin('PUT', `agents/${agentId}`, { url, description: 'a test agent' })).status).toBe(201);
  return agentId;
}

async function idle(box: AwsBox): Promise<void> {
  await eventually(() => expect(box.lambda.running('dispatcher')).toEqual([]), 30_000);
}

/** Moves the box's clock past a lease's lapse and the sweep after it, and waits for that sweep. */
async function pastTheLapse(box: AwsBox): Promise<void> {
  const sweeps = box.schedules.invocations.length;
  box.clock.advance(LAPSE_MS + SWEEP_PERIOD_MS + 1_000);
  await eventually(() => expect(box.schedules.invocations.length).toBeGreaterThan(sweeps), 30_000);
}

describe('a dispatcher that dies mid-run', { timeout: 300_000 }, () => {
  it('fails its run dispatch_lost after the lease’s lapse and one sweep, and its thread’s next runs run, whichever write of events it died at', async () => {
    const { box } = aws;
    // A clean run says how many writes of events a run makes.
    const clean = await startHeldAgent();
    const cleanId = await registered(box, clean.url);
    await idle(box);
    let writes = 0;
    box.hook = (call) => {
      if (call.caller === 'dispatcher' && call.duringInvocation && call.action === 'dynamodb:BatchWriteItem') writes += 1;
      return 'serve';
    };
    // Its first event written alone, the rest once the agent goes on.
    const cleanStream = streamOf(box, runInput(`t-${randomUUID()}`, 'clean'), cleanId);
    await eventually(() => expect(writes).toBe(1), 30_000);
    clean.release();
    expect((await cleanStream)?.at(-1)).toMatchObject({ type: 'RUN_FINISHED' });
    box.hook = () => 'serve';
    await clean.close();
    expect(writes).toBeGreaterThanOrEqual(2);

    for (let at = 1; at <= writes; at++) {
      const agent = await startHeldAgent();
      try {
        const agentId = await registered(box, agent.url);
        await idle(box);
        const threadId = `t-${randomUUID()}`;
        const first = runInput(threadId, 'first');
        const behind = runInput(threadId, 'queued behind');
        const queuedBehind = new Gate();
        let count = 0;
        let killed = false;
        box.hook = async (call) => {
          if (killed || call.caller !== 'dispatcher' || !call.duringInvocation || call.action !== 'dynamodb:BatchWriteItem' || ++count !== at) return 'serve';
          killed = true;
          // The next run is queued behind the run before its dispatcher dies.
          await queuedBehind.wait;
          return 'kill';
        };
        const firstStream = streamOf(box, first, agentId);
        await eventually(async () => expect((await box.run(first.runId))?.status).toBe('running'), 30_000);
        const behindStream = streamOf(box, behind, agentId);
        await eventually(async () => expect((await box.run(behind.runId))?.status).toBe('queued'), 30_000);
        agent.release();
        queuedBehind.open();
        await eventually(() => expect({ at, killed }).toEqual({ at, killed: true }), 30_000);
        box.hook = () => 'serve';
        await pastTheLapse(box);

        const ended = await firstStream;
        expect({ at, end: ended?.at(-1) }).toMatchObject({ at, end: { type: 'RUN_ERROR', code: 'dispatch_lost' } });
        expect((await box.run(first.runId))?.status).toBe('failed');
        expect({ at, end: (await behindStream)?.at(-1) }).toMatchObject({ at, end: { type: 'RUN_FINISHED' } });
        expect({ at, end: (await streamOf(box, runInput(threadId, 'sent after'), agentId))?.at(-1) }).toMatchObject({ at, end: { type: 'RUN_FINISHED' } });
        await eventually(async () => expect({ at, breaks: recordBreaks(await box.record()) }).toEqual({ at, breaks: [] }), 20_000);
      } finally {
        box.hook = () => 'serve';
        agent.release();
        await agent.close();
      }
    }
  });

  it('lets a dispatcher paused past its lease find its run failed, and write nothing over the failure', async () => {
    const { box } = aws;
    const agent = await startHeldAgent();
    const paused = new Gate();
    try {
      const agentId = await registered(box, agent.url);
      await idle(box);
      const input = runInput(`t-${randomUUID()}`, 'paused');
      // Paused once it holds its lease (its PutItem) and marked its run running (an UpdateItem), at its next update (a renewal, or its settle).
      let leased = false;
      let updates = 0;
      const afterTheSweep: string[] = [];
      let swept = false;
      box.hook = async (call): Promise<'serve'> => {
        if (call.caller !== 'dispatcher') return 'serve';
        if (swept && /:(PutItem|BatchWriteItem|DeleteItem)$/.test(call.action)) afterTheSweep.push(`${call.action} ${call.resource}`);
        if (call.action === 'dynamodb:PutItem') leased = true;
        if (leased && call.action === 'dynamodb:UpdateItem' && ++updates >= 2) await paused.wait;
        return 'serve';
      };
      const stream = streamOf(box, input, agentId);
      await eventually(async () => expect((await box.run(input.runId))?.status).toBe('running'), 30_000);
      // Its agent goes on, and it stops at its next write of the run's item.
      agent.release();
      await eventually(() => expect(updates).toBeGreaterThanOrEqual(1), 60_000);
      await pastTheLapse(box);
      const failed = await eventually(async () => {
        const run = await box.run(input.runId);
        expect(run).toMatchObject({ status: 'failed', reason: 'dispatch_lost' });
        return run;
      }, 30_000);
      swept = true;
      paused.open();
      expect((await stream)?.at(-1)).toMatchObject({ type: 'RUN_ERROR', code: 'dispatch_lost' });
      await idle(box);
      expect(await box.run(input.runId)).toEqual(failed);
      // Its write of the run's item was refused, and it wrote nothing else: no events, no end.
      expect(afterTheSweep).toEqual([]);
      // What it stored before its pause, then the sweep's RUN_ERROR: nothing of its own end.
      const { events } = await readSse(await box.fetch(`${box.url}/agui/${agentId}/runs/${input.runId}/events`));
      expect(events.map((event) => event.data.type).filter((type) => type === 'RUN_FINISHED')).toEqual([]);
      expect(events.at(-1)?.data).toMatchObject({ type: 'RUN_ERROR', code: 'dispatch_lost' });
    } finally {
      box.hook = () => 'serve';
      paused.open();
      agent.release();
      await agent.close();
    }
  });
});

/**
 * An AG-UI agent that sends `count` events as fast as its socket takes them: one message of
 * `count - 4` deltas of 1.1 KB each (two write units an event: the box writes fewer events a
 * second than DynamoDB takes, and units, not events, are what a partition is limited by).
 */
const PADDING = 'x'.repeat(1_100);

async function startBurstAgent(count: number): Promise<{ url: string; close(): Promise<void> }> {
  const app = new Hono();
  app.post('*', async (c) => {
    const input = (await c.req.json()) as RunAgentInput;
    return streamSSE(c, async (stream) => {
      const send = (event: Record<string, unknown>) => stream.writeSSE({ data: JSON.stringify(event) });
      await send({ type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId });
      await send({ type: 'TEXT_MESSAGE_START', messageId: 'm', role: 'assistant' });
      for (let i = 0; i < count - 4; i++) await send({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: `d${i} ${PADDING}` });
      await send({ type: 'TEXT_MESSAGE_END', messageId: 'm' });
      await send({ type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId });
    });
  });
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s as Server));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/agent`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('a run that bursts past what one partition of DynamoDB takes', { timeout: 300_000 }, () => {
  it('is slowed, not failed: a 4,000-event burst into a partition that takes 250 write units a second is stored whole, in order, none doubled, and its caller receives all of it', async () => {
    const { box } = aws;
    // Four times what the partition takes in a second: throttled for seconds, at a quarter of the events' CPU.
    const COUNT = 4_000;
    const agent = await startBurstAgent(COUNT);
    try {
      const agentId = await registered(box, agent.url);
      await idle(box);
      // DynamoDB on demand takes about 1,000 write units a second per partition, and a run's log is
      // one; a quarter of that throttles this burst as 15,000 events would throttle a real one.
      box.dynamodb.writeUnitsPerSecond = 250;
      const input = runInput(`t-${randomUUID()}`, 'burst');
      const received = await streamOf(box, input, agentId);
      box.dynamodb.writeUnitsPerSecond = undefined;
      expect(box.dynamodb.throttled.items + box.dynamodb.throttled.calls).toBeGreaterThan(0);

      const deltas = (events: Array<Record<string, unknown>> | undefined) => (events ?? []).filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').map((e) => e.delta);
      const expected = Array.from({ length: COUNT - 4 }, (_, i) => `d${i} ${PADDING}`);
      expect(received?.length).toBe(COUNT);
      expect(received?.at(-1)).toMatchObject({ type: 'RUN_FINISHED' });
      expect(deltas(received)).toEqual(expected);
      expect(await box.run(input.runId)).toMatchObject({ status: 'completed', lastSeq: COUNT });
      const replay = await readSse(await box.fetch(`${box.url}/agui/${agentId}/runs/${input.runId}/events`));
      expect(replay.events.map((event) => Number(event.id))).toEqual(Array.from({ length: COUNT }, (_, i) => i + 1));
      expect(deltas(replay.events.map((event) => event.data))).toEqual(expected);
    } finally {
      box.dynamodb.writeUnitsPerSecond = undefined;
      await agent.close();
    }
  });
});
