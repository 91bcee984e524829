import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { runInput } from '../support/aws-box/run-input.js';
import { BOX_CONTEXT, useAwsBox } from '../support/aws-box/box.js';
import { eventually } from '../support/core-harness.js';
import { readSse } from '../support/gateway.js';
import { startHeldAgent } from '../support/held-agent.js';
import { recordBreaks } from '../support/record-invariants.js';

/**
 * The shortest lapse the settings take: the streaming door's reader waits it out in real time. No
 * run is relayed at its door here, so the thread's first run is a dispatcher's (a door that dies
 * relaying one is test/aws/door-relay.test.ts's).
 */
const LAPSE_SECONDS = 10;
const aws = useAwsBox({ context: { ...BOX_CONTEXT, leaseLapseSeconds: String(LAPSE_SECONDS), leaseRenewSeconds: '2', relayAtDoor: 'false' } });

describe("a caller's stream of a run whose dispatcher died", { timeout: 120_000 }, () => {
  it('ends dispatch_lost one to two lapses after the death, found by the streaming door itself with no sweep, and the thread’s next run runs', async () => {
    const { box } = aws;
    const agent = await startHeldAgent();
    try {
      const agentId = `agent-${randomUUID()}`;
      expect((await box.admin('PUT', `agents/${agentId}`, { url: agent.url, description: 'holds its runs' })).status).toBe(201);
      const threadId = `t-${randomUUID()}`;
      const first = runInput(threadId, 'first');
      const behind = runInput(threadId, 'queued behind');
      let killed = false;
      // When the dispatcher died: its lease lapses a lapse after its last renewal, at most a renewal before.
      let diedAt = 0;
      box.hook = (call) => {
        if (killed || call.caller !== 'dispatcher' || !call.duringInvocation || call.action !== 'dynamodb:BatchWriteItem') return 'serve';
        killed = true;
        diedAt = Date.now();
        return 'kill';
      };
      const post = (input: typeof first) => box.fetch(`${box.url}/agui/${agentId}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(input) });
      const firstStream = post(first).then(readSse);
      await eventually(async () => expect((await box.run(first.runId))?.status).toBe('running'), 30_000);
      const behindStream = post(behind).then(readSse);
      await eventually(async () => expect((await box.run(behind.runId))?.status).toBe('queued'), 30_000);
      agent.release();
      await eventually(() => expect(killed).toBe(true), 30_000);
      box.hook = () => 'serve';
      const sweeps = box.schedules.invocations.length;

      const ended = (await firstStream).events.at(-1)?.data;
      expect(ended).toMatchObject({ type: 'RUN_ERROR', code: 'dispatch_lost' });
      // Found by the reader, not the sweep: no schedule ran, the clock was never moved, and it took a lapse at least.
      expect(box.schedules.invocations.length).toBe(sweeps);
      expect(Date.now() - diedAt).toBeGreaterThanOrEqual(LAPSE_SECONDS * 1000 - 2_000);
      expect((await behindStream).events.at(-1)?.data).toMatchObject({ type: 'RUN_FINISHED' });
      expect(box.iam.denials).toEqual([]);
      await eventually(async () => expect(recordBreaks(await box.record())).toEqual([]), 20_000);
    } finally {
      box.hook = () => 'serve';
      agent.release();
      await agent.close();
    }
  });
});
