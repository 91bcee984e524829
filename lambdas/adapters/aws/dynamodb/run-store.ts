import { createHash } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  BatchWriteCommand,
  DeleteCommand,
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  ScanCommand,
  UpdateCommand,
  type QueryCommandInput,
  type ScanCommandInput,
  type UpdateCommandInput,
} from '@aws-sdk/lib-dynamodb';
import { StoreUnavailable } from '../../../core/errors.js';
import {
  threadKey,
  type Agent,
  type Arrival,
  type AskState,
  type Budget,
  type LinkProvider,
  type MessageClaim,
  type PushConfig,
  type Run,
  type RunLink,
  type RunStatus,
  type Spend,
  type StoredEvent,
  type Tenant,
  type Thread,
  type ThreadRef,
} from '../../../core/model.js';
import type { RunStore, TaskIndexQuery, TenantAdmission, TenantLimits, UsageQuery } from '../../../core/ports.js';
import { taskStateAt, taskStateOf } from '../../../core/a2a/task-state.js';
import type { UsageRecord } from '../../../core/usage.js';
import { RUNS_TABLE, type TableNames } from './tables.js';
import { decodePageCursor, encodePageCursor } from '../../page-cursor.js';

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

type Item = Record<string, unknown>;

/** BatchWriteItem takes at most 25 put requests. */
const BATCH_SIZE = 25;
/** Attempts of one batch while DynamoDB throttles it or hands items back unprocessed. */
const BATCH_ATTEMPTS = 5;
const BATCH_BACKOFF_MS = 50;
/** Conditional puts of one `appendNew` call in flight at once. */
const NEW_EVENTS_IN_FLIGHT = 16;

const KB = 1024;
/** DynamoDB's limits on a key attribute, in UTF-8 bytes (partition key, sort key). */
const PARTITION_KEY_BYTES = 2048;
const SORT_KEY_BYTES = 1024;
const THREAD_ITEM = 'thread';
const RUN_ITEM = 'run';
const AGENT_PARTITION = 'agent';
const PROVIDER_PARTITION = 'provider';
const PUSH_CONFIG_PREFIX = 'push#';
const MESSAGE_CLAIM_ITEM = 'msg';
const TENANT_ITEM = 'tenant';
const TASK_INDEX_ITEM = 'index';
const ARRIVAL_PREFIX = 'arrival#';
const ARRIVAL_ITEM = 'arrival';
/**
 * Partitions of the `byKey` index the arrival notes are spread over: every run's note is written
 * and deleted there, and one index partition takes about 1,000 writes a second.
 */
const ARRIVAL_PARTITIONS = 4;
const ARRIVAL_RETENTION_SECONDS = 14 * 24 * 3600;
/** Rounds of a tenant's admission lost to concurrent writers before it gives up as rate limited. */
const ADMISSION_ROUNDS = 5;

/** Attributes that exist for the table and its indexes, not for the domain object. */
const KEY_ATTRIBUTES: readonly string[] = [
  RUNS_TABLE.partitionKey,
  RUNS_TABLE.sortKey,
  RUNS_TABLE.byThread.partitionKey,
  RUNS_TABLE.byTenant.partitionKey,
  RUNS_TABLE.byKey.partitionKey,
  RUNS_TABLE.byKey.sortKey,
  RUNS_TABLE.timeToLive,
  // Who holds a thread's or a tenant's places (a string set of run ids): the store's, for giving each back once.
  'holders',
];

/**
 * Fields that place a run in the table and its indexes (`threadKey`, `tenantKey` are copies).
 * Patching one would leave the copies behind, so `transitionRun` refuses them.
 */
const RUN_IDENTITY = new Set<string>(['runId', 'threadId', 'tenant', 'rootRunId', 'arrival', 'createdAt']);

/** Errors that say "not now" rather than "never": the caller may retry later. */
const THROTTLING = new Set([
  'ProvisionedThroughputExceededException',
  'ThrottlingException',
  'RequestLimitExceeded',
]);

/**
 * The RunStore on DynamoDB (and on dynalite locally). One runs table holds threads, runs with
 * their asks, and agents; run_events holds each event as a JSON string under (`runId`, `seq`).
 */
export class DynamoRunStore implements RunStore {
  readonly usage: StoreUsage = { readRequests: 0, writeRequests: 0, writeUnits: 0, usageRecordUnits: 0 };
  private readonly doc: DynamoDBDocumentClient;
  private readonly tables: TableNames;

  constructor({ client, tables }: { client: DynamoDBClient; tables: TableNames }) {
    this.doc = DynamoDBDocumentClient.from(client, {
      // Run inputs are caller JSON: a number past 2^53 is already imprecise after JSON.parse, so
      // store it as it is and read it back as a number (never a BigInt, which JSON cannot carry).
      marshallOptions: { removeUndefinedValues: true, allowImpreciseNumbers: true },
      unmarshallOptions: { wrapNumbers: (value: string) => Number(value) },
    });
    this.tables = tables;
  }

  async getThread(thread: ThreadRef): Promise<Thread | undefined> {
    const item = await this.get(threadItemKey(thread));
    return item && domain<Thread>(item);
  }

  async createThread(thread: Thread, holder: string): Promise<boolean> {
    return this.putNew({ ...threadItemKey(thread), ...thread, holders: new Set([holder]) });
  }

  async reserveArrival(thread: ThreadRef, holder: string, limit: number | undefined): Promise<number | undefined> {
    const limited = limit !== undefined;
    // One conditional ADD takes the number and the place together, so concurrent arrivals can
    // neither share a number nor overfill the thread; the place is the holder's, so a run takes one once.
    const names = { '#arrivals': 'arrivals', '#unsettled': 'unsettled', '#holders': 'holders' };
    const attributes = await this.update({
      Key: threadItemKey(thread),
      UpdateExpression: 'ADD #arrivals :one, #unsettled :one, #holders :holder',
      ConditionExpression: `attribute_exists(pk) AND NOT contains(#holders, :id)${limited ? ' AND #unsettled < :limit' : ''}`,
      ExpressionAttributeNames: names,
      // DynamoDB rejects a value placeholder the expressions do not use, hence two shapes.
      ExpressionAttributeValues: { ':one': 1, ':holder': new Set([holder]), ':id': holder, ...(limited ? { ':limit': limit } : {}) },
      ReturnValues: 'UPDATED_NEW',
    });
    if (attributes) return attributes.arrivals as number;
    // A run that holds a place already (its request came again after a crash) takes a new number only.
    const held = await this.get(threadItemKey(thread));
    if (!holds(held, holder)) return undefined;
    const numbered = await this.update({
      Key: threadItemKey(thread),
      UpdateExpression: 'ADD #arrivals :one',
      ConditionExpression: 'attribute_exists(pk)',
      ExpressionAttributeNames: { '#arrivals': 'arrivals' },
      ExpressionAttributeValues: { ':one': 1 },
      ReturnValues: 'UPDATED_NEW',
    });
    return numbered?.arrivals as number | undefined;
  }

  async releasePlace(thread: ThreadRef, holder: string): Promise<void> {
    // Only a place the run holds goes back, in the same write that forgets it: a repeat (a repair,
    // a retried settle) fails the condition and gives nothing back twice.
    await this.update({
      Key: threadItemKey(thread),
      UpdateExpression: 'ADD #unsettled :minusOne DELETE #holders :holder',
      ConditionExpression: 'contains(#holders, :id)',
      ExpressionAttributeNames: { '#unsettled': 'unsettled', '#holders': 'holders' },
      ExpressionAttributeValues: { ':minusOne': -1, ':holder': new Set([holder]), ':id': holder },
    });
  }

