import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { threadKey, type Run } from '../../../../core/model.js';
import type { TaskEntry, TaskIndex, TaskIndexQuery } from '../../../../core/ports.js';
import { checkPageLimit } from '../../../../core/record/rules.js';
import { decodePageCursor, encodePageCursor } from '../../../page-cursor.js';
import { RUNS_TABLE } from '../tables.js';
import type { DynamoHandle } from './handle.js';
import { digest, domain, runKey, TASK_INDEX_ITEM, taskPartition, taskStatePartition, type Item } from './keys.js';

/**
 * The task index: an item per task (`task#<root run id>`, sk `index`) with its state and that
 * state's time as the lineage's tail run last wrote them, in `byKey` under a partition per
 * tenant, agent and state, sorted by the root's creation. Written right after the run's own
 * write (DynamoDB returns the run as written, of which the entry is a function); a writer that
 * dies between the two leaves the entry a step behind until the run's next write or the repair
 * of its change (`reindex`), and ListTasks checks every task it lists against the record.
 */
export class DynamoTaskIndex implements TaskIndex {
  constructor(private readonly handle: DynamoHandle) {}

  async list(tenant: string, query: TaskIndexQuery): Promise<{ runs: Run[]; cursor?: string }> {
    checkPageLimit(query.limit);
    // A task's state is a partition of `byKey` of its own; without one, the roots come from the
    // thread's or the tenant's index, the agent (and a state time) left to a filter.
    const { indexName, partitionKey, sortKey } =
      query.state !== undefined ? RUNS_TABLE.byKey : query.threadId !== undefined ? RUNS_TABLE.byThread : RUNS_TABLE.byTenant;
    const partition =
      query.state !== undefined
        ? taskStatePartition(tenant, query.agentId, query.state)
        : query.threadId !== undefined
          ? threadKey({ tenant, threadId: query.threadId })
          : tenant;
    const names: Record<string, string> = { '#partition': partitionKey, '#agent': 'agentId' };
    const values: Item = { ':partition': partition, ':agent': query.agentId };
    const filters = ['#agent = :agent'];
    if (query.state !== undefined) {
      if (query.threadId !== undefined) {
        names['#thread'] = 'threadId';
        values[':thread'] = query.threadId;
        filters.push('#thread = :thread');
      }
      if (query.stateAfter !== undefined) {
        names['#at'] = 'stateAt';
        values[':at'] = query.stateAfter;
        filters.push('#at > :at');
      }
    } else if (query.threadId !== undefined) {
      names['#root'] = 'rootRunId';
      names['#run'] = 'runId';
      filters.push('#root = #run');
    }
    this.handle.sent.readRequests++;
    // One item past the page tells whether another page exists (DynamoDB's own LastEvaluatedKey is set whenever Limit was reached).
    const result = await this.handle.doc.send(
      new QueryCommand({
        TableName: this.handle.tables.runs,
        IndexName: indexName,
        KeyConditionExpression: '#partition = :partition',
        FilterExpression: filters.join(' AND '),
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
        ScanIndexForward: false,
        Limit: query.limit + 1,
        ExclusiveStartKey: query.cursor === undefined ? undefined : decodeCursor(query.cursor, partitionKey, sortKey, partition),
      }),
    );
    const items = result.Items ?? [];
    const page = items.slice(0, query.limit);
    const runs =
      query.state === undefined
        ? page.map((item) => domain<Run>(item))
        : (await Promise.all(page.map((item) => this.run(item.taskId as string)))).filter((run): run is Run => run !== undefined);
    // The item that ends the page, or the last one read when the filter kept fewer than a page.
    const last = items.length > query.limit ? items[query.limit - 1] : result.LastEvaluatedKey;
    if (!last) return { runs };
    return { runs, cursor: encodeCursor({ pk: last.pk, sk: last.sk, [partitionKey]: last[partitionKey], [sortKey]: last[sortKey] }) };
  }

  /** The entry of a run just written (its write returned it as written). */
  async write(run: Run): Promise<void> {
    await this.writeEntry(this.handle.projections.taskEntry(run));
  }

  /**
   * The run's own write is done: the repair of a writer that died before its entry's. The entry
   * is read first (a read unit costs a fifth of a write's) and written only when it is behind.
   */
  async reindex(entry: TaskEntry): Promise<void> {
    const held = await this.handle.get({ pk: taskPartition(entry.taskId), sk: TASK_INDEX_ITEM });
    if (held && held.tailArrival === entry.tailArrival && held.state === entry.state && held.stateAt === entry.stateAt) return;
    await this.writeEntry(entry);
  }

  private async writeEntry(entry: TaskEntry): Promise<void> {
    const { partitionKey, sortKey } = RUNS_TABLE.byKey;
    const names: Record<string, string> = { '#ix': partitionKey, '#arrival': 'tailArrival', '#state': 'state', '#at': 'stateAt' };
    const values: Item = { ':ix': taskStatePartition(entry.tenant, entry.agentId, entry.state), ':arrival': entry.tailArrival, ':state': entry.state, ':at': entry.stateAt };
    const sets = ['#ix = :ix', '#arrival = :arrival', '#state = :state', '#at = :at'];
    if (entry.root) {
      Object.assign(names, { '#sort': sortKey, '#task': 'taskId', '#tenant': 'tenant', '#agent': 'agentId', '#thread': 'threadId', '#created': 'createdAt' });
      Object.assign(values, { ':sort': `${entry.createdAt}/${digest(entry.taskId)}`, ':task': entry.taskId, ':tenant': entry.tenant, ':agent': entry.agentId, ':thread': entry.threadId, ':created': entry.createdAt });
      sets.push('#sort = :sort', '#task = :task', '#tenant = :tenant', '#agent = :agent', '#thread = :thread', '#created = :created');
    }
    // The root's writes count while it is the tail; an answer run is the tail from its creation on.
    // A unit for the item, one more for its copy in byKey (`update` counts the first).
    this.handle.sent.writeUnits += 1;
    await this.handle.update({
      Key: { pk: taskPartition(entry.taskId), sk: TASK_INDEX_ITEM },
      UpdateExpression: `SET ${sets.join(', ')}`,
      ConditionExpression: entry.root ? 'attribute_not_exists(#arrival) OR #arrival = :arrival' : 'attribute_exists(#arrival) AND #arrival <= :arrival',
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
    });
  }

  private async run(runId: string): Promise<Run | undefined> {
    const item = await this.handle.get(runKey(runId));
    return item && domain<Run>(item);
  }
}

function encodeCursor(key: Item): string {
  return encodePageCursor(key);
}

/** A cursor comes back from a caller: accept only the shape we issue, for the index partition of the listing asking. */
function decodeCursor(cursor: string, partitionKey: string, sortKey: string, partition: string): Item {
  const key = decodePageCursor(cursor);
  const valid =
    typeof key === 'object' &&
    key !== null &&
    Object.keys(key).sort().join() === [RUNS_TABLE.partitionKey, RUNS_TABLE.sortKey, partitionKey, sortKey].sort().join() &&
    typeof (key as Item)[RUNS_TABLE.partitionKey] === 'string' &&
    typeof (key as Item)[RUNS_TABLE.sortKey] === 'string' &&
    (key as Item)[partitionKey] === partition &&
    Object.values(key).every((value) => typeof value === 'string' || typeof value === 'number');
  if (!valid) throw new RangeError('invalid page cursor');
  return key as Item;
}
