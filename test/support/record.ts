import { DynamoDBClient, ScanCommand } from '@aws-sdk/client-dynamodb';
import { localDynamoClient } from '../../lambdas/adapters/local/dynalite.js';
import type { LocalRecord } from '../../lambdas/runtimes/local.js';

/** The record's items by kind (a table, or the prefix of a DynamoDB key), and the stored events: what a request may have left behind. */
export type ItemCounts = Record<string, number>;

/** Counts every item of a gateway's record, from outside the gateway (a scan of each DynamoDB table). */
export async function countItems(record: LocalRecord): Promise<ItemCounts> {
  if (record.store === 'sqlite') return record.census();
  const client: DynamoDBClient = localDynamoClient(record.endpoint);
  try {
    const counts: ItemCounts = {};
    for (const item of await scanAll(client, record.tables.runs, 'pk')) {
      const pk = item.pk?.S ?? '';
      const kind = pk.includes('#') ? pk.slice(0, pk.indexOf('#')) : pk;
      counts[kind] = (counts[kind] ?? 0) + 1;
    }
    counts.events = (await scanAll(client, record.tables.runEvents, 'runId')).length;
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
