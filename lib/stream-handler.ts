import { Duration } from 'aws-cdk-lib';
import type * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { recordChanges } from './record-changes.js';
import type * as logs from 'aws-cdk-lib/aws-logs';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { parkedChanges } from './alarm.js';
import { STREAM_HANDLER_TIMEOUT_SECONDS } from '../lambdas/runtimes/push-delivery.js';
import { GatewayFunction } from './gateway-function.js';
import type { Store } from './store.js';

export interface StreamHandlerProps {
  store: Store;
  logRetention: logs.RetentionDays;
  environment: Record<string, string>;
}

const PARKED_DESCRIPTION = 'funduq stream handler: changes of the record were given up on (no push notification sent)';

/**
 * Reads the record's changes from both tables' streams (new images) and delivers the A2A push
 * notifications they call for. A batch that keeps failing is bisected, then its record is sent to
 * a dead-letter queue rather than holding the shard for the stream's 24 hours. Its timeout and the
 * push sender's tries are set together (`lambdas/runtimes/push-delivery.ts`).
 */
export class StreamHandler extends Construct {
  readonly function: GatewayFunction;
  readonly failures: sqs.Queue;
  readonly failuresAlarm: cloudwatch.Alarm;

  constructor(scope: Construct, id: string, props: StreamHandlerProps) {
    super(scope, id);
    this.function = new GatewayFunction(this, 'StreamHandler', {
      handler: 'stream-handler',
      description: 'funduq: turns changes of the record into push notifications',
      timeout: Duration.seconds(STREAM_HANDLER_TIMEOUT_SECONDS),
      memorySize: 256,
      logRetention: props.logRetention,
      environment: props.environment,
    });
    const parked = parkedChanges(this, PARKED_DESCRIPTION);
    this.failures = parked.queue;
    this.failuresAlarm = parked.alarm;
    const fn = this.function.function;
    // A run's changes are inserts and updates; events are only ever inserted. Removals (TTL) are nobody's news.
    const changes = [
      { table: props.store.runs, names: ['INSERT', 'MODIFY'] },
      { table: props.store.runEvents, names: ['INSERT'] },
    ];
    for (const { table, names } of changes) {
      fn.addEventSource(
        recordChanges(table, {
          startingPosition: lambda.StartingPosition.LATEST,
          retryAttempts: 3,
          parked: this.failures,
          filter: { eventName: lambda.FilterRule.or(...names) },
        }),
      );
    }
    // It reads a change's events and its task's push configs.
    props.store.runs.grant(fn, 'dynamodb:GetItem', 'dynamodb:Query');
    props.store.runEvents.grant(fn, 'dynamodb:Query');
    // A notification no try delivered is recorded on its push config (an update of an existing item).
    props.store.runs.grant(fn, 'dynamodb:UpdateItem');

  }
}
