import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { BatchWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll } from 'vitest';
import { DynamoStore, createDynamoStore } from '../../lambdas/adapters/aws/dynamodb/store/store.js';
import type { TableNames } from '../../lambdas/adapters/aws/dynamodb/tables.js';
import { ensureTables, localDynamoClient, startDynalite, type LocalDynamo } from '../../lambdas/adapters/local/dynalite.js';
import { recordProjections } from '../../lambdas/core/a2a/task-state.js';

/**
 * One in-memory dynalite for the test file. Every `freshTables()` / `freshStore()` gets tables of
 * its own, so tests share a server but never a row.
 */
/**
 * How DynamoDB answers one write of events (a BatchWriteItem, or a conditional PutItem of one
 * event): as asked, part or all of a batch left unprocessed, or throttled.
 */
export type WriteFault = (call: number, input: BatchWriteCommandInput) => 'pass' | 'leave-half' | 'leave-all' | 'throttle' | 'fail';

export function useDynalite() {
  let dynamo: LocalDynamo | undefined;
  let client: DynamoDBClient | undefined;
  let tableCount = 0;

  beforeAll(async () => {
    dynamo = await startDynalite();
    client = localDynamoClient(dynamo.endpoint);
  });

  const faultyClients: DynamoDBClient[] = [];

  afterAll(async () => {
    client?.destroy();
    for (const faulty of faultyClients) faulty.destroy();
    await dynamo?.close();
  });

  function started(): { dynamo: LocalDynamo; client: DynamoDBClient } {
    if (!dynamo || !client) throw new Error('useDynalite(): dynalite is not started; call it at the top of a test file');
    return { dynamo, client };
  }

  async function freshTables(): Promise<TableNames> {
    tableCount += 1;
    const tables = { runs: `runs-${tableCount}`, runEvents: `run-events-${tableCount}` };
    await ensureTables(started().client, tables);
    return tables;
  }

  return {
    get endpoint(): string {
      return started().dynamo.endpoint;
    },
    /** A client of the shared dynalite, for reading tables as they are. */
    get client(): DynamoDBClient {
      return started().client;
    },
    freshTables,
    async freshStore(): Promise<DynamoStore> {
      return createDynamoStore({ client: started().client, tables: await freshTables(), projections: recordProjections });
    },
    /**
     * A store on fresh tables whose BatchWriteItem calls go through `fault` first, as DynamoDB
     * answers under load. The refusal is made before the SDK's retry step, so the store's own
     * retries and backoff are what is under test; at `initialize` the input is still plain JSON
     * (the document client marshals later), so a short-circuited answer looks like its own.
     */
    async storeWithWriteFaults(fault: WriteFault): Promise<DynamoStore> {
      const faulty = localDynamoClient(started().dynamo.endpoint);
      faultyClients.push(faulty);
      const tables = await freshTables();
      let calls = 0;
      faulty.middlewareStack.add(
        (next, context) => async (args) => {
          const put = context.commandName === 'PutItemCommand' && (args.input as { TableName?: string }).TableName === tables.runEvents;
          if (context.commandName !== 'BatchWriteItemCommand' && !put) return next(args);
          calls += 1;
          // A put of one event is asked about as a batch of that one event; it cannot be left half done.
          const input: BatchWriteCommandInput = put
            ? { RequestItems: { [tables.runEvents]: [{ PutRequest: { Item: (args.input as { Item: Record<string, unknown> }).Item } }] } }
            : (args.input as BatchWriteCommandInput);
          const [table, requests] = Object.entries(input.RequestItems!)[0];
          const answer = fault(calls, input);
          switch (put && answer !== 'pass' && answer !== 'fail' ? 'throttle' : answer) {
            case 'pass':
              return next(args);
            case 'throttle':
              throw Object.assign(new Error('The level of configured provisioned throughput for the table was exceeded'), {
                name: 'ProvisionedThroughputExceededException',
                $fault: 'client',
                $metadata: {},
              });
            case 'fail':
              throw Object.assign(new Error('We encountered an internal error. Please try again.'), { name: 'InternalServerError', $fault: 'server', $metadata: {} });
            case 'leave-all':
              return { output: { UnprocessedItems: { [table]: requests }, $metadata: {} }, response: {} } as never;
            case 'leave-half': {
              const half = Math.ceil(requests.length / 2);
              const result = await next({ ...args, input: { RequestItems: { [table]: requests.slice(0, half) } } });
              return { ...result, output: { ...(result.output as object), UnprocessedItems: { [table]: requests.slice(half) } } } as never;
            }
          }
        },
        { step: 'initialize', name: 'dynamoPushesBack' },
      );
      return createDynamoStore({ client: faulty, tables, projections: recordProjections });
    },
  };
}
