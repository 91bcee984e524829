import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { BatchWriteCommand, DeleteCommand, DynamoDBDocumentClient, GetCommand, PutCommand, QueryCommand, UpdateCommand, type QueryCommandInput, type UpdateCommandInput } from '@aws-sdk/lib-dynamodb';
import type { RecordProjections } from '../../../../core/ports.js';
import { RUNS_TABLE, type TableNames } from '../tables.js';
import { ARRIVAL_PARTITIONS, fitsKey, type Item } from './keys.js';

/** What the store has sent, for the cost model. */
export interface StoreUsage {
  /** GetItem, Query and Scan calls (each page is one). */
  readRequests: number;
  /** Put, Update, Delete and BatchWrite calls (a batch is one; a retried batch is one more). */
  writeRequests: number;
  /**
   * Write units as DynamoDB bills them: one per started KB of each item written, once for the
   * table and once more for each index the item is in (every index projects the whole item).
   */
  writeUnits: number;
  /** Of those, the units of usage records (the metering's own cost). */
  usageRecordUnits: number;
}

const KB = 1024;

/** Errors that say "not now" rather than "never": the caller may retry later. */
const THROTTLING = new Set(['ProvisionedThroughputExceededException', 'ThrottlingException', 'RequestLimitExceeded']);

/**
 * What the DynamoDB record's parts share: the document client, the tables' names, what the store
 * computes beside each run it writes, the count of what it sent, and the runs table's calls with
 * their error mapping (a failed condition is an answer, not an error).
 */
export class DynamoHandle {
  readonly doc: DynamoDBDocumentClient;
  readonly sent: StoreUsage = { readRequests: 0, writeRequests: 0, writeUnits: 0, usageRecordUnits: 0 };

  constructor(
    client: DynamoDBClient,
    readonly tables: TableNames,
    readonly projections: RecordProjections,
  ) {
    this.doc = DynamoDBDocumentClient.from(client, {
      // Run inputs are caller JSON: a number past 2^53 is already imprecise after JSON.parse, so
      // store it as it is and read it back as a number (never a BigInt, which JSON cannot carry).
      marshallOptions: { removeUndefinedValues: true, allowImpreciseNumbers: true },
      unmarshallOptions: { wrapNumbers: (value: string) => Number(value) },
    });
  }

  async get(key: Item): Promise<Item | undefined> {
    // No item can be stored under a key DynamoDB refuses: an id that long names nothing.
    if (!fitsKey(key)) return undefined;
    this.sent.readRequests++;
    const result = await this.doc.send(new GetCommand({ TableName: this.tables.runs, Key: key, ConsistentRead: true }));
    return result.Item;
  }

  async putNew(item: Item): Promise<boolean> {
    this.sent.writeRequests++;
    this.sent.writeUnits += unitsOf(item) * copiesOf(item);
    try {
      await this.doc.send(new PutCommand({ TableName: this.tables.runs, Item: item, ConditionExpression: 'attribute_not_exists(pk)' }));
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      throw err;
    }
  }

  /**
   * An UpdateItem on the runs table: the new attributes as asked by ReturnValues, or undefined
   * when the condition failed. Counted as one unit here; `written` corrects it for run items.
   */
  async update(input: Omit<UpdateCommandInput, 'TableName'>): Promise<Item | undefined> {
    this.sent.writeRequests++;
    this.sent.writeUnits += 1;
    try {
      const result = await this.doc.send(new UpdateCommand({ TableName: this.tables.runs, ...input }));
      return result.Attributes ?? {};
    } catch (err) {
      if (isConditionFailure(err)) return undefined;
      throw err;
    }
  }

  /**
   * An update is billed on the whole item, and a run carries its input (the conversation), so
   * its units come from the item as written, which ALL_NEW already returned.
   */
  written<T>(value: T, item: Item): T {
    this.sent.writeUnits += unitsOf(item) * copiesOf(item) - 1;
    return value;
  }

  /** A DeleteItem on the runs table under a condition; false when the condition failed. */
  async deleteWhere(key: Item, condition: string, names: Record<string, string>, values: Item): Promise<boolean> {
    this.sent.writeRequests++;
    this.sent.writeUnits += 1;
    try {
      await this.doc.send(
        new DeleteCommand({
          TableName: this.tables.runs,
          Key: key,
          ConditionExpression: condition,
          ExpressionAttributeNames: names,
          // DynamoDB refuses an empty map: a condition on names alone (attribute_exists) sends none.
          ExpressionAttributeValues: Object.keys(values).length > 0 ? values : undefined,
        }),
      );
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      throw err;
    }
  }

