import { mkdir } from 'node:fs/promises';
import {
  CreateTableCommand,
  DynamoDBClient,
  waitUntilTableExists,
  type CreateTableCommandInput,
} from '@aws-sdk/client-dynamodb';
import { RUNS_TABLE, RUN_EVENTS_TABLE, type TableNames } from '../aws/dynamodb/tables.js';
import { DynaliteThread } from './dynalite-thread.js';

export interface LocalDynamo {
  /** Where it listens, for clients in other processes (and a look at the record from outside). */
  endpoint: string;
  /** How a client in this process reaches it (see `inProcessDynamoClient`). */
  transport: DynaliteThread;
  /** Stops taking requests, lets those under way finish, and closes the database. */
  close(): Promise<void>;
}

/** DynamoDB in this process, on a thread of its own: LevelDB under `path`, or in memory when no path is given. */
export async function startDynalite(options: { path?: string; onLost?: (error: Error) => void } = {}): Promise<LocalDynamo> {
  if (options.path) await mkdir(options.path, { recursive: true });
  const transport = await DynaliteThread.start(options.path, options.onLost);
  return { endpoint: `http://127.0.0.1:${transport.port}`, transport, close: () => transport.close() };
}

export function localDynamoClient(endpoint: string): DynamoDBClient {
  return new DynamoDBClient({
    endpoint,
    region: 'local',
    // dynalite checks that a request is signed, not by whom.
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    // A local server either answers or is gone; more attempts only delay the error.
    maxAttempts: 3,
  });
}

/**
 * A client for the dynalite of this process, through its thread's message port (see
 * `DynaliteThread`). dynalite checks that a request carries a signature's parts, not the
 * signature, so the signer writes fixed ones instead of hashing every body.
 */
export function inProcessDynamoClient(dynamo: LocalDynamo): DynamoDBClient {
  return new DynamoDBClient({
    endpoint: dynamo.endpoint,
    region: 'local',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 3,
    requestHandler: dynamo.transport,
    signer: { sign: async (request) => stampSignature(request) },
  });
}

function stampSignature<T extends { headers: Record<string, string> }>(request: T): T {
  const date = new Date().toISOString().replace(/[-:]|\.\d{3}/g, '');
  request.headers['x-amz-date'] = date;
  request.headers.authorization = `AWS4-HMAC-SHA256 Credential=local/${date.slice(0, 8)}/local/dynamodb/aws4_request, SignedHeaders=host;x-amz-date, Signature=local`;
  return request;
}

/** Creates the runs and run_events tables unless they exist, and waits until both are ACTIVE. */
export async function ensureTables(client: DynamoDBClient, tables: TableNames): Promise<void> {
  await Promise.all([createTable(client, runsTable(tables.runs)), createTable(client, runEventsTable(tables.runEvents))]);
  await Promise.all(
    [tables.runs, tables.runEvents].map((TableName) =>
      waitUntilTableExists({ client, maxWaitTime: 60, minDelay: 1, maxDelay: 2 }, { TableName }),
    ),
  );
}

async function createTable(client: DynamoDBClient, input: CreateTableCommandInput): Promise<void> {
  try {
    await client.send(new CreateTableCommand(input));
  } catch (err) {
    // The table is there already (a restart over the same data directory).
    if ((err as { name?: string }).name !== 'ResourceInUseException') throw err;
  }
}

function runsTable(TableName: string): CreateTableCommandInput {
  const { partitionKey, sortKey, byThread, byTenant, byKey } = RUNS_TABLE;
  return {
    TableName,
    BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: [
      { AttributeName: partitionKey, AttributeType: 'S' },
      { AttributeName: sortKey, AttributeType: 'S' },
      { AttributeName: byThread.partitionKey, AttributeType: 'S' },
      { AttributeName: byThread.sortKey, AttributeType: 'N' },
      { AttributeName: byTenant.partitionKey, AttributeType: 'S' },
      { AttributeName: byTenant.sortKey, AttributeType: 'S' },
      { AttributeName: byKey.partitionKey, AttributeType: 'S' },
      { AttributeName: byKey.sortKey, AttributeType: 'S' },
    ],
    KeySchema: [
      { AttributeName: partitionKey, KeyType: 'HASH' },
      { AttributeName: sortKey, KeyType: 'RANGE' },
    ],
    GlobalSecondaryIndexes: [byThread, byTenant, byKey].map((index) => ({
      IndexName: index.indexName,
      KeySchema: [
        { AttributeName: index.partitionKey, KeyType: 'HASH' },
        { AttributeName: index.sortKey, KeyType: 'RANGE' },
      ],
      Projection: { ProjectionType: 'ALL' },
    })),
  };
}

function runEventsTable(TableName: string): CreateTableCommandInput {
  const { partitionKey, sortKey } = RUN_EVENTS_TABLE;
  return {
    TableName,
    BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: [
      { AttributeName: partitionKey, AttributeType: 'S' },
      { AttributeName: sortKey, AttributeType: 'N' },
    ],
    KeySchema: [
      { AttributeName: partitionKey, KeyType: 'HASH' },
      { AttributeName: sortKey, KeyType: 'RANGE' },
    ],
  };
}