  async placeHolders(thread: ThreadRef): Promise<string[]> {
    const item = await this.get(threadItemKey(thread));
    return [...((item?.holders as Set<string> | undefined) ?? [])];
  }

  async abandonThread(thread: ThreadRef, holder: string): Promise<void> {
    const deleted = await this.deleteWhere(
      threadItemKey(thread),
      '#arrivals = :one AND contains(#holders, :id)',
      { '#arrivals': 'arrivals', '#holders': 'holders' },
      { ':one': 1, ':id': holder },
    );
    // Another run arrived on it meanwhile: the thread stays, without the place the failed one held.
    if (!deleted) await this.releasePlace(thread, holder);
  }

  async setUnsettled(thread: ThreadRef, holders: readonly string[]): Promise<void> {
    // Without the condition an update of a missing thread would create a thread item with no fields.
    await this.update({
      Key: threadItemKey(thread),
      UpdateExpression: holders.length > 0 ? 'SET #unsettled = :count, #holders = :holders' : 'SET #unsettled = :count REMOVE #holders',
      ConditionExpression: 'attribute_exists(pk)',
      ExpressionAttributeNames: { '#unsettled': 'unsettled', '#holders': 'holders' },
      ExpressionAttributeValues: { ':count': holders.length, ...(holders.length > 0 ? { ':holders': new Set(holders) } : {}) },
    });
  }

  async setWaitingRun(thread: ThreadRef, runId: string): Promise<void> {
    await this.setOnThread(thread, 'waitingRunId', runId);
  }

  async noteArrival(arrival: Arrival): Promise<boolean> {
    const item = {
      ...arrivalKey(arrival.runId),
      ...arrival,
      [RUNS_TABLE.byKey.partitionKey]: arrivalPartition(arrival.runId),
      [RUNS_TABLE.byKey.sortKey]: arrival.at,
      // A note the sweep never reached (it is off, or failing) is not kept for ever.
      [RUNS_TABLE.timeToLive]: Math.floor(Date.parse(arrival.at) / 1000) + ARRIVAL_RETENTION_SECONDS,
    };
    this.usage.writeRequests++;
    this.usage.writeUnits += unitsOf(item) * copiesOf(item);
    try {
      await this.doc.send(new PutCommand({ TableName: this.tables.runs, Item: item, ConditionExpression: 'attribute_not_exists(#claimed)', ExpressionAttributeNames: { '#claimed': 'claimed' } }));
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      throw err;
    }
  }

  async claimArrival(arrival: Arrival): Promise<boolean> {
    if (!fitsKey(arrivalKey(arrival.runId))) return false;
    const claimed = await this.update({
      Key: arrivalKey(arrival.runId),
      UpdateExpression: 'SET #claimed = :yes',
      ConditionExpression: '#at = :at',
      ExpressionAttributeNames: { '#claimed': 'claimed', '#at': 'at' },
      ExpressionAttributeValues: { ':yes': true, ':at': arrival.at },
    });
    return claimed !== undefined;
  }

  async forgetArrival(runId: string): Promise<void> {
    if (!fitsKey(arrivalKey(runId))) return;
    this.usage.writeRequests++;
    this.usage.writeUnits += 2;
    await this.doc.send(new DeleteCommand({ TableName: this.tables.runs, Key: arrivalKey(runId) }));
  }

