import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DynamoStore, createDynamoStore } from '../../../lambdas/adapters/aws/dynamodb/store/store.js';
import { ensureTables, localDynamoClient, startDynalite } from '../../../lambdas/adapters/local/dynalite.js';
import { StoreUnavailable } from '../../../lambdas/core/errors.js';
import type { StoredEvent } from '../../../lambdas/core/model.js';
import { harness, type Harness } from '../../support/core-harness.js';
import { useDynalite } from '../../support/dynalite.js';
import { aRun, aThread, events, range, seqs } from '../../support/store-fixtures.js';
import { recordProjections } from '../../../lambdas/core/a2a/task-state.js';

/**
 * What only the DynamoDB adapter does: its retries when DynamoDB pushes back, its count of billed
 * requests and units, and dynalite's files. The port's own behaviour is test/adapters/run-store.test.ts.
 */
const dynamo = useDynalite();

describe('DynamoStore: appending events when DynamoDB pushes back', () => {
  const storeWith = dynamo.storeWithWriteFaults;

  it('writes the events DynamoDB left unprocessed on a later attempt', async () => {
    const store = await storeWith((call) => (call <= 3 ? 'leave-half' : 'pass'));

    await store.events.append(events('run-1', 20));

    expect(seqs(await store.events.read('run-1', 0))).toEqual(range(1, 20));
    expect(store.sent.writeRequests).toBe(4);
  });

  it('retries a batch DynamoDB throttles, with backoff, and stores every event', async () => {
    const store = await storeWith((call) => (call <= 3 ? 'throttle' : 'pass'));

    await store.events.append(events('run-1', 30));

    expect(seqs(await store.events.read('run-1', 0))).toEqual(range(1, 30));
  });

  it('keeps trying a batch DynamoDB throttles, past any count of attempts, until it is stored', async () => {
    // Twelve attempts refused, thrown back or handed back whole as unprocessed: a partition past its write units.
    const store = await storeWith((call) => (call <= 12 ? (call % 2 === 0 ? 'leave-all' : 'throttle') : 'pass'));

    await store.events.append(events('run-1', 3));

    expect(seqs(await store.events.read('run-1', 0))).toEqual(range(1, 3));
    expect(store.sent.writeRequests).toBe(13);
  });

  it('gives up with store_unavailable when DynamoDB fails every attempt (a server fault, not throttling)', async () => {
    const store = await storeWith(() => 'fail');

    const appending = store.events.append(events('run-1', 30));

    await expect(appending).rejects.toBeInstanceOf(StoreUnavailable);
    await expect(appending).rejects.toMatchObject({ code: 'store_unavailable', cause: { name: 'InternalServerError' } });
  });

  it('lets a malformed write fail as itself, not as an outage', async () => {
    const store = await dynamo.freshStore();

    const appending = store.events.append([...events('run-1', 2), ...events('run-1', 1)]);

    await expect(appending).rejects.toMatchObject({ name: 'ValidationException' });
    await expect(appending).rejects.not.toBeInstanceOf(StoreUnavailable);
  });
});

describe('DynamoStore: what it sent', () => {
  it('appends nothing for no events', async () => {
    const store = await dynamo.freshStore();
    await store.events.append([]);
    expect(store.sent.writeRequests).toBe(0);
  });

  it('counts the requests it sends and the units it writes', async () => {
    const store = await dynamo.freshStore();
    expect(store.sent).toEqual({ readRequests: 0, writeRequests: 0, writeUnits: 0, usageRecordUnits: 0 });

    // A thread is listed in `byKey` by its last activity (retention's pass): a unit for the table, one for the index.
    await store.threads.create(aThread(), 'run-0');
    expect(store.sent).toEqual({ readRequests: 0, writeRequests: 1, writeUnits: 2, usageRecordUnits: 0 });

    // 30 events of ~1.5 KB: two batches, two units per event.
    await store.events.append(events('run-1', 30).map((e) => ({ ...e, event: { ...e.event, delta: 'x'.repeat(1500) } })));
    expect(store.sent).toEqual({ readRequests: 0, writeRequests: 3, writeUnits: 62, usageRecordUnits: 0 });

    await store.events.read('run-1', 0);
    await store.threads.get({ tenant: 'acme', threadId: 'nobody' });
    expect(store.sent.readRequests).toBe(2);
  });

  it('counts the whole run item for a transition, since DynamoDB bills an update on the item', async () => {
    const store = await dynamo.freshStore();
    const run = aRun({ input: { ...aRun().input, state: { notes: 'x'.repeat(10_000) } } });
    await store.runs.create(run);
    const created = store.sent.writeUnits;

    await store.runs.transition(run.runId, ['queued'], { status: 'running' });
    await store.runs.transition(run.runId, ['queued'], { status: 'running' });

    expect(created).toBeGreaterThanOrEqual(10);
    // The winner is billed on the ~10 KB item and its task's index entry (as the creation was, beside
    // its audit record: one unit and its byKey copy), the refused one on a single unit.
    expect(store.sent.writeUnits - created).toBe(created - 2 + 1);
    expect(store.sent.writeRequests).toBe(6);
  });
});

