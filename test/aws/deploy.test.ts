import { randomUUID } from 'node:crypto';
import { cp, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { AwsBox, BOX_CONTEXT, useAwsBox } from '../support/aws-box/box.js';
import { runInput } from '../support/aws-box/run-input.js';
import { synthesize } from '../support/aws-box/synth.js';
import { eventually } from '../support/core-harness.js';
import { readSse } from '../support/gateway.js';
import { recordBreaks } from '../support/record-invariants.js';

/**
 * What the deployed shape promises beyond the flows: what it takes to deploy it, what each bundle
 * carries, what the platform does when a dispatch is throttled or a dispatcher dies, and the box's
 * own IAM check.
 */
// A thread's first run is the dispatcher's here (relayAtDoor false): its death, its message's return and its dead letter are what this file kills.
const aws = useAwsBox({ context: { ...BOX_CONTEXT, relayAtDoor: 'false' } });

beforeAll(async () => {
  expect((await aws.box.admin('PUT', 'agents/demo', { provider: 'demo', description: 'the demo agent' })).status).toBe(201);
});


async function statusOf(box: AwsBox, threadId: string, runId: string): Promise<{ status: string; reason?: string } | undefined> {
  const response = await box.request('GET', `/threads/${encodeURIComponent(threadId)}`);
  const view = (await response.json()) as { runs?: Array<{ runId: string; status: string; reason?: string }> };
  return view.runs?.find((run) => run.runId === runId);
}

describe('the stack as deployed', { timeout: 120_000 }, () => {
  it('deploys on a new account, whose Lambda concurrency quota is 10', async () => {
    const box = await AwsBox.deploy(await synthesize(BOX_CONTEXT), { accountConcurrency: 10 });
    await box.close();
  });

  it('is refused on such an account when it reserves concurrency, as Lambda keeps 100 unreserved', async () => {
    const dir = await synthesize(BOX_CONTEXT);
    const copy = await mkdtemp(join(tmpdir(), 'funduq-box-'));
    try {
      await cp(join(dir, 'Funduq.template.json'), join(copy, 'Funduq.template.json'));
      const template = JSON.parse(await readFile(join(copy, 'Funduq.template.json'), 'utf8'));
      const [dispatcher] = Object.values(template.Resources as Record<string, { Type: string; Properties: Record<string, any> }>).filter(
        (r) => r.Type === 'AWS::Lambda::Function' && r.Properties.Environment.Variables.FUNDUQ_FUNCTION === 'dispatcher',
      );
      dispatcher.Properties.ReservedConcurrentExecutions = 20;
      await writeFile(join(copy, 'Funduq.template.json'), JSON.stringify(template));
      await expect(AwsBox.deploy(copy, { accountConcurrency: 10 })).rejects.toThrow(/UnreservedConcurrentExecution below its minimum value of \[100\]/);
    } finally {
      await rm(copy, { recursive: true, force: true });
    }
  });

  it('bundles in each function the AWS clients it calls and no others, the X-Ray SDK in none, and OpenTelemetry where runs are traced', async () => {
    const { box } = aws;
    const markers = {
      dynamodb: 'DynamoDB_20120810',
      sqs: 'AmazonSQS',
      sfn: 'AWSStepFunctions',
      lambda: '/2015-03-31/functions',
      xray: 'AWS_XRAY_DAEMON_ADDRESS',
      otel: 'OTEL_BSP_SCHEDULE_DELAY',
      connections: 'PostToConnection',
    };
    // The thread queue is in every function that settles runs: a link run's held message is let go there.
    const expected: Record<string, string[]> = {
      doors: ['dynamodb', 'sqs', 'sfn', 'lambda', 'otel', 'connections'],
      'doors-stream': ['dynamodb', 'sqs', 'sfn', 'lambda', 'otel', 'connections'],
      dispatcher: ['dynamodb', 'sqs', 'sfn', 'lambda', 'otel', 'connections'],
      'ask-expirer': ['dynamodb', 'otel'],
      'stream-handler': ['dynamodb'],
      'dead-letters': ['dynamodb', 'sqs', 'otel'],
      repair: ['dynamodb', 'sqs', 'sfn', 'otel'],
      link: ['dynamodb', 'sqs', 'sfn', 'otel', 'connections'],
      'link-timer': ['dynamodb', 'sqs', 'sfn', 'otel', 'connections'],
      sweep: ['dynamodb', 'sqs', 'sfn', 'otel'],
    };
    const found: Record<string, string[]> = {};
    for (const fn of box.lambda.functions.values()) {
      const bundle = await readFile(join(fn.code, 'index.mjs'), 'utf8');
      found[fn.handler] = Object.entries(markers).filter(([, marker]) => bundle.includes(marker)).map(([name]) => name);
    }
    expect(found).toEqual(expected);
  });

  it('imports each function’s bundle at a cold start (with FUNDUQ_TEST_FIGURES=1, five times each, printing the import times)', async () => {
    const { box } = aws;
    const rounds = process.env.FUNDUQ_TEST_FIGURES ? 5 : 1;
    const times = new Map<string, number[]>();
    // One environment at a time, so each import has the machine to itself as far as the box goes.
    for (let round = 0; round < rounds; round++) {
      for (const handler of box.lambda.functions.keys()) times.set(handler, [...(times.get(handler) ?? []), await box.lambda.init(handler)]);
    }
    expect([...times.keys()].sort()).toEqual([...box.lambda.functions.keys()].sort());
    if (process.env.FUNDUQ_TEST_FIGURES) {
      const rows: Record<string, { bundleKb: number; medianMs: number; minMs: number; maxMs: number }> = {};
      for (const [handler, ms] of times) {
        const sorted = [...ms].sort((a, b) => a - b);
        const bundle = await stat(join(box.lambda.fn(handler).code, 'index.mjs'));
        rows[handler] = { bundleKb: Math.round(bundle.size / 1024), medianMs: Math.round(sorted[Math.floor(sorted.length / 2)]), minMs: Math.round(sorted[0]), maxMs: Math.round(sorted.at(-1)!) };
      }
      console.log(`cold import of each function's bundle (Node 22, ${rounds} cold starts each):`);
      console.table(rows);
    }
  }, 180_000);

  it('runs a dispatch throttled for an hour once the throttle lifts, without sending it to the dead-letter queue', async () => {
    const { box } = aws;
    const thread = [...box.sqs.queues.values()].find((q) => q.redrive)!;
    const deadLetters = box.sqs.queue(thread.redrive!.target);
    const throttles = () => box.eventSources.batches.filter((b) => b.handler === 'dispatcher' && b.outcome === 'throttled').length;
    box.lambda.throttled.add('dispatcher');
    const input = runInput(`t-${randomUUID()}`, 'throttled');
    const stream = box.fetch(`${box.url}/agui/demo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(input) });
    await eventually(() => expect(throttles()).toBeGreaterThan(0), 30_000);
    // An hour of the account's concurrency used up elsewhere: Lambda retries the invoke while the message is invisible.
    for (let advanced = 0; advanced < 60 * 60_000 && deadLetters.messages.length === 0; advanced += 60_000) {
      const before = throttles();
      box.clock.advance(60_000);
      await eventually(() => expect(throttles() > before || deadLetters.messages.length > 0).toBe(true), 10_000);
    }
    expect(deadLetters.messages).toEqual([]);
    box.lambda.throttled.delete('dispatcher');
    box.clock.advance(60_000);
    const { events } = await readSse(await stream);
    expect(events.at(-1)?.data.type).toBe('RUN_FINISHED');
    // The dispatcher returned: its message is deleted, and the thread's group is free.
    await eventually(() => expect(thread.messages.filter((m) => m.body.includes(input.runId))).toEqual([]), 10_000);
  });

  it('fails a run dispatch_lost when its dispatcher died mid-run and its message came back after the visibility timeout', async () => {
    const { box } = aws;
    const input = runInput(`t-${randomUUID()}`, '/slow 50');
    let killed = false;
    box.hook = (call) => {
      // Mid-run: at its first write of the run's events (the run is running, its lease taken).
      if (killed || call.caller !== 'dispatcher' || call.action !== 'dynamodb:BatchWriteItem') return 'serve';
      killed = true;
      return 'kill';
    };
    try {
      const stream = box.fetch(`${box.url}/agui/demo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(input) });
      await eventually(() => expect(killed).toBe(true), 30_000);
      expect((await statusOf(box, input.threadId, input.runId))?.status).toBe('running');
      const visibility = [...box.sqs.queues.values()].find((q) => q.redrive)!.visibilityTimeoutMs;
      box.clock.advance(visibility + 1_000);
      await eventually(async () => expect(await statusOf(box, input.threadId, input.runId)).toMatchObject({ status: 'failed', reason: 'dispatch_lost' }), 30_000);
      const { events } = await readSse(await stream);
      expect(events.at(-1)?.data).toMatchObject({ type: 'RUN_ERROR' });
    } finally {
      box.hook = () => 'serve';
    }
  });

  it('fails a run dispatch_failed once its message is dead-lettered, gives back its place, and ends its replay with that RUN_ERROR', async () => {
    const { box } = aws;
    const thread = [...box.sqs.queues.values()].find((q) => q.redrive)!;
    const input = runInput(`t-${randomUUID()}`, 'never dispatched');
    let kills = 0;
    const ours = () => thread.messages.find((m) => m.body.includes(input.runId));
    let calledByDeadLetters = false;
    let repaired = false;
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    // Every dispatcher dies at its first call (marking the run running); the dead letters' consumer waits for the replay to open.
    box.hook = async (call) => {
      if (call.caller === 'repair' && call.action === 'sqs:SendMessage') repaired = true;
      if (call.caller === 'dispatcher' && call.n === 1) {
        // Counted by this run's message: a dispatcher of another test's run (one the sweep delivered again) dies too, uncounted.
        kills = Math.max(kills, ours()?.receiveCount ?? kills);
        return 'kill';
      }
      if (call.caller === 'dead-letters') {
        calledByDeadLetters = true;
        await held;
      }
      return 'serve';
    };
    try {
      const stream = box.fetch(`${box.url}/agui/demo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(input) });
      expect((await stream).status).toBe(200);
      // The repair's message for the new run comes within SQS's deduplication window (the clock has not moved yet): it is the same message.
      await eventually(() => expect(repaired).toBe(true), 30_000);
      for (let receive = 1; receive <= thread.redrive!.maxReceiveCount; receive++) {
        await eventually(() => expect(kills).toBe(receive), 30_000);
        box.clock.advance(thread.visibilityTimeoutMs + 1_000);
      }
      await eventually(() => expect(calledByDeadLetters).toBe(true), 30_000);
      expect((await statusOf(box, input.threadId, input.runId))?.status).toBe('queued');
      const replay = box.fetch(`${box.url}/agui/demo/runs/${input.runId}/events`);
      expect((await replay).status).toBe(200);
      release();
      const { events } = await readSse(await replay);
      expect(events.map((e) => e.data)).toEqual([{ type: 'RUN_ERROR', code: 'dispatch_failed', message: expect.any(String) }]);
      // The caller's own stream, open all along, ends with it too.
      expect((await readSse(await stream)).events.at(-1)?.data).toMatchObject({ type: 'RUN_ERROR', code: 'dispatch_failed' });
      expect(await statusOf(box, input.threadId, input.runId)).toMatchObject({ status: 'failed', reason: 'dispatch_failed' });
      expect(recordBreaks(await box.record())).toEqual([]);
      expect(kills).toBe(thread.redrive!.maxReceiveCount);
    } finally {
      release();
      box.hook = () => 'serve';
    }
  });

  it('checks each AWS call against the calling function’s policies, index ARNs included, and names what it refused', () => {
    const { box } = aws;
    const role = (handler: string) => ({ name: handler, roleId: box.lambda.fn(handler).roleId });
    const [runs, runEvents] = [...box.dynamodb.tables.values()].sort((a, b) => a.name.localeCompare(b.name)).reverse();
    expect(box.iam.allows(role('doors-stream').roleId, 'dynamodb:Query', `${runs.arn}/index/byThread`)).toBe(true);
    expect(box.iam.allows(role('stream-handler').roleId, 'dynamodb:BatchWriteItem', runEvents.arn)).toBe(false);
    const thread = [...box.sqs.queues.values()].find((q) => q.redrive)!;
    const refused = box.iam.check(role('stream-handler'), 'sqs:SendMessage', thread.arn);
    expect(refused).toContain('stream-handler is not authorized to perform: sqs:SendMessage on resource: arn:aws:sqs:');
    expect(box.iam.denials.splice(0)).toEqual([{ caller: 'stream-handler', action: 'sqs:SendMessage', resource: thread.arn }]);
  });
});
