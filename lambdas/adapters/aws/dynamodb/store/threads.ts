import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { threadKey, type Thread, type ThreadRef } from '../../../../core/model.js';
import type { Reserved, ThreadListQuery, Threads } from '../../../../core/ports.js';
import { threadListCursor, threadListPlace } from '../../../thread-list-cursor.js';
import { RUNS_TABLE } from '../tables.js';
import { holds, type DynamoHandle } from './handle.js';
import { ARRIVAL_PARTITIONS, domain, IDLE_PREFIX, idleIndex, threadItemKey, type Item } from './keys.js';

/** Threads: an item each (`thread#<threadKey>`), its places' count beside the set of their holders. */
export class DynamoThreads implements Threads {
  constructor(private readonly handle: DynamoHandle) {}

  async get(thread: ThreadRef): Promise<Thread | undefined> {
    const item = await this.handle.get(threadItemKey(thread));
    return item && domain<Thread>(item);
  }

  async create(thread: Thread, holder: string): Promise<boolean> {
    return this.handle.putNew({ ...threadItemKey(thread), ...idleIndex(thread, thread.lastActivityAt ?? thread.createdAt), ...thread, holders: new Set([holder]) });
  }

  async reserveArrival(thread: ThreadRef, holder: string, limit: number | undefined): Promise<Reserved | undefined> {
    const limited = limit !== undefined;
    // One conditional ADD takes the number and the place together, so concurrent arrivals can
    // neither share a number nor overfill the thread; the place is the holder's, so a run takes one once.
    // A thread being deleted (retention) takes no arrival.
    const names = { '#arrivals': 'arrivals', '#unsettled': 'unsettled', '#holders': 'holders', '#purging': 'purging' };
    const attributes = await this.handle.update({
      Key: threadItemKey(thread),
      UpdateExpression: 'ADD #arrivals :one, #unsettled :one, #holders :holder',
      ConditionExpression: `attribute_exists(pk) AND attribute_not_exists(#purging) AND NOT contains(#holders, :id)${limited ? ' AND #unsettled < :limit' : ''}`,
      ExpressionAttributeNames: names,
      // DynamoDB rejects a value placeholder the expressions do not use, hence two shapes.
      ExpressionAttributeValues: { ':one': 1, ':holder': new Set([holder]), ':id': holder, ...(limited ? { ':limit': limit } : {}) },
      ReturnValues: 'UPDATED_NEW',
    });
    if (attributes) return { arrival: attributes.arrivals as number, alone: attributes.unsettled === 1 };
    // A run that holds a place already (its request came again after a crash) takes a new number only.
    const held = await this.handle.get(threadItemKey(thread));
    if (!holds(held, holder)) return undefined;
    const numbered = await this.handle.update({
      Key: threadItemKey(thread),
      UpdateExpression: 'ADD #arrivals :one',
      ConditionExpression: 'attribute_exists(pk)',
      ExpressionAttributeNames: { '#arrivals': 'arrivals' },
      ExpressionAttributeValues: { ':one': 1 },
      ReturnValues: 'UPDATED_NEW',
    });
    return numbered ? { arrival: numbered.arrivals as number, alone: false } : undefined;
  }

  async releasePlace(thread: ThreadRef, holder: string, at?: string): Promise<void> {
    const active = activity(thread, at);
    // Only a place the run holds goes back, in the same write that forgets it: a repeat (a repair,
    // a retried settle) fails the condition and gives nothing back twice.
    await this.handle.update({
      Key: threadItemKey(thread),
      UpdateExpression: `ADD #unsettled :minusOne DELETE #holders :holder${active.set}`,
      ConditionExpression: 'contains(#holders, :id)',
      ExpressionAttributeNames: { '#unsettled': 'unsettled', '#holders': 'holders', ...active.names },
      ExpressionAttributeValues: { ':minusOne': -1, ':holder': new Set([holder]), ':id': holder, ...active.values },
    });
  }

  async placeHolders(thread: ThreadRef): Promise<string[]> {
    const item = await this.handle.get(threadItemKey(thread));
    return [...((item?.holders as Set<string> | undefined) ?? [])];
  }

  async abandon(thread: ThreadRef, holder: string): Promise<void> {
    const deleted = await this.handle.deleteWhere(
      threadItemKey(thread),
      '#arrivals = :one AND contains(#holders, :id)',
      { '#arrivals': 'arrivals', '#holders': 'holders' },
      { ':one': 1, ':id': holder },
    );
    // Another run arrived on it meanwhile: the thread stays, without the place the failed one held.
    if (!deleted) await this.releasePlace(thread, holder);
  }

