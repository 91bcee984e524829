import { DynamoDBClient, ScanCommand } from '@aws-sdk/client-dynamodb';
import type { TableNames } from '../../lambdas/adapters/aws/dynamodb/tables.js';
import { localDynamoClient } from '../../lambdas/adapters/local/dynalite.js';

/** The record's items by kind (the prefix of their key), and the stored events: what a request may have left behind. */
export type ItemCounts = Record<string, number>;

/** Counts every item of a gateway's tables, from outside the gateway (a scan of each). */
export async function countItems(dynamo: { endpoint: string; tables: TableNames }): Promise<ItemCounts> {
  const client: DynamoDBClient = localDynamoClient(dynamo.endpoint);
  try {
    const counts: ItemCounts = {};
    for (const item of await scanAll(client, dynamo.tables.runs, 'pk')) {
      const pk = item.pk?.S ?? '';
      const kind = pk.includes('#') ? pk.slice(0, pk.indexOf('#')) : pk;
      counts[kind] = (counts[kind] ?? 0) + 1;
    }
    counts.events = (await scanAll(client, dynamo.tables.runEvents, 'runId')).length;
    return counts;
  } finally {
    client.destroy();
  }
}

async function scanAll(client: DynamoDBClient, table: string, key: string) {
  const items: Record<string, { S?: string }>[] = [];
  let start: Record<string, never> | undefined;
  do {
    const page = await client.send(new ScanCommand({ TableName: table, ProjectionExpression: key, ExclusiveStartKey: start }));
    items.push(...((page.Items ?? []) as Record<string, { S?: string }>[]));
    start = page.LastEvaluatedKey as Record<string, never> | undefined;
  } while (start);
  return items;
}
