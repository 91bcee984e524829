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
import { threadKey, type Agent, type AskState, type MessageClaim, type PushConfig, type Run, type RunStatus, type StoredEvent, type Thread, type ThreadRef } from '../../../core/model.js';
import type { RunStore, TenantAdmission, TenantLimits } from '../../../core/ports.js';
import { RUNS_TABLE, type TableNames } from './tables.js';

/** What the store has sent, for the cost model. */
export interface StoreUsage {
  /** GetItem, Query and Scan calls (each page is one). */
  readRequests: number;
  /** Put, Update, Delete and BatchWrite calls (a batch is one; a retried batch is one more). */
  writeRequests: number;
  /** Write units as DynamoDB bills them: one per started KB of each item written. */
  writeUnits: number;
}

type Item = Record<string, unknown>;

/** BatchWriteItem takes at most 25 put requests. */
const BATCH_SIZE = 25;
/** Attempts of one batch while DynamoDB throttles it or hands items back unprocessed. */
const BATCH_ATTEMPTS = 5;
const BATCH_BACKOFF_MS = 50;

const KB = 1024;
/** DynamoDB's limits on a key attribute, in UTF-8 bytes (partition key, sort key). */
const PARTITION_KEY_BYTES = 2048;
const SORT_KEY_BYTES = 1024;
const THREAD_ITEM = 'thread';
const RUN_ITEM = 'run';
const AGENT_PARTITION = 'agent';
const PUSH_CONFIG_PREFIX = 'push#';
const MESSAGE_CLAIM_ITEM = 'msg';
const TENANT_ITEM = 'tenant';
/** Rounds of a tenant's admission lost to concurrent writers before it gives up as rate limited. */
const ADMISSION_ROUNDS = 5;

