// Named explicitly: tsc drops a .d.ts from `include` when a .ts of the same name sits beside it.
/// <reference path="./dynalite.d.ts" />
import { mkdir } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import {
  CreateTableCommand,
  DynamoDBClient,
  waitUntilTableExists,
  type CreateTableCommandInput,
} from '@aws-sdk/client-dynamodb';
import dynalite from 'dynalite';
import { RUNS_TABLE, RUN_EVENTS_TABLE, type TableNames } from '../aws/dynamodb/tables.js';

export interface LocalDynamo {
  endpoint: string;
  close(): Promise<void>;
}

/** DynamoDB in this process: LevelDB under `path`, or in memory when no path is given. */
export async function startDynalite(options: { path?: string } = {}): Promise<LocalDynamo> {
  if (options.path) await mkdir(options.path, { recursive: true });
  // dynalite keeps a new table CREATING for 500 ms by default; nothing here needs to see that.
  const server = dynalite({ path: options.path, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve()))),
  };
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
  const { partitionKey, sortKey, byThread, byTenant } = RUNS_TABLE;
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
    ],
    KeySchema: [
      { AttributeName: partitionKey, KeyType: 'HASH' },
      { AttributeName: sortKey, KeyType: 'RANGE' },
    ],
    GlobalSecondaryIndexes: [byThread, byTenant].map((index) => ({
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
