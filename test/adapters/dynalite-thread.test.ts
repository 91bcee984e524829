import { GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { DynamoStore, createDynamoStore } from '../../lambdas/adapters/aws/dynamodb/store/store.js';
import { ensureTables, inProcessDynamoClient, localDynamoClient, startDynalite } from '../../lambdas/adapters/local/dynalite.js';
import type { StoredEvent } from '../../lambdas/core/model.js';
import { recordProjections } from '../../lambdas/core/a2a/task-state.js';

const TABLES = { runs: 'runs', runEvents: 'run-events' };

const events = (runId: string, count: number): StoredEvent[] =>
  Array.from({ length: count }, (_, i) => ({ runId, seq: i + 1, event: { type: 'CUSTOM', name: 'n', value: i } as StoredEvent['event'] }));

describe('dynalite on its own thread, reached through its message port', () => {
  it('stores what a client over HTTP reads back, and the other way round', async () => {
    const dynamo = await startDynalite();
    const viaThread = inProcessDynamoClient(dynamo);
    const viaHttp = localDynamoClient(dynamo.endpoint);
    try {
      await ensureTables(viaThread, TABLES);
      const threadStore = createDynamoStore({ client: viaThread, tables: TABLES, projections: recordProjections });
      const httpStore = createDynamoStore({ client: viaHttp, tables: TABLES, projections: recordProjections });
      await threadStore.events.append(events('run-a', 60));
      await httpStore.events.append(events('run-b', 3));
      expect(await httpStore.events.read('run-a', 0)).toEqual(events('run-a', 60).map((e) => ({ ...e, json: JSON.stringify(e.event) })));
      expect((await threadStore.events.read('run-b', 1)).map((e) => e.seq)).toEqual([2, 3]);
    } finally {
      viaThread.destroy();
      viaHttp.destroy();
      await dynamo.close();
    }
  });

  it("answers with DynamoDB's own errors: a failed condition, a missing table", async () => {
    const dynamo = await startDynalite();
    const client = inProcessDynamoClient(dynamo);
    try {
      await ensureTables(client, TABLES);
      const item = { runId: { S: 'r' }, seq: { N: '1' } };
      await client.send(new PutItemCommand({ TableName: TABLES.runEvents, Item: item }));
      await expect(
        client.send(new PutItemCommand({ TableName: TABLES.runEvents, Item: item, ConditionExpression: 'attribute_not_exists(runId)' })),
      ).rejects.toMatchObject({ name: 'ConditionalCheckFailedException', $metadata: { httpStatusCode: 400 } });
      await expect(client.send(new GetItemCommand({ TableName: 'no-such-table', Key: item }))).rejects.toMatchObject({
        name: 'ResourceNotFoundException',
      });
    } finally {
      client.destroy();
      await dynamo.close();
    }
  });

  it('lets the requests under way finish when it closes, and refuses later ones with an error instead of crashing', async () => {
    const dynamo = await startDynalite();
    const client = inProcessDynamoClient(dynamo);
    await ensureTables(client, TABLES);
    const store = createDynamoStore({ client, tables: TABLES, projections: recordProjections });
    // Closed the moment the first of the write's requests reaches the thread.
    const transport = dynamo.transport;
    const handle = transport.handle.bind(transport);
    let closed: Promise<void> | undefined;
    transport.handle = (...args) => {
      const answered = handle(...args);
      closed ??= dynamo.close();
      return answered;
    };
    await expect(store.events.append(events('run-c', 20))).resolves.toBeUndefined();
    await closed;
    await expect(store.events.read('run-c', 0)).rejects.toThrow('the local DynamoDB is closed');
    client.destroy();
  });

  it('says when its thread ends without being closed, and fails every request from then on', async () => {
    const lost: Error[] = [];
    const dynamo = await startDynalite({ onLost: (error) => lost.push(error) });
    const client = inProcessDynamoClient(dynamo);
    await ensureTables(client, TABLES);
    const store = createDynamoStore({ client, tables: TABLES, projections: recordProjections });
    // The thread dies under the gateway (as an out-of-memory end would take it).
    await (dynamo.transport as unknown as { worker: { terminate(): Promise<number> } }).worker.terminate();
    await expect(store.events.lastSeq('run-e')).rejects.toThrow('the local DynamoDB thread is gone');
    expect(lost.map((error) => error.message)).toEqual(['the local DynamoDB thread is gone']);
    await dynamo.close();
    client.destroy();
  });

  it('keeps its data on disk across a restart', async () => {
    const { mkdtemp, rm } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const path = await mkdtemp(join(tmpdir(), 'funduq-dynalite-thread-'));
    try {
      const first = await startDynalite({ path });
      const writer = inProcessDynamoClient(first);
      await ensureTables(writer, TABLES);
      await createDynamoStore({ client: writer, tables: TABLES, projections: recordProjections }).events.append(events('run-d', 5));
      writer.destroy();
      await first.close();

      const second = await startDynalite({ path });
      const reader = inProcessDynamoClient(second);
      await ensureTables(reader, TABLES);
      expect(await createDynamoStore({ client: reader, tables: TABLES, projections: recordProjections }).events.lastSeq('run-d')).toBe(5);
      reader.destroy();
      await second.close();
    } finally {
      await rm(path, { recursive: true, force: true });
    }
  });
});
