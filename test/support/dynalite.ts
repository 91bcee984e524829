import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll } from 'vitest';
import { DynamoRunStore } from '../../lambdas/adapters/aws/dynamodb/run-store.js';
import type { TableNames } from '../../lambdas/adapters/aws/dynamodb/tables.js';
import { ensureTables, localDynamoClient, startDynalite, type LocalDynamo } from '../../lambdas/adapters/local/dynalite.js';

/**
 * One in-memory dynalite for the test file. Every `freshTables()` / `freshStore()` gets tables of
 * its own, so tests share a server but never a row.
 */
export function useDynalite() {
  let dynamo: LocalDynamo | undefined;
  let client: DynamoDBClient | undefined;
  let tableCount = 0;

  beforeAll(async () => {
    dynamo = await startDynalite();
    client = localDynamoClient(dynamo.endpoint);
  });

  afterAll(async () => {
    client?.destroy();
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
    freshTables,
    async freshStore(): Promise<DynamoRunStore> {
      return new DynamoRunStore({ client: started().client, tables: await freshTables() });
    },
  };
}
