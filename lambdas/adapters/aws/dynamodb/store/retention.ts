import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { AuditRecord } from '../../../../core/audit/record.js';
import { threadKey, type LegalHold, type Thread, type ThreadRef } from '../../../../core/model.js';
import type { AuditLog, PurgedContent, RetentionRecords } from '../../../../core/ports.js';
import type { TenantRetention } from '../../../../core/retention/policy.js';
import { decodePageCursor, encodePageCursor } from '../../../page-cursor.js';
import { RUNS_TABLE } from '../tables.js';
import type { DynamoHandle } from './handle.js';
import { ARRIVAL_PARTITIONS, domain, IDLE_PREFIX, RETENTION_PARTITION, retentionKey, taskPartition, threadItemKey, type Item } from './keys.js';

/** What a thread's item says of a deletion under way: what it takes, and the id of its audit record. */
interface PurgeMark {
  auditId: string;
  runs: number;
  events: number;
}

/**
 * Retention on DynamoDB. A thread's deletion spans items no transaction joins (its runs, their
 * events, task entries and push configs, the thread), so it is marked on the thread first: the
 * mark stops new arrivals and names the deletion's audit record, written next; then the items go,
 * the thread's last. A deletion cut short leaves its mark, and the next pass finds the thread and
 * finishes it under the same record.
 */
export class DynamoRetention implements RetentionRecords {
  constructor(
    private readonly handle: DynamoHandle,
    private readonly audit: Pick<AuditLog, 'append' | 'get'>,
  ) {}

  async get(tenant: string): Promise<TenantRetention | undefined> {
    const item = await this.handle.get(retentionKey(tenant));
    return item && entryOf(item);
  }

  async set<F extends 'policy' | 'hold'>(tenant: string, field: F, value: TenantRetention[F]): Promise<void> {
    // One attribute per field, set or removed by its own UpdateItem: a policy and a hold written at once both stand.
    const { partitionKey, sortKey } = RUNS_TABLE.byKey;
    await this.handle.update({
      Key: retentionKey(tenant),
      UpdateExpression: `SET #tenant = :tenant, #ix = :ix, #ixSort = :tenant${value === undefined ? ' REMOVE #field' : ', #field = :value'}`,
      ExpressionAttributeNames: { '#tenant': 'tenant', '#ix': partitionKey, '#ixSort': sortKey, '#field': field },
      ExpressionAttributeValues: { ':tenant': tenant, ':ix': RETENTION_PARTITION, ...(value === undefined ? {} : { ':value': value }) },
    });
  }

  async list(): Promise<TenantRetention[]> {
    const { indexName, partitionKey } = RUNS_TABLE.byKey;
    const items = await this.handle.queryAll({
      TableName: this.handle.tables.runs,
      IndexName: indexName,
      KeyConditionExpression: '#ix = :ix',
      ExpressionAttributeNames: { '#ix': partitionKey },
      ExpressionAttributeValues: { ':ix': RETENTION_PARTITION },
    });
    return items.map(entryOf).filter((entry) => entry.policy !== undefined || entry.hold !== undefined);
  }

  async holdThread(thread: ThreadRef, hold: LegalHold | undefined): Promise<Thread | undefined> {
    const item = await this.handle.update({
      Key: threadItemKey(thread),
      UpdateExpression: hold ? 'SET #hold = :hold' : 'REMOVE #hold',
      ConditionExpression: 'attribute_exists(pk)',
      ExpressionAttributeNames: { '#hold': 'hold' },
      ExpressionAttributeValues: hold ? { ':hold': hold } : undefined,
      ReturnValues: 'ALL_NEW',
    });
    return item && domain<Thread>(item);
  }

  async idleThreads(before: string, limit: number, cursor?: string): Promise<{ threads: Thread[]; cursor?: string }> {
    // One shard after another, each a page at a time: the cursor names the shard and where in it.
    const at = cursor === undefined ? { shard: 0 } : decodeIdleCursor(cursor);
    const { indexName, partitionKey, sortKey } = RUNS_TABLE.byKey;
    this.handle.sent.readRequests++;
    const page = await this.handle.doc.send(
      new QueryCommand({
        TableName: this.handle.tables.runs,
        IndexName: indexName,
        KeyConditionExpression: '#ix = :ix AND #sort < :before',
        ExpressionAttributeNames: { '#ix': partitionKey, '#sort': sortKey },
        ExpressionAttributeValues: { ':ix': `${IDLE_PREFIX}${at.shard}`, ':before': before },
        ExclusiveStartKey: at.start,
        Limit: limit,
      }),
    );
    const threads = (page.Items ?? []).map((item) => domain<Thread>(item));
    const next = page.LastEvaluatedKey ? { shard: at.shard, start: page.LastEvaluatedKey } : at.shard + 1 < ARRIVAL_PARTITIONS ? { shard: at.shard + 1 } : undefined;
    return next ? { threads, cursor: encodePageCursor(next) } : { threads };
  }