describe('DynamoStore on dynalite with a data directory', () => {
  it('keeps tables and runs across a restart over the same directory', async () => {
    const path = await mkdtemp(join(tmpdir(), 'funduq-dynalite-'));
    const tables = { runs: 'runs', runEvents: 'run-events' };
    const run = aRun();
    try {
      const first = await startDynalite({ path });
      const firstClient = localDynamoClient(first.endpoint);
      await ensureTables(firstClient, tables);
      await createDynamoStore({ client: firstClient, tables, projections: recordProjections }).runs.create(run);
      firstClient.destroy();
      await first.close();

      const second = await startDynalite({ path });
      const secondClient = localDynamoClient(second.endpoint);
      await ensureTables(secondClient, tables);
      const stored = await createDynamoStore({ client: secondClient, tables, projections: recordProjections }).runs.get(run.runId);
      secondClient.destroy();
      await second.close();

      expect(stored).toEqual(run);
    } finally {
      await rm(path, { recursive: true, force: true });
    }
  });
});

describe('a run while DynamoDB throttles (or fails) its event writes', () => {
  /** A real store on dynalite whose event writes DynamoDB throttles while `throttles(call)` says so. */
  const throttlingStore = (throttles: (call: number) => boolean) => dynamo.storeWithWriteFaults((call) => (throttles(call) ? 'throttle' : 'pass'));

  async function readToEnd(h: Harness, runId: string): Promise<StoredEvent[]> {
    const seen: StoredEvent[] = [];
    for await (const stored of h.gateway.followRun(runId, 0)) seen.push(stored);
    return seen;
  }

  it('does not end a run for a blip of throttling: the store retries with backoff and every event is stored', async () => {
    const h = await harness(await throttlingStore((call) => call <= 2));

    await h.send('hello');
    await h.settled();

    expect(await h.store.runs.get('run-1')).toMatchObject({ status: 'completed', lastSeq: 5 });
    expect((await readToEnd(h, 'run-1')).map((stored) => stored.seq)).toEqual([1, 2, 3, 4, 5]);
  });

  it('slows, not fails, a run whose every write is throttled many times over', async () => {
    const h = await harness(await throttlingStore((call) => call <= 10));

    await h.send('hello');
    await h.settled();

    expect(await h.store.runs.get('run-1')).toMatchObject({ status: 'completed', lastSeq: 5 });
    expect((await readToEnd(h, 'run-1')).map((stored) => stored.seq)).toEqual([1, 2, 3, 4, 5]);
  });

  it('closes the log with RUN_ERROR store_unavailable once the store takes writes again, so a reader sees why', async () => {
    // Five attempts of the run's first batch fail (a server fault); the store is back for its closing event.
    const h = await harness(await dynamo.storeWithWriteFaults((call) => (call <= 5 ? 'fail' : 'pass')));

    await h.send('hello');
    await h.settled();

    expect(await h.store.runs.get('run-1')).toMatchObject({ status: 'failed', reason: 'store_unavailable', lastSeq: 1 });
    const seen = await readToEnd(h, 'run-1');
    expect(seen.map((stored) => stored.event)).toEqual([
      { type: 'RUN_ERROR', code: 'store_unavailable', message: expect.stringContaining('after 5 attempts') },
    ]);
  });
});