  /**
   * Deletes items by key, 25 to a BatchWriteItem (its most), again for those DynamoDB handed back
   * unprocessed (its throttling of part of a batch): retention's deletes, none conditional.
   */
  async deleteKeys(table: string, keys: readonly Item[]): Promise<void> {
    for (let start = 0; start < keys.length; start += 25) {
      let pending = keys.slice(start, start + 25);
      for (let attempt = 1; pending.length > 0; attempt++) {
        this.sent.writeRequests++;
        this.sent.writeUnits += pending.length;
        const result = await this.doc.send(new BatchWriteCommand({ RequestItems: { [table]: pending.map((Key) => ({ DeleteRequest: { Key } })) } }));
        pending = (result.UnprocessedItems?.[table] ?? []).flatMap((request) => (request.DeleteRequest?.Key ? [request.DeleteRequest.Key] : []));
        if (pending.length > 0) await delay(Math.min(1_000, 50 * 2 ** attempt));
      }
    }
  }

  async queryAll(input: QueryCommandInput): Promise<Item[]> {
    const items: Item[] = [];
    let start: Item | undefined;
    do {
      this.sent.readRequests++;
      const page = await this.doc.send(new QueryCommand({ ...input, ExclusiveStartKey: start }));
      items.push(...(page.Items ?? []));
      start = page.LastEvaluatedKey;
    } while (start);
    return items;
  }
}

/** Whether a thread's or a tenant's item counts `holder` among those holding its places. */
/**
 * The items of a `byKey` listing spread over `ARRIVAL_PARTITIONS` partitions (`<prefix><shard>`),
 * those sorting before `before`, at most `limit` from each: one query per partition, at once.
 */
export async function listShards(handle: DynamoHandle, prefix: string, before: string, limit: number): Promise<Item[]> {
  const { sent, doc, tables } = handle;
  const pages = await Promise.all(
    Array.from({ length: ARRIVAL_PARTITIONS }, async (_, shard) => {
      sent.readRequests++;
      const page = await doc.send(
        new QueryCommand({
          TableName: tables.runs,
          IndexName: RUNS_TABLE.byKey.indexName,
          KeyConditionExpression: '#ix = :partition AND #sort < :before',
          ExpressionAttributeNames: { '#ix': RUNS_TABLE.byKey.partitionKey, '#sort': RUNS_TABLE.byKey.sortKey },
          ExpressionAttributeValues: { ':partition': `${prefix}${shard}`, ':before': before },
          Limit: limit,
        }),
      );
      return page.Items ?? [];
    }),
  );
  return pages.flat();
}

export function holds(item: Item | undefined, holder: string): boolean {
  return (item?.holders as Set<string> | undefined)?.has(holder) ?? false;
}

/** The table's copy of an item and one in each index whose key the item has (each projects the whole item). */
export function copiesOf(item: Item): number {
  const indexes = [RUNS_TABLE.byThread.partitionKey, RUNS_TABLE.byTenant.partitionKey, RUNS_TABLE.byKey.partitionKey];
  return 1 + indexes.filter((key) => item[key] !== undefined).length;
}

/** Approximates DynamoDB's item size (names plus values) by the item's JSON. */
export function unitsOf(item: Item): number {
  return Math.max(1, Math.ceil(Buffer.byteLength(JSON.stringify(item)) / KB));
}

export function isConditionFailure(err: unknown): boolean {
  return (err as { name?: string } | undefined)?.name === 'ConditionalCheckFailedException';
}

/** DynamoDB's "not this fast": a partition past its write units a second (about 1,000 on demand), or a table past its own. */
export function isThrottled(err: unknown): boolean {
  const name = (err as { name?: string } | undefined)?.name;
  return name !== undefined && THROTTLING.has(name);
}

/** Throttling that outlasted the SDK's own retries, a server fault, or no answer at all. */
export function isUnavailable(err: unknown): boolean {
  const { name, code, $fault } = (err ?? {}) as { name?: string; code?: unknown; $fault?: string };
  if (name !== undefined && THROTTLING.has(name)) return true;
  if ($fault === 'server') return true;
  // No service answer: a socket error (ECONNRESET, …) or the request timed out.
  return $fault === undefined && (name === 'TimeoutError' || typeof code === 'string');
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
