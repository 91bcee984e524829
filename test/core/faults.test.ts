import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, describe, expect, it } from 'vitest';
import { DynamoRunStore } from '../../lambdas/adapters/aws/dynamodb/run-store.js';
import { localDynamoClient } from '../../lambdas/adapters/local/dynalite.js';
import type { StoredEvent } from '../../lambdas/core/model.js';
import { eventually, Gate, harness, lastText, replyEvents, type Harness } from '../support/core-harness.js';
import { useDynalite } from '../support/dynalite.js';

const dynamo = useDynalite();
const clients: DynamoDBClient[] = [];
afterAll(() => clients.forEach((client) => client.destroy()));

/**
 * A real DynamoRunStore on dynalite whose event writes (BatchWriteItem) DynamoDB throttles while
 * `throttles(call)` says so: the store's own retries and backoff are what is under test, so the
 * refusal is made before the SDK's retry step.
 */
async function throttlingStore(throttles: (call: number) => boolean): Promise<DynamoRunStore> {
  const client = localDynamoClient(dynamo.endpoint);
  clients.push(client);
  let calls = 0;
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName !== 'BatchWriteItemCommand') return next(args);
      calls += 1;
      if (!throttles(calls)) return next(args);
      throw Object.assign(new Error('The level of configured provisioned throughput for the table was exceeded'), {
        name: 'ProvisionedThroughputExceededException',
        $fault: 'client',
        $metadata: {},
      });
    },
    { step: 'initialize', name: 'throttledWrites' },
  );
  return new DynamoRunStore({ client, tables: await dynamo.freshTables() });
}

async function readToEnd(h: Harness, runId: string): Promise<StoredEvent[]> {
  const seen: StoredEvent[] = [];
  for await (const stored of h.gateway.followRun(runId, 0)) seen.push(stored);
  return seen;
}

describe('a store that refuses writes', () => {
  it('does not end a run for a blip of throttling: the store retries with backoff and every event is stored', async () => {
    const h = await harness(await throttlingStore((call) => call <= 2));

    await h.send('hello');
    await h.settled();

    expect(await h.store.getRun('run-1')).toMatchObject({ status: 'completed', lastSeq: 5 });
    expect((await readToEnd(h, 'run-1')).map((stored) => stored.seq)).toEqual([1, 2, 3, 4, 5]);
  });

  it('fails the run with store_unavailable when its events cannot be written, and the thread moves on', async () => {
    let down = true;
    const h = await harness(await throttlingStore(() => down));
    const next = new Gate();
    h.provider.script = async function* (input) {
      if (lastText(input) === 'next') await next.wait;
      yield* replyEvents(input, lastText(input));
    };

    await h.send('lost');
    await h.send('next');
    await eventually(async () => expect(await h.store.getRun('run-1')).toMatchObject({ status: 'failed', reason: 'store_unavailable' }), 15_000);
    down = false;
    next.open();
    await h.settled();

    // A reader of the failed run is not left waiting for events that were never stored.
    expect(await readToEnd(h, 'run-1')).toEqual([]);
    expect(await h.store.getRun('run-2')).toMatchObject({ status: 'completed' });
    expect((await h.events('run-2')).map((stored) => stored.event.type).at(-1)).toBe('RUN_FINISHED');
    expect((await h.store.getThread(h.thread))?.unsettled).toBe(0);
  });

  it('closes the log with RUN_ERROR store_unavailable once the store takes writes again, so a reader sees why', async () => {
    // Five attempts of the run's first batch are refused; the store is back for its closing event.
    const h = await harness(await throttlingStore((call) => call <= 5));

    await h.send('hello');
    await h.settled();

    expect(await h.store.getRun('run-1')).toMatchObject({ status: 'failed', reason: 'store_unavailable', lastSeq: 1 });
    const seen = await readToEnd(h, 'run-1');
    expect(seen.map((stored) => stored.event)).toEqual([
      { type: 'RUN_ERROR', code: 'store_unavailable', message: expect.stringContaining('after 5 attempts') },
    ]);
  });
});
