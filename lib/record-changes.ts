import { Duration } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { DynamoEventSource, SqsDlq } from 'aws-cdk-lib/aws-lambda-event-sources';
import type * as sqs from 'aws-cdk-lib/aws-sqs';

export interface RecordChangesProps {
  /** TRIM_HORIZON for a reader that must see every change kept (24 hours); LATEST for news only. */
  startingPosition: lambda.StartingPosition;
  retryAttempts: number;
  /** Where a change the function kept failing on is parked (`parkedChanges`). */
  parked: sqs.IQueue;
  /** The stream records the function is invoked for (Lambda event filtering: the rest cost nothing). */
  filter: Record<string, unknown>;
}

/**
 * A reader of a table's stream, as every reader of the record's changes is set up: batches of up
 * to 100 in a 1-second window, a failing batch bisected down to the change that fails (with
 * partial-batch responses, the changes before it are not handed again), and that change parked
 * after its retries rather than holding its shard for the stream's 24 hours.
 */
export function recordChanges(table: dynamodb.ITable, props: RecordChangesProps): DynamoEventSource {
  return new DynamoEventSource(table, {
    startingPosition: props.startingPosition,
    batchSize: 100,
    maxBatchingWindow: Duration.seconds(1),
    bisectBatchOnError: true,
    retryAttempts: props.retryAttempts,
    reportBatchItemFailures: true,
    onFailure: new SqsDlq(props.parked),
    filters: [lambda.FilterCriteria.filter(props.filter)],
  });
}