/** Attributes that exist for the table and its indexes, not for the domain object. */
const KEY_ATTRIBUTES: readonly string[] = [
  RUNS_TABLE.partitionKey,
  RUNS_TABLE.sortKey,
  RUNS_TABLE.byThread.partitionKey,
  RUNS_TABLE.byTenant.partitionKey,
  RUNS_TABLE.timeToLive,
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
  readonly usage: StoreUsage = { readRequests: 0, writeRequests: 0, writeUnits: 0 };
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

  async createThread(thread: Thread): Promise<boolean> {
    return this.putNew({ ...threadItemKey(thread), ...thread });
  }

  async reserveArrival(thread: ThreadRef, limit: number | undefined): Promise<number | undefined> {
    const limited = limit !== undefined;
    // One conditional ADD takes the number and the place together, so concurrent arrivals can
    // neither share a number nor overfill the thread.
    const attributes = await this.update({
      Key: threadItemKey(thread),
      UpdateExpression: 'ADD #arrivals :one, #unsettled :one',
      ConditionExpression: limited ? 'attribute_exists(pk) AND #unsettled < :limit' : 'attribute_exists(pk)',
      ExpressionAttributeNames: { '#arrivals': 'arrivals', '#unsettled': 'unsettled' },
      // DynamoDB rejects a value placeholder the expressions do not use, hence two shapes.
      ExpressionAttributeValues: limited ? { ':one': 1, ':limit': limit } : { ':one': 1 },
      ReturnValues: 'UPDATED_NEW',
    });
    return attributes?.arrivals as number | undefined;
  }

  async releasePlace(thread: ThreadRef): Promise<void> {
    // A failed condition means the count is already zero (a recovery reset it): nothing to give back.
    await this.update({
      Key: threadItemKey(thread),
      UpdateExpression: 'ADD #unsettled :minusOne',
      ConditionExpression: '#unsettled > :zero',
      ExpressionAttributeNames: { '#unsettled': 'unsettled' },
      ExpressionAttributeValues: { ':minusOne': -1, ':zero': 0 },
    });
  }

  async setUnsettled(thread: ThreadRef, unsettled: number): Promise<void> {
    await this.setOnThread(thread, 'unsettled', unsettled);
  }

  async setWaitingRun(thread: ThreadRef, runId: string): Promise<void> {
    await this.setOnThread(thread, 'waitingRunId', runId);
  }

  async admitTenantRun(tenant: string, limits: TenantLimits): Promise<TenantAdmission> {
    const { runsPerWindow, places } = limits;
    const key = tenantKey(tenant);
    // Each write below is one conditional UpdateItem: the place and the window's count are taken
    // together or not at all. Placeholders are built per write: DynamoDB refuses unused ones.
    const place = places === undefined ? undefined : { add: '#places :one', check: '(attribute_not_exists(#places) OR #places < :places)' };
    const placeNames: Record<string, string> = place ? { '#places': 'places' } : {};
    const placeValues: Item = place ? { ':places': places } : {};
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
      return taken ? 'admitted' : 'places_full';
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
      if (places !== undefined && ((held?.places as number | undefined) ?? 0) >= places) return 'places_full';
      const heldWindow = (held?.window as number | undefined) ?? window;
      if (heldWindow === window && ((held?.windowRuns as number | undefined) ?? 0) >= runsPerWindow) return 'rate_limited';
      // A writer whose clock runs ahead opened a later window: this run counts in it.
      window = Math.max(window, heldWindow);
    }
    return 'rate_limited';
  }

  async releaseTenantPlace(tenant: string): Promise<void> {
    // A failed condition means the count is already zero (a recovery reset it): nothing to give back.
    await this.update({
      Key: tenantKey(tenant),
      UpdateExpression: 'ADD #places :minusOne',
      ConditionExpression: '#places > :zero',
      ExpressionAttributeNames: { '#places': 'places' },
      ExpressionAttributeValues: { ':minusOne': -1, ':zero': 0 },
    });
  }

  async setTenantPlaces(places: ReadonlyMap<string, number>): Promise<void> {
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
      await this.update({
        Key: tenantKey(tenant),
        UpdateExpression: 'SET #tenant = :tenant, #places = :places',
        ExpressionAttributeNames: { '#tenant': 'tenant', '#places': 'places' },
        ExpressionAttributeValues: { ':tenant': tenant, ':places': places.get(tenant) ?? 0 },
      });
    }
  }

  async createRun(run: Run): Promise<boolean> {
    return this.putNew({
      ...runKey(run.runId),
      ...run,
      [RUNS_TABLE.byThread.partitionKey]: threadKey(run),
      // Only roots are A2A tasks; answers stay out of the tenant index, which pages tasks.
      ...(run.runId === run.rootRunId ? { [RUNS_TABLE.byTenant.partitionKey]: run.tenant } : {}),
    });
  }

  async getRun(runId: string): Promise<Run | undefined> {
    const item = await this.get(runKey(runId));
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

  async listRootRuns(tenant: string, page: { limit: number; cursor?: string }): Promise<{ runs: Run[]; cursor?: string }> {
    if (!Number.isInteger(page.limit) || page.limit < 1) throw new RangeError(`page limit must be a positive integer, got ${page.limit}`);
    const { indexName, partitionKey, sortKey } = RUNS_TABLE.byTenant;
    this.usage.readRequests++;
    // One item past the page tells whether another page exists, so the last page carries no
    // cursor (DynamoDB's own LastEvaluatedKey is set whenever Limit was reached).
    const result = await this.doc.send(
      new QueryCommand({
        TableName: this.tables.runs,
        IndexName: indexName,
        KeyConditionExpression: '#tenant = :tenant',
        ExpressionAttributeNames: { '#tenant': partitionKey },
        ExpressionAttributeValues: { ':tenant': tenant },
        ScanIndexForward: false,
        Limit: page.limit + 1,
        ExclusiveStartKey: page.cursor === undefined ? undefined : decodeCursor(page.cursor, tenant),
      }),
    );
    const items = result.Items ?? [];
    const runs = items.slice(0, page.limit).map((item) => domain<Run>(item));
    if (items.length <= page.limit) return { runs };
    const last = items[page.limit - 1];
    // A GSI's start key needs the index key and the table key of the last item returned.
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
    return item && this.written(domain<Run>(item), item);
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
    return item && this.written(domain<Run>(item), item);
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
    this.usage.writeRequests++;
    this.usage.writeUnits += 1;
    try {
      await this.doc.send(
        new DeleteCommand({
          TableName: this.tables.runs,
          Key: messageClaimKey(claim.key),
          ConditionExpression: '#runId = :runId',
          ExpressionAttributeNames: { '#runId': 'runId' },
          ExpressionAttributeValues: { ':runId': claim.runId },
        }),
      );
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
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
    this.usage.writeUnits += unitsOf(item);
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
    this.usage.writeUnits += unitsOf(item) - 1;
    return run;
  }

  private async setOnThread(thread: ThreadRef, attribute: 'unsettled' | 'waitingRunId', value: unknown): Promise<void> {
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

function tenantKey(tenant: string): Item {
  return { pk: `tenant#${tenant}`, sk: TENANT_ITEM };
}

function runKey(runId: string): Item {
  return { pk: `run#${runId}`, sk: RUN_ITEM };
}

function agentKey(agentId: string): Item {
  return { pk: AGENT_PARTITION, sk: agentId };
}

function taskPartition(taskId: string): string {
  return `task#${taskId}`;
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

function domain<T>(item: Item): T {
  const object: Item = {};
  for (const key of Object.keys(item)) {
    if (!KEY_ATTRIBUTES.includes(key)) object[key] = item[key];
  }
  return object as T;
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
  return Buffer.from(JSON.stringify(key)).toString('base64url');
}

/** A cursor comes back from a caller: accept only the shape we issue, for the tenant asking. */
function decodeCursor(cursor: string, tenant: string): Item {
  const { partitionKey, sortKey } = RUNS_TABLE.byTenant;
  let key: unknown;
  try {
    key = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    key = undefined;
  }
  const fields = [RUNS_TABLE.partitionKey, RUNS_TABLE.sortKey, partitionKey, sortKey];
  const valid =
    typeof key === 'object' &&
    key !== null &&
    Object.keys(key).length === fields.length &&
    fields.every((field) => typeof (key as Item)[field] === 'string') &&
    (key as Item)[partitionKey] === tenant;
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
