import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DeleteCommand, DynamoDBDocumentClient, GetCommand, PutCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { LinkConnection, LinkRoster } from '../../../core/ports.js';
import { RUNS_TABLE } from '../dynamodb/tables.js';

/**
 * API Gateway closes a WebSocket connection after 2 hours; an index item of a link outlives that
 * by this much, so one whose `$disconnect` never came is removed by DynamoDB's TTL.
 */
const LINK_TTL_SECONDS = 2 * 3600 + 15 * 60;
const ITEM = 'link';

type Item = Record<string, unknown>;

/**
 * The provider link's roster in the runs table, for functions that share no memory: a link per
 * connection (`linkconn#<id>`), a provider's current link (`linkprovider#<id>`), the links serving
 * an agent (`linkagent#<agent>`, one item per link), the runs waiting for an agent's provider
 * (`linkwait#<agent>`, one item per run, with when it began to wait) and the runs offered to or
 * held by a provider (`linkheld#<provider>`, one item per run). Link items carry a TTL; the run
 * lists are dropped as their runs settle. Reads are consistent: a frame handled right after the
 * handshake finds its link.
 */
export class DynamoLinkRoster implements LinkRoster {
  private readonly doc: DynamoDBDocumentClient;

  constructor(
    private readonly options: { client: DynamoDBClient; table: string; now: () => number },
  ) {
    this.doc = DynamoDBDocumentClient.from(options.client, { marshallOptions: { removeUndefinedValues: true } });
  }

  async join(connection: LinkConnection): Promise<LinkConnection | undefined> {
    await this.put({ ...connectionKey(connection.connectionId), ...connection, ttl: this.ttl() });
    const before = await this.doc.send(
      new UpdateCommand({
        TableName: this.options.table,
        Key: providerLinkKey(connection.providerId),
        UpdateExpression: 'SET #connectionId = :connectionId, #ttl = :ttl',
        ExpressionAttributeNames: { '#connectionId': 'connectionId', '#ttl': RUNS_TABLE.timeToLive },
        ExpressionAttributeValues: { ':connectionId': connection.connectionId, ':ttl': this.ttl() },
        ReturnValues: 'UPDATED_OLD',
      }),
    );
    const previous = before.Attributes?.connectionId as string | undefined;
    if (previous === undefined || previous === connection.connectionId) return undefined;
    // The replaced link is forgotten here, so its own `$disconnect` later finds nothing to do.
    return this.forget(previous);
  }

  async leave(connectionId: string): Promise<LinkConnection | undefined> {
    const connection = await this.forget(connectionId);
    if (!connection) return undefined;
    await this.delete(providerLinkKey(connection.providerId), '#connectionId = :connectionId', { '#connectionId': 'connectionId' }, { ':connectionId': connectionId });
    return connection;
  }

  async get(connectionId: string): Promise<LinkConnection | undefined> {
    const item = await this.read(connectionKey(connectionId));
    return item && connectionOf(item);
  }

  async ofProvider(providerId: string): Promise<LinkConnection | undefined> {
    const link = await this.read(providerLinkKey(providerId));
    return typeof link?.connectionId === 'string' ? this.get(link.connectionId) : undefined;
  }

  async serve(connectionId: string, agents: string[]): Promise<void> {
    const before = await this.setOnLink(connectionId, 'agents', agents);
    if (!before) return;
    const old = (before.agents as string[] | undefined) ?? [];
    for (const agentId of agents) await this.put({ ...servingKey(agentId, connectionId), connectionId, ttl: this.ttl() });
    for (const agentId of old.filter((a) => !agents.includes(a))) await this.delete(servingKey(agentId, connectionId));
  }

  /** Least busy first (runs on offer or held); providers of equal load in a random order, so they take turns. */
  async serving(agentId: string): Promise<LinkConnection[]> {
    const serving: { connection: LinkConnection; load: number; turn: number }[] = [];
    for (const item of await this.query(`linkagent#${agentId}`)) {
      const connection = await this.get(String(item.connectionId));
      if (!connection || !connection.agents.includes(agentId)) {
        // A link that closed or stopped serving the agent while this item was written.
        await this.delete(servingKey(agentId, String(item.connectionId)));
        continue;
      }
      serving.push({ connection, load: (await this.held(connection.providerId)).length, turn: Math.random() });
    }
    return serving.sort((a, b) => a.load - b.load || a.turn - b.turn).map((s) => s.connection);
  }

  async wait(agentId: string, runId: string): Promise<void> {
    // A run waiting again keeps its place in line.
    await this.doc.send(
      new UpdateCommand({
        TableName: this.options.table,
        Key: { pk: `linkwait#${agentId}`, sk: runId },
        UpdateExpression: 'SET #runId = :runId, #since = if_not_exists(#since, :now)',
        ExpressionAttributeNames: { '#runId': 'runId', '#since': 'since' },
        ExpressionAttributeValues: { ':runId': runId, ':now': this.options.now() },
      }),
    );
  }

  async unwait(agentId: string, runId: string): Promise<void> {
    await this.delete({ pk: `linkwait#${agentId}`, sk: runId });
  }

  async waiting(agentId: string): Promise<string[]> {
    const items = await this.query(`linkwait#${agentId}`);
    return items.sort((a, b) => Number(a.since) - Number(b.since)).map((item) => String(item.runId));
  }