  async setPlaces(thread: ThreadRef, holders: readonly string[]): Promise<void> {
    // Without the condition an update of a missing thread would create a thread item with no fields.
    await this.handle.update({
      Key: threadItemKey(thread),
      UpdateExpression: holders.length > 0 ? 'SET #unsettled = :count, #holders = :holders' : 'SET #unsettled = :count REMOVE #holders',
      ConditionExpression: 'attribute_exists(pk)',
      ExpressionAttributeNames: { '#unsettled': 'unsettled', '#holders': 'holders' },
      ExpressionAttributeValues: { ':count': holders.length, ...(holders.length > 0 ? { ':holders': new Set(holders) } : {}) },
    });
  }

  async setWaitingRun(thread: ThreadRef, runId: string): Promise<void> {
    // Without the condition an update of a missing thread would create a thread item with no fields.
    await this.handle.update({
      Key: threadItemKey(thread),
      UpdateExpression: 'SET #attribute = :value',
      ConditionExpression: 'attribute_exists(pk)',
      ExpressionAttributeNames: { '#attribute': 'waitingRunId' },
      ExpressionAttributeValues: { ':value': runId },
    });
  }

  async list(query: ThreadListQuery): Promise<{ threads: Thread[]; cursor?: string }> {
    const place = query.cursor === undefined ? undefined : threadListPlace(query.cursor);
    const before = place ? `${place.at}/${place.key}` : '\uffff';
    // Each shard of the idle listing, latest first, as far as it takes to fill the page; then merged.
    const shards = await Promise.all(Array.from({ length: ARRIVAL_PARTITIONS }, (_, shard) => this.listShard(shard, before, query)));
    const { sortKey } = RUNS_TABLE.byKey;
    const at = (item: Item) => item[sortKey] as string;
    const merged = shards.flat().sort((a, b) => (at(a) < at(b) ? 1 : at(a) > at(b) ? -1 : 0));
    const page = merged.slice(0, query.limit).map((item) => domain<Thread>(item));
    if (merged.length <= query.limit) return { threads: page };
    const last = page[page.length - 1];
    return { threads: page, cursor: threadListCursor(last.lastActivityAt ?? last.createdAt, threadKey(last)) };
  }

  private async listShard(shard: number, before: string, query: ThreadListQuery): Promise<Item[]> {
    const { indexName, partitionKey, sortKey } = RUNS_TABLE.byKey;
    const names: Record<string, string> = { '#ix': partitionKey, '#sort': sortKey, '#purging': 'purging' };
    const values: Record<string, unknown> = { ':ix': `${IDLE_PREFIX}${shard}`, ':before': before };
    const filters = ['attribute_not_exists(#purging)'];
    if (query.tenant !== undefined) Object.assign(names, { '#tenant': 'tenant' }), Object.assign(values, { ':tenant': query.tenant }), filters.push('#tenant = :tenant');
    if (query.agentId !== undefined) Object.assign(names, { '#agent': 'agentId' }), Object.assign(values, { ':agent': query.agentId }), filters.push('#agent = :agent');
    if (query.state !== undefined) Object.assign(names, { '#unsettled': 'unsettled' }), Object.assign(values, { ':zero': 0 }), filters.push(query.state === 'active' ? '#unsettled > :zero' : '#unsettled = :zero');
    const items: Item[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      this.handle.sent.readRequests++;
      const page = await this.handle.doc.send(
        new QueryCommand({
          TableName: this.handle.tables.runs,
          IndexName: indexName,
          KeyConditionExpression: '#ix = :ix AND #sort < :before',
          FilterExpression: filters.join(' AND '),
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
          ScanIndexForward: false,
          ExclusiveStartKey: start,
          // A filter is judged after the read: a page of more items costs fewer round trips to fill.
          Limit: filters.length > 1 ? 500 : query.limit + 1,
        }),
      );
      items.push(...((page.Items ?? []) as Item[]));
      start = page.LastEvaluatedKey;
    } while (start && items.length <= query.limit);
    return items.slice(0, query.limit + 1);
  }
}

/** The clauses that move a thread's last activity, and its place in the idle listing, to `at` (none without one). */
function activity(thread: ThreadRef, at: string | undefined): { set: string; names: Record<string, string>; values: Record<string, unknown> } {
  if (at === undefined) return { set: '', names: {}, values: {} };
  const { partitionKey, sortKey } = RUNS_TABLE.byKey;
  const index = idleIndex(thread, at);
  return {
    set: ' SET #lastActivityAt = :at, #ix = :ix, #ixSort = :ixSort',
    names: { '#lastActivityAt': 'lastActivityAt', '#ix': partitionKey, '#ixSort': sortKey },
    values: { ':at': at, ':ix': index[partitionKey], ':ixSort': index[sortKey] },
  };
}
