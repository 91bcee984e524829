import { RemovalPolicy } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { RUN_EVENTS_TABLE, RUNS_TABLE } from '../lambdas/adapters/aws/dynamodb/tables.js';

/**
 * The calls the store adapter makes (`lambdas/adapters/aws/dynamodb/store/`), and nothing
 * more: no transactions, no stream reads (a stream's event source is granted on its own). Scan
 * serves the admin's agent deletion (are runs of it unsettled?), BatchGetItem the audit log's
 * export (a segment's records by their keys).
 */
const READS = ['dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:Query', 'dynamodb:Scan'];
const WRITES = ['dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem', 'dynamodb:BatchWriteItem'];

export interface StoreProps {
  /** Keep the tables when the stack is deleted (the record outlives the stack by default). */
  retainOnDelete: boolean;
}

/**
 * The record: `runs` (threads, runs with their asks, agents, push configs) and `run_events`
 * (`runId`, `seq`). Keys and indexes come from the store adapter's table shapes, so the
 * adapter, the local runtime and this construct cannot drift. Streams carry new images to the
 * stream handler; items carrying `ttl` are removed by DynamoDB when the retention has passed.
 */
export class Store extends Construct {
  readonly runs: dynamodb.Table;
  readonly runEvents: dynamodb.Table;

  constructor(scope: Construct, id: string, props: StoreProps) {
    super(scope, id);
    const common = {
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      stream: dynamodb.StreamViewType.NEW_IMAGE,
      encryption: dynamodb.TableEncryption.AWS_MANAGED,
      removalPolicy: props.retainOnDelete ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    };

    this.runs = new dynamodb.Table(this, 'Runs', {
      ...common,
      partitionKey: { name: RUNS_TABLE.partitionKey, type: dynamodb.AttributeType.STRING },
      sortKey: { name: RUNS_TABLE.sortKey, type: dynamodb.AttributeType.STRING },
      timeToLiveAttribute: RUNS_TABLE.timeToLive,
    });
    this.runs.addGlobalSecondaryIndex({
      indexName: RUNS_TABLE.byThread.indexName,
      partitionKey: { name: RUNS_TABLE.byThread.partitionKey, type: dynamodb.AttributeType.STRING },
      // Run.arrival: the thread's arrival counter.
      sortKey: { name: RUNS_TABLE.byThread.sortKey, type: dynamodb.AttributeType.NUMBER },
      projectionType: dynamodb.ProjectionType.ALL,
    });
    this.runs.addGlobalSecondaryIndex({
      indexName: RUNS_TABLE.byTenant.indexName,
      partitionKey: { name: RUNS_TABLE.byTenant.partitionKey, type: dynamodb.AttributeType.STRING },
      // Run.createdAt: an ISO-8601 instant, which sorts as a string.
      sortKey: { name: RUNS_TABLE.byTenant.sortKey, type: dynamodb.AttributeType.STRING },
      projectionType: dynamodb.ProjectionType.ALL,
    });

    this.runs.addGlobalSecondaryIndex({
      indexName: RUNS_TABLE.byKey.indexName,
      // Overloaded: each listing of the record in partitions of its own (see RUNS_TABLE.byKey).
      partitionKey: { name: RUNS_TABLE.byKey.partitionKey, type: dynamodb.AttributeType.STRING },
      sortKey: { name: RUNS_TABLE.byKey.sortKey, type: dynamodb.AttributeType.STRING },
      projectionType: dynamodb.ProjectionType.ALL,
    });

    this.runEvents = new dynamodb.Table(this, 'RunEvents', {
      ...common,
      partitionKey: { name: RUN_EVENTS_TABLE.partitionKey, type: dynamodb.AttributeType.STRING },
      sortKey: { name: RUN_EVENTS_TABLE.sortKey, type: dynamodb.AttributeType.NUMBER },
      timeToLiveAttribute: RUN_EVENTS_TABLE.timeToLive,
    });
  }

  /** What a function that keeps the record needs (the doors, the dispatcher): reads and writes, both tables, their indexes. */
  grantRecord(grantee: iam.IGrantable): void {
    for (const table of [this.runs, this.runEvents]) table.grant(grantee, ...READS, ...WRITES);
  }
}