  async purgeThread(thread: Thread, audit: (content: PurgedContent) => AuditRecord): Promise<PurgedContent | undefined> {
    const key = threadItemKey(thread);
    const item = await this.handle.get(key);
    if (!item) return undefined;
    let mark = item.purging as PurgeMark | undefined;
    // A run arrived since the thread was judged expired, one holds a place, or a hold was placed: it stays.
    if (mark === undefined && (item.arrivals !== thread.arrivals || (item.unsettled as number) > 0 || item.hold !== undefined)) return undefined;
    const runIds = await this.runsOf(thread);
    const events = new Map<string, Item[]>();
    for (const runId of runIds) events.set(runId, await this.eventKeys(runId));
    if (mark === undefined) {
      const content = { runs: runIds.length, events: [...events.values()].reduce((sum, keys) => sum + keys.length, 0) };
      const record = audit(content);
      const marked: PurgeMark = { auditId: record.id, ...content };
      const taken = await this.handle.update({
        Key: key,
        UpdateExpression: 'SET #purging = :mark',
        ConditionExpression: '#arrivals = :arrivals AND #unsettled = :zero AND attribute_not_exists(#hold) AND attribute_not_exists(#purging)',
        ExpressionAttributeNames: { '#purging': 'purging', '#arrivals': 'arrivals', '#unsettled': 'unsettled', '#hold': 'hold' },
        ExpressionAttributeValues: { ':mark': marked, ':arrivals': thread.arrivals, ':zero': 0 },
      });
      if (!taken) return undefined;
      await this.audit.append(record);
      mark = marked;
    } else if ((await this.audit.get([mark.auditId])).length === 0) {
      // Cut short between its mark and its record: the record is written now, of what the mark says went.
      await this.audit.append(audit({ runs: mark.runs, events: mark.events }));
    }
    for (const runId of runIds) {
      await this.handle.deleteKeys(this.handle.tables.runEvents, events.get(runId)!);
      // The run's items (the run, its lease) and its task's (the index entry, push configs).
      const owned = [...(await this.keysOf(`run#${runId}`)), ...(await this.keysOf(taskPartition(runId)))];
      await this.handle.deleteKeys(this.handle.tables.runs, owned);
    }
    await this.handle.deleteKeys(this.handle.tables.runs, [key]);
    return { runs: mark.runs, events: mark.events };
  }

  private async runsOf(thread: ThreadRef): Promise<string[]> {
    const { indexName, partitionKey } = RUNS_TABLE.byThread;
    const items = await this.handle.queryAll({
      TableName: this.handle.tables.runs,
      IndexName: indexName,
      KeyConditionExpression: '#thread = :thread',
      ExpressionAttributeNames: { '#thread': partitionKey, '#runId': 'runId' },
      ExpressionAttributeValues: { ':thread': threadKey(thread) },
      ProjectionExpression: '#runId',
    });
    return items.map((item) => item.runId as string);
  }

  private eventKeys(runId: string): Promise<Item[]> {
    return this.keysUnder(this.handle.tables.runEvents, 'runId', runId, 'seq');
  }

  private keysOf(pk: string): Promise<Item[]> {
    return this.keysUnder(this.handle.tables.runs, 'pk', pk, 'sk');
  }

  /** The keys (only) of every item under one partition of a table. */
  private keysUnder(table: string, partitionKey: string, value: string, sortKey: string): Promise<Item[]> {
    return this.handle.queryAll({
      TableName: table,
      KeyConditionExpression: '#partition = :value',
      ExpressionAttributeNames: { '#partition': partitionKey, '#sort': sortKey },
      ExpressionAttributeValues: { ':value': value },
      ProjectionExpression: '#partition, #sort',
    });
  }
}

function entryOf(item: Item): TenantRetention {
  return { tenant: item.tenant as string, ...(item.policy !== undefined ? { policy: item.policy as TenantRetention['policy'] } : {}), ...(item.hold !== undefined ? { hold: item.hold as TenantRetention['hold'] } : {}) };
}

function decodeIdleCursor(cursor: string): { shard: number; start?: Item } {
  const value = decodePageCursor(cursor) as { shard?: unknown; start?: unknown } | undefined;
  if (typeof value !== 'object' || value === null || typeof value.shard !== 'number' || !Number.isInteger(value.shard) || value.shard < 0 || value.shard >= ARRIVAL_PARTITIONS) {
    throw new RangeError('invalid page cursor');
  }
  return { shard: value.shard, ...(typeof value.start === 'object' && value.start !== null ? { start: value.start as Item } : {}) };
}
