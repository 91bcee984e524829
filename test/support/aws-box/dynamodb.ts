import { CreateTableCommand, GetItemCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { isDeepStrictEqual } from 'node:util';
import { localDynamoClient, startDynalite, type LocalDynamo } from '../../../lambdas/adapters/local/dynalite.js';
import type { AwsCall, AwsService, Reply } from './aws-endpoint.js';
import { REGION, type Deployment } from './template.js';

type Item = Record<string, AttributeValue>;
type WriteRequest = { PutRequest?: { Item: Item }; DeleteRequest?: { Key: Item } };

/** A DynamoDB Streams record with a new image (the stack's view type), as Lambda hands it over. */
export interface StreamRecord {
  eventID: string;
  eventName: 'INSERT' | 'MODIFY' | 'REMOVE';
  eventVersion: '1.1';
  eventSource: 'aws:dynamodb';
  awsRegion: string;
  eventSourceARN: string;
  dynamodb: { ApproximateCreationDateTime: number; Keys: Item; NewImage?: Item; SequenceNumber: string; SizeBytes: number; StreamViewType: 'NEW_IMAGE' };
}

interface Table {
  name: string;
  arn: string;
  streamArn: string;
  keys: string[];
  stream: StreamRecord[];
  listeners: Set<() => void>;
}

/**
 * DynamoDB: dynalite, with the tables created from the template's own properties, behind a proxy
 * that authorizes each call against the caller's policies and writes each table's stream from
 * the writes it passed on (dynalite 4 has no Streams and no TransactWriteItems). A table's writes
 * are serialized per item, so its stream holds each item's new images in the order they were
 * made, as a DynamoDB stream shard does.
 */
export class DynamoDbService implements AwsService {
  readonly tables = new Map<string, Table>();
  private sequence = 100_000_000_000_000_000_000n;
  private readonly locks = new Map<string, Promise<void>>();
  /**
   * The throttle model: each partition (a table's partition key value) takes this many write units
   * a second (DynamoDB on demand: about 1,000), its unused units kept for a tenth of a second at
   * most (the box writes slower than DynamoDB takes: its bursts, not its throughput, meet the limit). Past
   * them a BatchWriteItem's items are handed back as UnprocessedItems (all of them: the call is
   * refused with ProvisionedThroughputExceededException), and a single write is refused. Off while undefined.
   */
  writeUnitsPerSecond: number | undefined;
  /** What the throttle model refused: calls refused whole, and items handed back unprocessed. */
  readonly throttled = { calls: 0, items: 0 };
  private readonly partitions = new Map<string, { units: number; at: number }>();
  private constructor(
    private readonly dynamo: LocalDynamo,
    /** dynalite's own client, outside IAM: for tests that read the record whole. */
    readonly client: DynamoDBClient,
    private readonly clock: { now(): number },
  ) {}

  static async start(deployment: Deployment, clock: { now(): number }): Promise<DynamoDbService> {
    const dynamo = await startDynalite();
    const service = new DynamoDbService(dynamo, localDynamoClient(dynamo.endpoint), clock);
    for (const [id, resource] of deployment.resources('AWS::DynamoDB::Table')) {
      const props = deployment.resolve(resource.Properties);
      const name = deployment.physicalName(id);
      await service.client.send(
        new CreateTableCommand({
          TableName: name,
          AttributeDefinitions: props.AttributeDefinitions,
          KeySchema: props.KeySchema,
          GlobalSecondaryIndexes: props.GlobalSecondaryIndexes,
          BillingMode: props.BillingMode,
        }),
      );
      service.tables.set(name, {
        name,
        arn: deployment.attribute(id, 'Arn'),
        streamArn: deployment.attribute(id, 'StreamArn'),
        keys: (props.KeySchema as Array<{ AttributeName: string }>).map((key) => key.AttributeName),
        stream: [],
        listeners: new Set(),
      });
    }
    return service;
  }

  table(name: string): Table {
    const table = this.tables.get(name);
    if (!table) throw new Error(`no table ${name}`);
    return table;
  }

  tableByStreamArn(arn: string): Table {
    const table = [...this.tables.values()].find((t) => t.streamArn === arn);
    if (!table) throw new Error(`no table with the stream ${arn}`);
    return table;
  }

  authorize(call: AwsCall): Array<{ action: string; resource: string }> {
    const body = call.body as Record<string, any>;
    const action = `dynamodb:${call.operation}`;
    const arn = (name: string) => this.tables.get(name)?.arn ?? `arn:aws:dynamodb:${REGION}:123456789012:table/${name}`;
    if (call.operation === 'BatchWriteItem' || call.operation === 'BatchGetItem') {
      return Object.keys(body.RequestItems ?? {}).map((name) => ({ action, resource: arn(name) }));
    }
    if (call.operation === 'TransactWriteItems' || call.operation === 'TransactGetItems') {
      return (body.TransactItems ?? []).flatMap((item: Record<string, { TableName: string }>) =>
        Object.entries(item).map(([kind, part]) => ({ action: kind === 'Get' ? 'dynamodb:GetItem' : `dynamodb:${kind}Item`, resource: arn(part.TableName) })),
      );
    }
    const table = arn(body.TableName);
    return [{ action, resource: body.IndexName ? `${table}/index/${body.IndexName}` : table }];
  }

  async handle(given: AwsCall): Promise<Reply> {
    const throttled = this.throttle(given);
    if ('status' in throttled) return throttled;
    const call = throttled.call;
    const body = call.body as Record<string, any>;
    switch (call.operation) {
      case 'PutItem':
        return this.write([{ table: body.TableName, key: this.keyOf(body.TableName, body.Item), put: body.Item }], call);
      case 'UpdateItem':
        return this.write([{ table: body.TableName, key: body.Key }], call);
      case 'DeleteItem':
        return this.write([{ table: body.TableName, key: body.Key, remove: true }], call);
      case 'BatchWriteItem': {
        const reply = await this.write(
          Object.entries(body.RequestItems as Record<string, WriteRequest[]>).flatMap(([table, requests]) =>
            requests.map((request) =>
              request.PutRequest
                ? { table, key: this.keyOf(table, request.PutRequest.Item), put: request.PutRequest.Item }
                : { table, key: request.DeleteRequest!.Key, remove: true },
            ),
          ),
          call,
        );
        if (reply.status !== 200 || Object.keys(throttled.unprocessed).length === 0) return reply;
        return { ...reply, body: JSON.stringify({ ...(JSON.parse(reply.body) as object), UnprocessedItems: throttled.unprocessed }) };
      }
      default:
        return this.forward(call);
    }
  }

  close(): Promise<void> {
    this.client.destroy();
    return this.dynamo.close();
  }

  /**
   * The call as the throttle model lets it through (a batch without the items it hands back), or
   * its refusal. Units as DynamoDB bills a write: one per started KB of the item.
   */
  private throttle(call: AwsCall): { call: AwsCall; unprocessed: Record<string, WriteRequest[]> } | Reply {
    const rate = this.writeUnitsPerSecond;
    const passed = { call, unprocessed: {} };
    if (rate === undefined) return passed;
    const body = call.body as Record<string, any>;
    const unitsOf = (item: Item | undefined) => Math.max(1, Math.ceil(JSON.stringify(item ?? {}).length / 1024));
    if (call.operation === 'BatchWriteItem') {
      const kept: Record<string, WriteRequest[]> = {};
      const unprocessed: Record<string, WriteRequest[]> = {};
      for (const [table, requests] of Object.entries(body.RequestItems as Record<string, WriteRequest[]>)) {
        for (const request of requests) {
          const item = request.PutRequest?.Item ?? request.DeleteRequest?.Key;
          const taken = this.take(table, item, unitsOf(item), rate);
          ((taken ? kept : unprocessed)[table] ??= []).push(request);
        }
      }
      const handedBack = Object.values(unprocessed).reduce((sum, requests) => sum + requests.length, 0);
      if (handedBack === 0) return passed;
      if (Object.keys(kept).length === 0) return this.refuse();
      this.throttled.items += handedBack;
      const narrowed = { ...body, RequestItems: kept };
      return { call: { ...call, body: narrowed, raw: JSON.stringify(narrowed) }, unprocessed };
    }
    if (!['PutItem', 'UpdateItem', 'DeleteItem'].includes(call.operation)) return passed;
    const item = body.Item ?? body.Key;
    return this.take(body.TableName, item, unitsOf(item), rate) ? passed : this.refuse();
  }

  /** Takes `units` of the partition's write units, if it has them (refilled at `rate` a second, kept for a tenth of a second at most). */
  private take(table: string, item: Item | undefined, units: number, rate: number): boolean {
    const partitionKey = this.table(table).keys[0];
    const id = `${table}\u0000${JSON.stringify(item?.[partitionKey])}`;
    const now = performance.now();
    const most = rate / 10;
    const held = this.partitions.get(id) ?? { units: most, at: now };
    held.units = Math.min(most, held.units + ((now - held.at) / 1000) * rate);
    held.at = now;
    this.partitions.set(id, held);
    if (held.units < units) return false;
    held.units -= units;
    return true;
  }

  private refuse(): Reply {
    this.throttled.calls += 1;
    return {
      status: 400,
      headers: { 'content-type': 'application/x-amz-json-1.0' },
      body: JSON.stringify({
        __type: 'com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException',
        message: 'The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.',
      }),
    };
  }

  private keyOf(table: string, item: Item): Item {
    return Object.fromEntries(this.table(table).keys.map((name) => [name, item[name]]));
  }

  private async write(writes: Array<{ table: string; key: Item; put?: Item; remove?: boolean }>, call: AwsCall): Promise<Reply> {
    const ids = writes.map((w) => `${w.table}\u0000${JSON.stringify(w.key)}`).sort();
    const release = await this.lock(ids);
    try {
      const before = await this.read(writes);
      const reply = await this.forward(call);
      if (reply.status !== 200) return reply;
      const after = await this.read(writes.filter((w) => !w.put && !w.remove));
      writes.forEach((w, i) => {
        const old = before[i];
        const image = w.remove ? undefined : w.put ?? after.shift();
        if (old === undefined && image === undefined) return;
        if (image !== undefined && isDeepStrictEqual(old, image)) return;
        this.record(w.table, w.key, old === undefined ? 'INSERT' : image === undefined ? 'REMOVE' : 'MODIFY', image);
      });
      return reply;
    } finally {
      release();
    }
  }

  private async read(writes: Array<{ table: string; key: Item }>): Promise<Array<Item | undefined>> {
    return Promise.all(
      writes.map(async (w) => (await this.client.send(new GetItemCommand({ TableName: w.table, Key: w.key, ConsistentRead: true }))).Item),
    );
  }

  private record(tableName: string, keys: Item, eventName: StreamRecord['eventName'], image: Item | undefined): void {
    const table = this.table(tableName);
    this.sequence += 1n;
    table.stream.push({
      eventID: this.sequence.toString(16),
      eventName,
      eventVersion: '1.1',
      eventSource: 'aws:dynamodb',
      awsRegion: REGION,
      eventSourceARN: table.streamArn,
      dynamodb: {
        ApproximateCreationDateTime: Math.floor(this.clock.now() / 1000),
        Keys: keys,
        ...(image ? { NewImage: image } : {}),
        SequenceNumber: this.sequence.toString(),
        SizeBytes: JSON.stringify(image ?? keys).length,
        StreamViewType: 'NEW_IMAGE',
      },
    });
    for (const listener of table.listeners) listener();
  }

  private async lock(ids: string[]): Promise<() => void> {
    const previous = ids.map((id) => this.locks.get(id) ?? Promise.resolve());
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    for (const id of ids) this.locks.set(id, held);
    await Promise.all(previous);
    return () => {
      for (const id of ids) if (this.locks.get(id) === held) this.locks.delete(id);
      release();
    };
  }

  private async forward(call: AwsCall): Promise<Reply> {
    const response = await fetch(this.dynamo.endpoint, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-amz-json-1.0',
        'x-amz-target': `DynamoDB_20120810.${call.operation}`,
        'x-amz-date': call.headers['x-amz-date'] ?? '',
        authorization: call.headers.authorization ?? '',
      },
      body: call.raw,
    });
    return { status: response.status, body: await response.text(), headers: { 'content-type': 'application/x-amz-json-1.0' } };
  }
}