  async hold(providerId: string, runId: string): Promise<void> {
    await this.put({ pk: `linkheld#${providerId}`, sk: runId, runId });
  }

  async drop(providerId: string, runId: string): Promise<void> {
    await this.delete({ pk: `linkheld#${providerId}`, sk: runId });
  }

  async held(providerId: string): Promise<string[]> {
    return (await this.query(`linkheld#${providerId}`)).map((item) => String(item.runId));
  }

  /**
   * Keeps a link's welcome until its provider's `hello` asks for it: API Gateway sends nothing on
   * a connection before its `$connect` returns.
   */
  async keepWelcome(connectionId: string, welcome: string): Promise<void> {
    await this.setOnLink(connectionId, 'welcome', welcome);
  }

  /** Sets an attribute of a link's item; the item as it was, or undefined when the link is gone (left, or replaced). */
  private async setOnLink(connectionId: string, name: string, value: unknown): Promise<Item | undefined> {
    try {
      const before = await this.doc.send(
        new UpdateCommand({
          TableName: this.options.table,
          Key: connectionKey(connectionId),
          UpdateExpression: 'SET #name = :value',
          ConditionExpression: 'attribute_exists(pk)',
          ExpressionAttributeNames: { '#name': name },
          ExpressionAttributeValues: { ':value': value },
          ReturnValues: 'ALL_OLD',
        }),
      );
      return before.Attributes;
    } catch (error) {
      if (isConditionFailure(error)) return undefined;
      throw error;
    }
  }

  async welcomeOf(connectionId: string): Promise<string | undefined> {
    const welcome = (await this.read(connectionKey(connectionId)))?.welcome;
    return typeof welcome === 'string' ? welcome : undefined;
  }

  /**
   * Keeps a `part` of a larger frame (each message is an invocation of its own, maybe in another
   * function instance) and returns the whole frame's JSON once every part is in. Two invocations
   * that complete it at once both return it: a frame handled twice changes nothing.
   */
  async takePart(connectionId: string, part: { id: string; index: number; count: number; data: string }): Promise<string | undefined> {
    const pk = `linkpart#${connectionId}#${part.id}`;
    // Parts of a frame come within moments of each other; an unfinished frame's go by TTL.
    await this.put({ pk, sk: String(part.index).padStart(3, '0'), data: part.data, ttl: Math.floor(this.options.now() / 1000) + 15 * 60 });
    const pieces = await this.query(pk);
    if (pieces.length < part.count) return undefined;
    for (const piece of pieces) await this.delete({ pk, sk: piece.sk });
    return pieces.sort((a, b) => String(a.sk).localeCompare(String(b.sk))).map((piece) => String(piece.data)).join('');
  }

  /** Removes a link and its serving items; the link as it was, if it was there. */
  private async forget(connectionId: string): Promise<LinkConnection | undefined> {
    const removed = await this.doc.send(new DeleteCommand({ TableName: this.options.table, Key: connectionKey(connectionId), ReturnValues: 'ALL_OLD' }));
    if (!removed.Attributes) return undefined;
    const connection = connectionOf(removed.Attributes);
    for (const agentId of connection.agents) await this.delete(servingKey(agentId, connectionId));
    return connection;
  }

  private ttl(): number {
    return Math.floor(this.options.now() / 1000) + LINK_TTL_SECONDS;
  }

  private async read(key: Item): Promise<Item | undefined> {
    const { Item: item } = await this.doc.send(new GetCommand({ TableName: this.options.table, Key: key, ConsistentRead: true }));
    // TTL removes an expired item only eventually.
    if (item && typeof item.ttl === 'number' && item.ttl * 1000 <= this.options.now()) return undefined;
    return item;
  }

  private async put(item: Item): Promise<void> {
    await this.doc.send(new PutCommand({ TableName: this.options.table, Item: item }));
  }

  private async delete(key: Item, condition?: string, names?: Record<string, string>, values?: Item): Promise<void> {
    try {
      await this.doc.send(
        new DeleteCommand({ TableName: this.options.table, Key: key, ConditionExpression: condition, ExpressionAttributeNames: names, ExpressionAttributeValues: values }),
      );
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
    }
  }

  private async query(pk: string): Promise<Item[]> {
    const items: Item[] = [];
    let start: Item | undefined;
    do {
      const page = await this.doc.send(
        new QueryCommand({
          TableName: this.options.table,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': pk },
          ConsistentRead: true,
          ExclusiveStartKey: start,
        }),
      );
      items.push(...(page.Items ?? []));
      start = page.LastEvaluatedKey;
    } while (start);
    return items;
  }
}

function connectionKey(connectionId: string): Item {
  return { pk: `linkconn#${connectionId}`, sk: ITEM };
}

function providerLinkKey(providerId: string): Item {
  return { pk: `linkprovider#${providerId}`, sk: ITEM };
}

function servingKey(agentId: string, connectionId: string): Item {
  return { pk: `linkagent#${agentId}`, sk: connectionId };
}

function connectionOf(item: Item): LinkConnection {
  return { connectionId: String(item.connectionId), providerId: String(item.providerId), agents: [...((item.agents as string[] | undefined) ?? [])] };
}

function isConditionFailure(error: unknown): boolean {
  return (error as { name?: string }).name === 'ConditionalCheckFailedException';
}