  async listArrivals(before: string, limit: number): Promise<Arrival[]> {
    const pages = await Promise.all(
      Array.from({ length: ARRIVAL_PARTITIONS }, async (_, shard) => {
        this.usage.readRequests++;
        const page = await this.doc.send(
          new QueryCommand({
            TableName: this.tables.runs,
            IndexName: RUNS_TABLE.byKey.indexName,
            KeyConditionExpression: '#ix = :partition AND #sort < :before',
            ExpressionAttributeNames: { '#ix': RUNS_TABLE.byKey.partitionKey, '#sort': RUNS_TABLE.byKey.sortKey },
            ExpressionAttributeValues: { ':partition': `${ARRIVAL_PREFIX}${shard}`, ':before': before },
            Limit: limit,
          }),
        );
        return page.Items ?? [];
      }),
    );
    return pages
      .flat()
      .map(({ claimed: _claimed, ...item }) => domain<Arrival>(item))
      .sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0))
      .slice(0, limit);
  }

  async admitTenantRun(tenant: string, holder: string, limits: TenantLimits): Promise<TenantAdmission> {
    const { runsPerWindow, places } = limits;
    const key = tenantKey(tenant);
    // Each write below is one conditional UpdateItem: the place and the window's count are taken
    // together or not at all. Placeholders are built per write: DynamoDB refuses unused ones. A
    // place is its run's (a set of holders beside the count), so it goes back once whoever gives it.
    const place =
      places === undefined
        ? undefined
        : { add: '#places :one, #holders :holder', check: '(attribute_not_exists(#places) OR #places < :places) AND NOT contains(#holders, :id)' };
    const placeNames: Record<string, string> = place ? { '#places': 'places', '#holders': 'holders' } : {};
    const placeValues: Item = place ? { ':places': places, ':holder': new Set([holder]), ':id': holder } : {};
    const owner = { names: { '#tenant': 'tenant' }, values: { ':tenant': tenant } };
    if (runsPerWindow === undefined) {
      if (!place) return 'admitted';
      const taken = await this.update({
        Key: key,
        UpdateExpression: `SET #tenant = :tenant ADD ${place.add}`,
        ConditionExpression: place.check,
        ExpressionAttributeNames: { ...owner.names, ...placeNames },
        ExpressionAttributeValues: { ...owner.values, ':one': 1, ...placeValues },
      });
      if (taken) return 'admitted';
      return holds(await this.get(key), holder) ? 'admitted' : 'places_full';
    }
    const windowNames = { '#window': 'window', '#runs': 'windowRuns' };
    let window = limits.window;
    for (let round = 0; round < ADMISSION_ROUNDS; round++) {
      // The common case: this minute's window is open and has room.
      const counted = await this.update({
        Key: key,
        UpdateExpression: `ADD #runs :one${place ? `, ${place.add}` : ''}`,
        ConditionExpression: ['#window = :window AND #runs < :rate', ...(place ? [place.check] : [])].join(' AND '),
        ExpressionAttributeNames: { ...windowNames, ...placeNames },
        ExpressionAttributeValues: { ':window': window, ':rate': runsPerWindow, ':one': 1, ...placeValues },
      });
      if (counted) return 'admitted';
      // The first run of a new minute opens its window, which starts the count again.
      const opened = await this.update({
        Key: key,
        UpdateExpression: `SET #tenant = :tenant, #window = :window, #runs = :one${place ? ` ADD ${place.add}` : ''}`,
        ConditionExpression: ['(attribute_not_exists(#window) OR #window < :window)', ...(place ? [place.check] : [])].join(' AND '),
        ExpressionAttributeNames: { ...owner.names, ...windowNames, ...placeNames },
        ExpressionAttributeValues: { ...owner.values, ':window': window, ':one': 1, ...placeValues },
      });
      if (opened) return 'admitted';
      // Both refused: say which limit holds, or go round again after a writer that raced this one.
      const held = await this.get(key);
      // The run holds a place already (its request came again after a crash): it is admitted on that one.
      if (place && holds(held, holder)) return 'admitted';
      if (places !== undefined && ((held?.places as number | undefined) ?? 0) >= places) return 'places_full';
      const heldWindow = (held?.window as number | undefined) ?? window;
      if (heldWindow === window && ((held?.windowRuns as number | undefined) ?? 0) >= runsPerWindow) return 'rate_limited';
      // A writer whose clock runs ahead opened a later window: this run counts in it.
      window = Math.max(window, heldWindow);
    }
    return 'rate_limited';
  }

  async releaseTenantPlace(tenant: string, holder: string): Promise<void> {
    // As a thread's: only a place the run holds goes back, once.
    await this.update({
      Key: tenantKey(tenant),
      UpdateExpression: 'ADD #places :minusOne DELETE #holders :holder',
      ConditionExpression: 'contains(#holders, :id)',
      ExpressionAttributeNames: { '#places': 'places', '#holders': 'holders' },
      ExpressionAttributeValues: { ':minusOne': -1, ':holder': new Set([holder]), ':id': holder },
    });
  }

  async getTenant(tenant: string): Promise<Tenant | undefined> {
    const item = await this.get(tenantKey(tenant));
    if (!item || (item.budget === undefined && item.spendPeriod === undefined)) return undefined;
    const found: Tenant = { tenant };
    if (item.budget !== undefined) found.budget = item.budget as Budget;
    if (typeof item.spendPeriod === 'string') {
      found.spend = { period: item.spendPeriod, tokens: Number(item.spendTokens ?? 0), cost: Number(item.spendCost ?? 0) };
      if (typeof item.spendCrossedAt === 'string') found.spend.crossedAt = item.spendCrossedAt;
      if (typeof item.spendCrossedBy === 'string') found.spend.crossedByRunId = item.spendCrossedBy;
    }
    return found;
  }

  async putTenantBudget(tenant: string, budget: Budget | undefined, spend: Spend): Promise<void> {
    const crossed = spend.crossedAt !== undefined && spend.crossedByRunId !== undefined;
    const sets = ['#tenant = :tenant', 'spendPeriod = :period', 'spendTokens = :tokens', 'spendCost = :cost'];
    const removes: string[] = [];
    (budget ? sets : removes).push(budget ? '#budget = :budget' : '#budget');
    if (crossed) sets.push('spendCrossedAt = :at', 'spendCrossedBy = :by');
    else removes.push('spendCrossedAt', 'spendCrossedBy');
    await this.update({
      Key: tenantKey(tenant),
      UpdateExpression: `SET ${sets.join(', ')} REMOVE ${removes.join(', ')}`,
      ExpressionAttributeNames: { '#tenant': 'tenant', '#budget': 'budget' },
      ExpressionAttributeValues: {
        ':tenant': tenant,
        ':period': spend.period,
        ':tokens': spend.tokens,
        ':cost': spend.cost,
        ...(budget ? { ':budget': budget } : {}),
        ...(crossed ? { ':at': spend.crossedAt, ':by': spend.crossedByRunId } : {}),
      },
    });
  }

  async chargeTenant(tenant: string, charge: Pick<Spend, 'period' | 'tokens' | 'cost'>): Promise<Spend | undefined> {
    const key = tenantKey(tenant);
    for (let round = 0; round < ADMISSION_ROUNDS; round++) {
      // The common case: the spend is of this period already.
      const added = await this.update({
        Key: key,
        UpdateExpression: 'ADD spendTokens :tokens, spendCost :cost',
        ConditionExpression: 'spendPeriod = :period',
        ExpressionAttributeValues: { ':tokens': charge.tokens, ':cost': charge.cost, ':period': charge.period },
        ReturnValues: 'ALL_NEW',
      });
      if (added) return spendOf(added);
      // The first charge of a period starts its spend; a charge of a period already over adds nothing.
      const started = await this.update({
        Key: key,
        UpdateExpression: 'SET #tenant = :tenant, spendPeriod = :period, spendTokens = :tokens, spendCost = :cost REMOVE spendCrossedAt, spendCrossedBy',
        ConditionExpression: 'attribute_not_exists(spendPeriod) OR spendPeriod < :period',
        ExpressionAttributeNames: { '#tenant': 'tenant' },
        ExpressionAttributeValues: { ':tenant': tenant, ':tokens': charge.tokens, ':cost': charge.cost, ':period': charge.period },
        ReturnValues: 'ALL_NEW',
      });
      if (started) return spendOf(started);
      const held = await this.get(key);
      if (typeof held?.spendPeriod === 'string' && held.spendPeriod > charge.period) return undefined;
    }
    return undefined;
  }

  async markBudgetCrossed(tenant: string, period: string, runId: string, at: string): Promise<void> {
    await this.update({
      Key: tenantKey(tenant),
      UpdateExpression: 'SET spendCrossedAt = :at, spendCrossedBy = :by',
      ConditionExpression: 'spendPeriod = :period AND attribute_not_exists(spendCrossedAt)',
      ExpressionAttributeValues: { ':at': at, ':by': runId, ':period': period },
    });
  }

  async putUsageRecord(record: UsageRecord): Promise<boolean> {
    const { partitionKey, sortKey } = RUNS_TABLE.byKey;
    const item = {
      ...usageKey(record.runId),
      ...record,
      [partitionKey]: usagePartition(record.endedAt.slice(0, 7)),
      [sortKey]: `${escapeTenant(record.tenant)}/${record.endedAt}/${record.runId}`,
    };
    this.usage.usageRecordUnits += unitsOf(item) * copiesOf(item);
    return this.putNew(item);
  }

  async listUsage(query: UsageQuery): Promise<{ records: UsageRecord[]; cursor?: string }> {
    const { indexName, partitionKey, sortKey } = RUNS_TABLE.byKey;
    const lastMonth = query.to.slice(0, 7);
    const start = query.cursor === undefined ? { month: query.from.slice(0, 7) } : decodeUsageCursor(query.cursor, query.tenant ?? '', query.from.slice(0, 7), lastMonth);
    const records: UsageRecord[] = [];
    let month = start.month;
    let after = start.after;
    const prefix = query.tenant === undefined ? undefined : `${escapeTenant(query.tenant)}/`;
    while (month <= lastMonth) {
      let exclusiveStart: Item | undefined = after;
      do {
        this.usage.readRequests++;
        const page = await this.doc.send(
          new QueryCommand({
            TableName: this.tables.runs,
            IndexName: indexName,
            KeyConditionExpression: prefix ? '#month = :month AND #key BETWEEN :from AND :to' : '#month = :month',
            FilterExpression: 'endedAt >= :fromAt AND endedAt < :toAt',
            ExpressionAttributeNames: { '#month': partitionKey, ...(prefix ? { '#key': sortKey } : {}) },
            ExpressionAttributeValues: {
              ':month': usagePartition(month),
              ':fromAt': query.from,
              ':toAt': query.to,
              ...(prefix ? { ':from': `${prefix}${query.from}`, ':to': `${prefix}${query.to}` } : {}),
            },
            Limit: query.limit - records.length,
            ExclusiveStartKey: exclusiveStart,
          }),
        );
        for (const item of page.Items ?? []) records.push(domain<UsageRecord>(item));
        exclusiveStart = page.LastEvaluatedKey;
        if (records.length >= query.limit) {
          const tenant = query.tenant ?? '';
          if (exclusiveStart) return { records, cursor: encodeUsageCursor({ tenant, month, after: exclusiveStart }) };
          return month < lastMonth ? { records, cursor: encodeUsageCursor({ tenant, month: nextMonth(month) }) } : { records };
        }
      } while (exclusiveStart);
      month = nextMonth(month);
      after = undefined;
    }
    return { records };
  }

  async setTenantPlaces(places: ReadonlyMap<string, readonly string[]>): Promise<void> {
    const tenants = new Set(places.keys());
    let start: Item | undefined;
    do {
      this.usage.readRequests++;
      const page = await this.doc.send(
        new ScanCommand({
          TableName: this.tables.runs,
          FilterExpression: '#sk = :tenant',
          ExpressionAttributeNames: { '#sk': RUNS_TABLE.sortKey },
          ExpressionAttributeValues: { ':tenant': TENANT_ITEM },
          ExclusiveStartKey: start,
        }),
      );
      for (const item of page.Items ?? []) tenants.add(item.tenant as string);
      start = page.LastEvaluatedKey;
    } while (start);
    for (const tenant of tenants) {
      const holders = places.get(tenant) ?? [];
      await this.update({
        Key: tenantKey(tenant),
        UpdateExpression: `SET #tenant = :tenant, #places = :places${holders.length > 0 ? ', #holders = :holders' : ' REMOVE #holders'}`,
        ExpressionAttributeNames: { '#tenant': 'tenant', '#places': 'places', '#holders': 'holders' },
        ExpressionAttributeValues: { ':tenant': tenant, ':places': holders.length, ...(holders.length > 0 ? { ':holders': new Set(holders) } : {}) },
      });
    }
  }

  async createRun(run: Run): Promise<boolean> {
    const created = await this.putNew({
      ...runKey(run.runId),
      ...run,
      [RUNS_TABLE.byThread.partitionKey]: threadKey(run),
      // Only roots are A2A tasks; answers stay out of the tenant index, which pages tasks.
      ...(run.runId === run.rootRunId ? { [RUNS_TABLE.byTenant.partitionKey]: run.tenant } : {}),
    });
    if (created) await this.indexTask(run);
    return created;
  }

  async getRun(runId: string): Promise<Run | undefined> {
    const item = await this.get(runKey(runId));
    return item && domain<Run>(item);
  }

  async getRunOf(tenant: string, runId: string): Promise<Run | undefined> {
    const key = runKey(runId);
    if (!fitsKey(key)) return undefined;
    this.usage.readRequests++;
    // A GetItem would hand over another tenant's run to be looked at here; the filter leaves it in the table.
    const result = await this.doc.send(
      new QueryCommand({
        TableName: this.tables.runs,
        KeyConditionExpression: 'pk = :pk AND sk = :sk',
        FilterExpression: '#tenant = :tenant',
        ExpressionAttributeNames: { '#tenant': 'tenant' },
        ExpressionAttributeValues: { ':pk': key.pk, ':sk': key.sk, ':tenant': tenant },
        ConsistentRead: true,
      }),
    );
    const item = result.Items?.[0];
    return item && domain<Run>(item);
  }

  async listThreadRuns(thread: ThreadRef): Promise<Run[]> {
    const { indexName, partitionKey } = RUNS_TABLE.byThread;
    const items = await this.queryAll({
      TableName: this.tables.runs,
      IndexName: indexName,
      KeyConditionExpression: '#thread = :thread',
      ExpressionAttributeNames: { '#thread': partitionKey },
      ExpressionAttributeValues: { ':thread': threadKey(thread) },
      ScanIndexForward: true,
    });
    return items.map((item) => domain<Run>(item));
  }

  async listRunsByStatus(status: RunStatus): Promise<Run[]> {
    const input: ScanCommandInput = {
      TableName: this.tables.runs,
      FilterExpression: '#sk = :run AND #status = :status',
      ExpressionAttributeNames: { '#sk': RUNS_TABLE.sortKey, '#status': 'status' },
      ExpressionAttributeValues: { ':run': RUN_ITEM, ':status': status },
    };
    const runs: Run[] = [];
    let start: Item | undefined;
    do {
      this.usage.readRequests++;
      const page = await this.doc.send(new ScanCommand({ ...input, ExclusiveStartKey: start }));
      for (const item of page.Items ?? []) runs.push(domain<Run>(item));
      start = page.LastEvaluatedKey;
    } while (start);
    return runs;
  }

  async pageRunsByStatus(status: RunStatus, page: { limit: number; cursor?: string }): Promise<{ runs: Run[]; cursor?: string }> {
    this.usage.readRequests++;
    // Scan's Limit counts the items read, not those the filter keeps: a page may hold fewer runs than asked, even none, and go on.
    const found = await this.doc.send(
      new ScanCommand({
        TableName: this.tables.runs,
        FilterExpression: '#sk = :run AND #status = :status',
        ExpressionAttributeNames: { '#sk': RUNS_TABLE.sortKey, '#status': 'status' },
        ExpressionAttributeValues: { ':run': RUN_ITEM, ':status': status },
        Limit: page.limit,
        ExclusiveStartKey: page.cursor === undefined ? undefined : (JSON.parse(page.cursor) as Item),
      }),
    );
    const runs = (found.Items ?? []).map((item) => domain<Run>(item));
    return found.LastEvaluatedKey ? { runs, cursor: JSON.stringify(found.LastEvaluatedKey) } : { runs };
  }

  async listTasks(tenant: string, query: TaskIndexQuery): Promise<{ runs: Run[]; cursor?: string }> {
    if (!Number.isInteger(query.limit) || query.limit < 1) throw new RangeError(`page limit must be a positive integer, got ${query.limit}`);
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
    this.usage.readRequests++;
    // One item past the page tells whether another page exists (DynamoDB's own LastEvaluatedKey is set whenever Limit was reached).
    const result = await this.doc.send(
      new QueryCommand({
        TableName: this.tables.runs,
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
        : (await Promise.all(page.map((item) => this.getRun(item.taskId as string)))).filter((run): run is Run => run !== undefined);
    // The item that ends the page, or the last one read when the filter kept fewer than a page.
    const last = items.length > query.limit ? items[query.limit - 1] : result.LastEvaluatedKey;
    if (!last) return { runs };
    return { runs, cursor: encodeCursor({ pk: last.pk, sk: last.sk, [partitionKey]: last[partitionKey], [sortKey]: last[sortKey] }) };
  }

  async transitionRun(runId: string, from: readonly RunStatus[], patch: Partial<Run> & { status: RunStatus }): Promise<Run | undefined> {
    if (from.length === 0) return undefined;
    const names: Record<string, string> = { '#status': 'status' };
    const values: Item = {};
    const sets: string[] = [];
    for (const [key, value] of Object.entries(patch)) {
      if (value === undefined) continue;
      if (RUN_IDENTITY.has(key)) throw new TypeError(`transitionRun cannot change a run's ${key}`);
      const i = sets.length;
      names[`#p${i}`] = key;
      values[`:p${i}`] = value;
      sets.push(`#p${i} = :p${i}`);
    }
    const allowed = from.map((status, i) => {
      values[`:f${i}`] = status;
      return `:f${i}`;
    });
    const item = await this.update({
      Key: runKey(runId),
      UpdateExpression: `SET ${sets.join(', ')}`,
      // A missing run has no status, so the condition also keeps an update from creating one.
      ConditionExpression: `#status IN (${allowed.join(', ')})`,
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
      ReturnValues: 'ALL_NEW',
    });
    return item && this.indexed(this.written(domain<Run>(item), item));
  }

  async closeAsks(
    runId: string,
    changes: Record<string, { state: Exclude<AskState, 'open'>; closedByRunId?: string }>,
  ): Promise<Run | undefined> {
    const entries = Object.entries(changes);
    if (entries.length === 0) return this.getRun(runId);
    const names: Record<string, string> = { '#asks': 'asks', '#state': 'state' };
    const values: Item = { ':open': 'open' };
    const sets: string[] = [];
    const conditions: string[] = [];
    entries.forEach(([askId, change], i) => {
      // Ask ids come from agents: any string, so always a name placeholder.
      names[`#a${i}`] = askId;
      values[`:s${i}`] = change.state;
      sets.push(`#asks.#a${i}.#state = :s${i}`);
      conditions.push(`#asks.#a${i}.#state = :open`);
      if (change.closedByRunId !== undefined) {
        names['#closedBy'] = 'closedByRunId';
        values[`:c${i}`] = change.closedByRunId;
        sets.push(`#asks.#a${i}.#closedBy = :c${i}`);
      }
    });
    const item = await this.update({
      Key: runKey(runId),
      UpdateExpression: `SET ${sets.join(', ')}`,
      ConditionExpression: conditions.join(' AND '),
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
      ReturnValues: 'ALL_NEW',
    });
    return item && this.indexed(this.written(domain<Run>(item), item));
  }

  async forgetClosingEvents(runId: string): Promise<void> {
    await this.update({
      Key: runKey(runId),
      UpdateExpression: 'REMOVE #closing',
      ConditionExpression: 'attribute_exists(#closing)',
      ExpressionAttributeNames: { '#closing': 'closingEvents' },
    });
  }

  async reopenAsks(
    runId: string,
    changes: Record<string, { state: Exclude<AskState, 'open'>; closedByRunId?: string }>,
  ): Promise<Run | undefined> {
    const entries = Object.entries(changes);
    if (entries.length === 0) return this.getRun(runId);
    const names: Record<string, string> = { '#asks': 'asks', '#state': 'state', '#closedBy': 'closedByRunId', '#reopened': 'asksReopened' };
    const values: Item = { ':open': 'open', ':one': 1 };
    const sets: string[] = [];
    const removes: string[] = [];
    const conditions: string[] = [];
    entries.forEach(([askId, change], i) => {
      names[`#a${i}`] = askId;
      values[`:c${i}`] = change.closedByRunId ?? '';
      sets.push(`#asks.#a${i}.#state = :open`);
      removes.push(`#asks.#a${i}.#closedBy`);
      conditions.push(`#asks.#a${i}.#closedBy = :c${i}`);
    });
    const item = await this.update({
      Key: runKey(runId),
      UpdateExpression: `SET ${sets.join(', ')} REMOVE ${removes.join(', ')} ADD #reopened :one`,
      ConditionExpression: conditions.join(' AND '),
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
      ReturnValues: 'ALL_NEW',
    });
    return item && this.indexed(this.written(domain<Run>(item), item));
  }

  async appendEvents(events: StoredEvent[]): Promise<void> {
    const batches: Item[][] = [];
    for (let i = 0; i < events.length; i += BATCH_SIZE) {
      // `e` is a string: one JSON.stringify here is far cheaper than marshalling the event as a map.
      batches.push(
        events.slice(i, i + BATCH_SIZE).map((stored) => {
          stored.json ??= JSON.stringify(stored.event);
          return { runId: stored.runId, seq: stored.seq, e: stored.json };
        }),
      );
    }
    // Every batch is done before the caller hears of one that failed: none is still on its way when
    // the caller writes after what is stored (a run's closing RUN_ERROR).
    const results = await Promise.allSettled(batches.map((batch) => this.writeBatch(batch)));
    const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (failed) throw failed.reason;
  }

  async appendNew(events: StoredEvent[]): Promise<number[]> {
    const taken: number[] = [];
    let next = 0;
    // One conditional PutItem per event (BatchWriteItem takes no conditions), a bounded number in
    // flight; each costs the write units a batched put would.
    const writer = async () => {
      while (next < events.length) {
        const stored = events[next++];
        stored.json ??= JSON.stringify(stored.event);
        const item = { runId: stored.runId, seq: stored.seq, e: stored.json };
        if (!(await this.putEventIfNew(item))) taken.push(stored.seq);
      }
    };
    const results = await Promise.allSettled(Array.from({ length: Math.min(NEW_EVENTS_IN_FLIGHT, events.length) }, writer));
    const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (failed) throw failed.reason;
    return taken.sort((a, b) => a - b);
  }

  async readEvents(runId: string, afterSeq: number, limit?: number): Promise<StoredEvent[]> {
    const events: StoredEvent[] = [];
    let start: Item | undefined;
    do {
      const left = limit === undefined ? undefined : limit - events.length;
      if (left !== undefined && left <= 0) break;
      this.usage.readRequests++;
      const page = await this.doc.send(
        new QueryCommand({
          TableName: this.tables.runEvents,
          KeyConditionExpression: 'runId = :run AND seq > :after',
          ExpressionAttributeValues: { ':run': runId, ':after': afterSeq },
          ScanIndexForward: true,
          // A reader woken by a change must see the write that woke it.
          ConsistentRead: true,
          Limit: left,
          ExclusiveStartKey: start,
        }),
      );
      for (const item of page.Items ?? []) {
        events.push({ runId, seq: item.seq as number, event: JSON.parse(item.e as string), json: item.e as string });
      }
      start = page.LastEvaluatedKey;
    } while (start);
    return events;
  }

  async lastSeq(runId: string): Promise<number> {
    this.usage.readRequests++;
    const result = await this.doc.send(
      new QueryCommand({
        TableName: this.tables.runEvents,
        KeyConditionExpression: 'runId = :run',
        ExpressionAttributeValues: { ':run': runId },
        ProjectionExpression: 'seq',
        ScanIndexForward: false,
        ConsistentRead: true,
        Limit: 1,
      }),
    );
    return (result.Items?.[0]?.seq as number | undefined) ?? 0;
  }

  async putAgent(agent: Agent): Promise<void> {
    const item = { ...agentKey(agent.id), ...agent };
    this.usage.writeRequests++;
    this.usage.writeUnits += unitsOf(item);
    await this.doc.send(new PutCommand({ TableName: this.tables.runs, Item: item }));
  }

  async getAgent(agentId: string): Promise<Agent | undefined> {
    const item = await this.get(agentKey(agentId));
    return item && domain<Agent>(item);
  }

  async listAgents(): Promise<Agent[]> {
    const items = await this.queryAll({
      TableName: this.tables.runs,
      KeyConditionExpression: 'pk = :agents',
      ExpressionAttributeValues: { ':agents': AGENT_PARTITION },
      ConsistentRead: true,
    });
    return items.map((item) => domain<Agent>(item));
  }

  async deleteAgent(agentId: string): Promise<void> {
    this.usage.writeRequests++;
    // A delete is billed on the deleted item's size; agents are well under 1 KB.
    this.usage.writeUnits += 1;
    await this.doc.send(new DeleteCommand({ TableName: this.tables.runs, Key: agentKey(agentId) }));
  }

  async putPushConfig(config: PushConfig): Promise<void> {
    const item = { ...pushConfigKey(config.taskId, config.configId), ...config };
    this.usage.writeRequests++;
    this.usage.writeUnits += unitsOf(item);
    await this.doc.send(new PutCommand({ TableName: this.tables.runs, Item: item }));
  }

  async getPushConfig(taskId: string, configId: string): Promise<PushConfig | undefined> {
    const item = await this.get(pushConfigKey(taskId, configId));
    return item && domain<PushConfig>(item);
  }

  async listPushConfigs(taskId: string): Promise<PushConfig[]> {
    const items = await this.queryAll({
      TableName: this.tables.runs,
      KeyConditionExpression: 'pk = :task AND begins_with(sk, :push)',
      ExpressionAttributeValues: { ':task': taskPartition(taskId), ':push': PUSH_CONFIG_PREFIX },
      ConsistentRead: true,
    });
    return items.map((item) => domain<PushConfig>(item));
  }

  async deletePushConfig(taskId: string, configId: string): Promise<boolean> {
    if (!fitsKey(pushConfigKey(taskId, configId))) return false;
    this.usage.writeRequests++;
    this.usage.writeUnits += 1;
    const result = await this.doc.send(
      new DeleteCommand({ TableName: this.tables.runs, Key: pushConfigKey(taskId, configId), ReturnValues: 'ALL_OLD' }),
    );
    return result.Attributes !== undefined;
  }

  async recordPushFailure(taskId: string, configId: string, deadLetter: NonNullable<PushConfig['deadLetter']>): Promise<void> {
    await this.update({
      Key: pushConfigKey(taskId, configId),
      UpdateExpression: 'SET #deadLetter = :deadLetter',
      // A config deleted while its notification was being retried is not brought back.
      ConditionExpression: 'attribute_exists(pk)',
      ExpressionAttributeNames: { '#deadLetter': 'deadLetter' },
      ExpressionAttributeValues: { ':deadLetter': deadLetter },
    });
  }

  async claimMessage(claim: MessageClaim, nowSeconds: number): Promise<MessageClaim> {
    const key = messageClaimKey(claim.key);
    const item = { ...key, ...claim, [RUNS_TABLE.timeToLive]: claim.expiresAt };
    this.usage.writeRequests++;
    this.usage.writeUnits += unitsOf(item);
    try {
      // TTL removes expired items only eventually, so an expired claim is free to take over.
      await this.doc.send(
        new PutCommand({
          TableName: this.tables.runs,
          Item: item,
          ConditionExpression: 'attribute_not_exists(pk) OR #expiresAt <= :now',
          ExpressionAttributeNames: { '#expiresAt': 'expiresAt' },
          ExpressionAttributeValues: { ':now': nowSeconds },
        }),
      );
      return claim;
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
    }
    const held = await this.get(key);
    // Released between the put and the read: the caller may simply try again.
    return held ? domain<MessageClaim>(held) : this.claimMessage(claim, nowSeconds);
  }

  async releaseMessage(claim: MessageClaim): Promise<void> {
    await this.deleteWhere(messageClaimKey(claim.key), '#runId = :runId', { '#runId': 'runId' }, { ':runId': claim.runId });
  }

  async putProvider(provider: LinkProvider): Promise<boolean> {
    // An update, not a put: the places its runs hold are the record's, not the admin's.
    const before = await this.update({
      Key: providerKey(provider.providerId),
      UpdateExpression: 'SET #id = :id, #key = :key, #agents = :agents, #max = :max, #created = if_not_exists(#created, :created)',
      ExpressionAttributeNames: { '#id': 'providerId', '#key': 'publicKey', '#agents': 'agents', '#max': 'maxConcurrentRuns', '#created': 'createdAt' },
      ExpressionAttributeValues: { ':id': provider.providerId, ':key': provider.publicKey, ':agents': provider.agents, ':max': provider.maxConcurrentRuns, ':created': provider.createdAt },
      ReturnValues: 'UPDATED_OLD',
    });
    return before?.providerId === undefined;
  }

  async getProvider(providerId: string): Promise<(LinkProvider & { places: number }) | undefined> {
    const item = await this.get(providerKey(providerId));
    return item && providerOf(item);
  }

  async listProviders(): Promise<(LinkProvider & { places: number })[]> {
    const items = await this.queryAll({
      TableName: this.tables.runs,
      KeyConditionExpression: 'pk = :providers',
      ExpressionAttributeValues: { ':providers': PROVIDER_PARTITION },
      ConsistentRead: true,
    });
    return items.map(providerOf);
  }

  async deleteProvider(providerId: string): Promise<boolean> {
    if (!fitsKey(providerKey(providerId))) return false;
    this.usage.writeRequests++;
    this.usage.writeUnits += 1;
    const result = await this.doc.send(new DeleteCommand({ TableName: this.tables.runs, Key: providerKey(providerId), ReturnValues: 'ALL_OLD' }));
    return result.Attributes !== undefined;
  }

  async takeProviderPlace(providerId: string, limit: number): Promise<boolean> {
    const taken = await this.update({
      Key: providerKey(providerId),
      UpdateExpression: 'ADD #places :one',
      ConditionExpression: 'attribute_exists(pk) AND (attribute_not_exists(#places) OR #places < :limit)',
      ExpressionAttributeNames: { '#places': 'places' },
      ExpressionAttributeValues: { ':one': 1, ':limit': limit },
    });
    return taken !== undefined;
  }

  async releaseProviderPlace(providerId: string): Promise<void> {
    // A failed condition: none held (a recovery reset them) or the provider is gone: nothing to give back.
    await this.update({
      Key: providerKey(providerId),
      UpdateExpression: 'ADD #places :minusOne',
      ConditionExpression: '#places > :zero',
      ExpressionAttributeNames: { '#places': 'places' },
      ExpressionAttributeValues: { ':minusOne': -1, ':zero': 0 },
    });
  }

  async resetProviderPlaces(): Promise<void> {
    for (const provider of await this.listProviders()) {
      if (provider.places === 0) continue;
      await this.update({
        Key: providerKey(provider.providerId),
        UpdateExpression: 'SET #places = :zero',
        ConditionExpression: 'attribute_exists(pk)',
        ExpressionAttributeNames: { '#places': 'places' },
        ExpressionAttributeValues: { ':zero': 0 },
      });
    }
  }

  async updateRunLink(runId: string, expectedRev: number | undefined, link: RunLink): Promise<Run | undefined> {
    const item = await this.update({
      Key: runKey(runId),
      UpdateExpression: 'SET #link = :link',
      ConditionExpression:
        expectedRev === undefined
          ? '#status IN (:running, :cancelling) AND attribute_not_exists(#link)'
          : '#status IN (:running, :cancelling) AND #link.#rev = :rev',
      ExpressionAttributeNames: { '#status': 'status', '#link': 'link', ...(expectedRev === undefined ? {} : { '#rev': 'rev' }) },
      ExpressionAttributeValues: { ':running': 'running', ':cancelling': 'cancelling', ':link': link, ...(expectedRev === undefined ? {} : { ':rev': expectedRev }) },
      ReturnValues: 'ALL_NEW',
    });
    return item && this.written(domain<Run>(item), item);
  }

  /** A DeleteItem on the runs table under a condition; false when the condition failed. */
  private async deleteWhere(key: Item, condition: string, names: Record<string, string>, values: Item): Promise<boolean> {
    this.usage.writeRequests++;
    this.usage.writeUnits += 1;
    try {
      await this.doc.send(
        new DeleteCommand({ TableName: this.tables.runs, Key: key, ConditionExpression: condition, ExpressionAttributeNames: names, ExpressionAttributeValues: values }),
      );
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      throw err;
    }
  }

  private async get(key: Item): Promise<Item | undefined> {
    // No item can be stored under a key DynamoDB refuses: an id that long names nothing.
    if (!fitsKey(key)) return undefined;
    this.usage.readRequests++;
    const result = await this.doc.send(new GetCommand({ TableName: this.tables.runs, Key: key, ConsistentRead: true }));
    return result.Item;
  }

  private async putNew(item: Item): Promise<boolean> {
    this.usage.writeRequests++;
    this.usage.writeUnits += unitsOf(item) * copiesOf(item);
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
  private async update(input: Omit<UpdateCommandInput, 'TableName'>): Promise<Item | undefined> {
    this.usage.writeRequests++;
    this.usage.writeUnits += 1;
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
  private written(run: Run, item: Item): Run {
    this.usage.writeUnits += unitsOf(item) * copiesOf(item) - 1;
    return run;
  }

  /**
   * The task index: an item per task (`task#<root run id>`, sk `index`) with its state and that
   * state's time as the lineage's tail run last wrote them, in `byKey` under a partition per
   * tenant, agent and state, sorted by the root's creation. Written right after the run's own
   * write (DynamoDB returns the run as written, of which the state is a function); a writer that
   * dies between the two leaves the entry a step behind until the run's next write or the repair
   * of its change (`reindexTask`), and ListTasks checks every task it lists against the record.
   */
  private async indexTask(run: Run): Promise<void> {
    const state = taskStateOf(run);
    const { partitionKey, sortKey } = RUNS_TABLE.byKey;
    const root = run.runId === run.rootRunId;
    const names: Record<string, string> = { '#ix': partitionKey, '#arrival': 'tailArrival', '#state': 'state', '#at': 'stateAt' };
    const values: Item = { ':ix': taskStatePartition(run.tenant, run.agentId, state), ':arrival': run.arrival, ':state': state, ':at': taskStateAt(run) };
    const sets = ['#ix = :ix', '#arrival = :arrival', '#state = :state', '#at = :at'];
    if (root) {
      Object.assign(names, { '#sort': sortKey, '#task': 'taskId', '#tenant': 'tenant', '#agent': 'agentId', '#thread': 'threadId', '#created': 'createdAt' });
      Object.assign(values, { ':sort': `${run.createdAt}/${digest(run.runId)}`, ':task': run.runId, ':tenant': run.tenant, ':agent': run.agentId, ':thread': run.threadId, ':created': run.createdAt });
      sets.push('#sort = :sort', '#task = :task', '#tenant = :tenant', '#agent = :agent', '#thread = :thread', '#created = :created');
    }
    // The root's writes count while it is the tail; an answer run is the tail from its creation on.
    // A unit for the item, one more for its copy in byKey (`update` counts the first).
    this.usage.writeUnits += 1;
    await this.update({
      Key: { pk: taskPartition(run.rootRunId), sk: TASK_INDEX_ITEM },
      UpdateExpression: `SET ${sets.join(', ')}`,
      ConditionExpression: root ? 'attribute_not_exists(#arrival) OR #arrival = :arrival' : 'attribute_exists(#arrival) AND #arrival <= :arrival',
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
    });
  }

  /**
   * The run's own write is done: the repair of a writer that died before its entry's. The entry
   * is read first (a read unit costs a fifth of a write's) and written only when it is behind.
   */
  async reindexTask(run: Run): Promise<void> {
    const entry = await this.get({ pk: taskPartition(run.rootRunId), sk: TASK_INDEX_ITEM });
    if (entry && entry.tailArrival === run.arrival && entry.state === taskStateOf(run) && entry.stateAt === taskStateAt(run)) return;
    await this.indexTask(run);
  }

  private async indexed(run: Run): Promise<Run> {
    await this.indexTask(run);
    return run;
  }

  private async setOnThread(thread: ThreadRef, attribute: 'waitingRunId', value: unknown): Promise<void> {
    // Without the condition an update of a missing thread would create a thread item with no fields.
    await this.update({
      Key: threadItemKey(thread),
      UpdateExpression: 'SET #attribute = :value',
      ConditionExpression: 'attribute_exists(pk)',
      ExpressionAttributeNames: { '#attribute': attribute },
      ExpressionAttributeValues: { ':value': value },
    });
  }

  private async queryAll(input: QueryCommandInput): Promise<Item[]> {
    const items: Item[] = [];
    let start: Item | undefined;
    do {
      this.usage.readRequests++;
      const page = await this.doc.send(new QueryCommand({ ...input, ExclusiveStartKey: start }));
      items.push(...(page.Items ?? []));
      start = page.LastEvaluatedKey;
    } while (start);
    return items;
  }

  /** False when the seq was stored already. Throttling and outages are retried as a batch's are. */
  private async putEventIfNew(item: Item): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      this.usage.writeRequests++;
      this.usage.writeUnits += eventUnits(item);
      try {
        await this.doc.send(
          new PutCommand({ TableName: this.tables.runEvents, Item: item, ConditionExpression: 'attribute_not_exists(seq)' }),
        );
        return true;
      } catch (err) {
        if (isConditionFailure(err)) return false;
        if (!isUnavailable(err)) throw err;
        if (attempt === BATCH_ATTEMPTS) {
          throw new StoreUnavailable(`run_events did not take event ${String(item.seq)} after ${BATCH_ATTEMPTS} attempts: ${(err as Error).message}`, { cause: err });
        }
        await delay(Math.random() * BATCH_BACKOFF_MS * 2 ** attempt);
      }
    }
  }

  private async writeBatch(batch: Item[]): Promise<void> {
    const table = this.tables.runEvents;
    let pending = batch;
    for (let attempt = 1; ; attempt++) {
      this.usage.writeRequests++;
      for (const item of pending) this.usage.writeUnits += eventUnits(item);
      let unprocessed: Item[];
      try {
        const result = await this.doc.send(
          new BatchWriteCommand({ RequestItems: { [table]: pending.map((Item) => ({ PutRequest: { Item } })) } }),
        );
        unprocessed = (result.UnprocessedItems?.[table] ?? []).flatMap((request) => (request.PutRequest?.Item ? [request.PutRequest.Item] : []));
      } catch (err) {
        if (!isUnavailable(err)) throw err;
        if (attempt === BATCH_ATTEMPTS) {
          throw new StoreUnavailable(`run_events did not take ${pending.length} events after ${BATCH_ATTEMPTS} attempts: ${(err as Error).message}`, { cause: err });
        }
        // Throttling that outlasted the SDK's own retries, or no answer: putting the same events
        // again is harmless (same keys, same items), so the whole batch goes again.
        unprocessed = pending;
      }
      if (unprocessed.length === 0) return;
      if (attempt === BATCH_ATTEMPTS) {
        throw new StoreUnavailable(`run_events left ${unprocessed.length} events unprocessed after ${BATCH_ATTEMPTS} attempts`);
      }
      // AWS asks for exponential backoff with jitter on UnprocessedItems and throttling.
      await delay(Math.random() * BATCH_BACKOFF_MS * 2 ** attempt);
      pending = unprocessed;
    }
  }
}

function threadItemKey(thread: ThreadRef): Item {
  return { pk: `thread#${threadKey(thread)}`, sk: THREAD_ITEM };
}

function arrivalKey(runId: string): Item {
  return { pk: `${ARRIVAL_PREFIX}${runId}`, sk: ARRIVAL_ITEM };
}

/** A run's arrival note goes to one of the `byKey` partitions `arrival#0` … by its id's hash: a burst of arrivals is spread over them. */
function arrivalPartition(runId: string): string {
  return `${ARRIVAL_PREFIX}${createHash('sha256').update(runId).digest()[0] % ARRIVAL_PARTITIONS}`;
}

function tenantKey(tenant: string): Item {
  return { pk: `tenant#${tenant}`, sk: TENANT_ITEM };
}

function usageKey(runId: string): Item {
  return { pk: `usage#${runId}`, sk: 'usage' };
}

/** A tenant in a sort key before a "/": its own "%" and "/" escaped, as `threadKey` does. */
function escapeTenant(tenant: string): string {
  return tenant.replaceAll('%', '%25').replaceAll('/', '%2F');
}

/** The partition of the `byKey` index that holds the usage records of a UTC month. */
function usagePartition(month: string): string {
  return `usage#${month}`;
}

function nextMonth(month: string): string {
  const [year, number] = month.split('-').map(Number);
  return new Date(Date.UTC(year, number, 1)).toISOString().slice(0, 7);
}

function spendOf(item: Item): Spend {
  const spend: Spend = { period: String(item.spendPeriod), tokens: Number(item.spendTokens ?? 0), cost: Number(item.spendCost ?? 0) };
  if (typeof item.spendCrossedAt === 'string') spend.crossedAt = item.spendCrossedAt;
  if (typeof item.spendCrossedBy === 'string') spend.crossedByRunId = item.spendCrossedBy;
  return spend;
}

/** A usage listing's place: whose listing (a tenant, or '' for every tenant's), the month it is on, and DynamoDB's key within it. */
function encodeUsageCursor(place: { tenant: string; month: string; after?: Item }): string {
  return encodePageCursor(place);
}

/** A cursor comes back from a caller: only the shape we issue, for the listing asking. */
/**
 * A usage listing's place, as `listUsage` issued it: the tenant's, a month of the listing's range,
 * and, within the month, the last key a Query read (the usage record's keys and its index keys,
 * all strings, in that month's partition and, for a tenant, under its prefix). Anything else is
 * a cursor this listing did not issue: DynamoDB would refuse a start key of another shape (a
 * ValidationException), and a month outside the range would cost a Query per month on the way.
 */
function decodeUsageCursor(cursor: string, tenant: string, firstMonth: string, lastMonth: string): { month: string; after?: Item } {
  const place = decodePageCursor(cursor) as { tenant?: unknown; month?: unknown; after?: unknown } | null;
  const { partitionKey, sortKey } = RUNS_TABLE.byKey;
  const month = typeof place?.month === 'string' && /^\d{4}-\d{2}$/.test(place.month) ? place.month : undefined;
  const after = place?.after as Record<string, unknown> | undefined;
  const afterValid =
    after === undefined ||
    (typeof after === 'object' &&
      after !== null &&
      Object.keys(after).sort().join() === ['pk', 'sk', partitionKey, sortKey].sort().join() &&
      Object.values(after).every((value) => typeof value === 'string') &&
      after[partitionKey] === usagePartition(month ?? '') &&
      after.sk === 'usage' &&
      String(after.pk).startsWith('usage#') &&
      (tenant === '' || String(after[sortKey]).startsWith(`${escapeTenant(tenant)}/`)));
  if (place?.tenant !== tenant || month === undefined || month < firstMonth || month > lastMonth || !afterValid) throw new RangeError('invalid page cursor');
  return { month, ...(after ? { after: after as Item } : {}) };
}

function runKey(runId: string): Item {
  return { pk: `run#${runId}`, sk: RUN_ITEM };
}

function providerKey(providerId: string): Item {
  return { pk: PROVIDER_PARTITION, sk: providerId };
}

function providerOf(item: Item): LinkProvider & { places: number } {
  const { places, ...provider } = domain<LinkProvider & { places?: number }>(item);
  return { ...provider, places: Number(places ?? 0) };
}

function agentKey(agentId: string): Item {
  return { pk: AGENT_PARTITION, sk: agentId };
}

function taskPartition(taskId: string): string {
  return `task#${taskId}`;
}

/** The `byKey` partition of a tenant's tasks at an agent in one state (hashed: the ids may be long, the key may not). */
function taskStatePartition(tenant: string, agentId: string, state: number): string {
  return `tasks#${digest(JSON.stringify([tenant, agentId]))}#${state}`;
}

function digest(text: string): string {
  return createHash('sha256').update(text).digest('base64url');
}

function pushConfigKey(taskId: string, configId: string): Item {
  return { pk: taskPartition(taskId), sk: `${PUSH_CONFIG_PREFIX}${configId}` };
}

function messageClaimKey(key: string): Item {
  // The claim's key quotes caller ids: past DynamoDB's limit it is stored under its SHA-256.
  const pk = `msg#${key}`;
  return { pk: fits(pk, PARTITION_KEY_BYTES) ? pk : `msg#sha256:${createHash('sha256').update(key).digest('hex')}`, sk: MESSAGE_CLAIM_ITEM };
}

function fits(value: string, bytes: number): boolean {
  return Buffer.byteLength(value) <= bytes;
}

function fitsKey(key: Item): boolean {
  return fits(key.pk as string, PARTITION_KEY_BYTES) && fits(key.sk as string, SORT_KEY_BYTES);
}

/** Whether a thread's or a tenant's item counts `holder` among those holding its places. */
function holds(item: Item | undefined, holder: string): boolean {
  return (item?.holders as Set<string> | undefined)?.has(holder) ?? false;
}

function domain<T>(item: Item): T {
  const object: Item = {};
  for (const key of Object.keys(item)) {
    if (!KEY_ATTRIBUTES.includes(key)) object[key] = item[key];
  }
  return object as T;
}

/** The table's copy of an item and one in each index whose key the item has (each projects the whole item). */
function copiesOf(item: Item): number {
  const indexes = [RUNS_TABLE.byThread.partitionKey, RUNS_TABLE.byTenant.partitionKey, RUNS_TABLE.byKey.partitionKey];
  return 1 + indexes.filter((key) => item[key] !== undefined).length;
}

/** Approximates DynamoDB's item size (names plus values) by the item's JSON. */
function unitsOf(item: Item): number {
  return Math.max(1, Math.ceil(Buffer.byteLength(JSON.stringify(item)) / KB));
}

/** The size of a run_events item without serialising it again: `e` is already its JSON. */
function eventUnits(item: Item): number {
  const bytes = 'runIdseqe'.length + Buffer.byteLength(item.runId as string) + String(item.seq).length + Buffer.byteLength(item.e as string);
  return Math.max(1, Math.ceil(bytes / KB));
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

function isConditionFailure(err: unknown): boolean {
  return (err as { name?: string } | undefined)?.name === 'ConditionalCheckFailedException';
}

/** Throttling that outlasted the SDK's own retries, a server fault, or no answer at all. */
function isUnavailable(err: unknown): boolean {
  const { name, code, $fault } = (err ?? {}) as { name?: string; code?: unknown; $fault?: string };
  if (name !== undefined && THROTTLING.has(name)) return true;
  if ($fault === 'server') return true;
  // No service answer: a socket error (ECONNRESET, …) or the request timed out.
  return $fault === undefined && (name === 'TimeoutError' || typeof code === 'string');
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
