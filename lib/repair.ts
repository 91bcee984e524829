import { Duration } from 'aws-cdk-lib';
import type * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { recordChanges } from './record-changes.js';
import type * as logs from 'aws-cdk-lib/aws-logs';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { parkedChanges } from './alarm.js';
import type { AskWaiter } from './ask-waiter.js';
import { GatewayFunction } from './gateway-function.js';
import type { Store } from './store.js';
import type { ThreadQueue } from './thread-queue.js';

export interface RepairProps {
  store: Store;
  threadQueue: ThreadQueue;
  askWaiter: AskWaiter;
  logRetention: logs.RetentionDays;
  environment: Record<string, string>;
}

/** What a repair acts on: a run recorded queued (its message), or settled (the rest of its settle). */
const REPAIRED_STATUSES = ['queued', 'completed', 'failed', 'cancelled'];

const PARKED_DESCRIPTION = 'funduq repair: changes of the record were given up on (a run may be left without its message or its settle)';

/**
 * The record's repair: a second reader of the runs table's stream (DynamoDB keeps a change 24
 * hours and hands each one at least once, in order per item) that does again, from the record,
 * what a change calls for, in case its writer died first: a queued run's thread-queue message
 * (deduplicated by run id for 5 minutes, and harmless after), a settle's places, waiting run,
 * ask timer and closing events. A change that keeps failing is retried, then parked in a queue
 * that raises an alarm.
 */
export class Repair extends Construct {
  readonly function: GatewayFunction;
  readonly failures: sqs.Queue;
  readonly failuresAlarm: cloudwatch.Alarm;

  constructor(scope: Construct, id: string, props: RepairProps) {
    super(scope, id);
    this.function = new GatewayFunction(this, 'Repair', {
      handler: 'repair',
      description: 'funduq: does again what a change of a run calls for, after a function died',
      timeout: Duration.seconds(60),
      memorySize: 256,
      logRetention: props.logRetention,
      environment: props.environment,
    });
    const parked = parkedChanges(this, PARKED_DESCRIPTION);
    this.failures = parked.queue;
    this.failuresAlarm = parked.alarm;
    const fn = this.function.function;
    fn.addEventSource(
      recordChanges(props.store.runs, {
        startingPosition: lambda.StartingPosition.TRIM_HORIZON,
        retryAttempts: 10,
        parked: this.failures,
        // Only run items, and only the statuses a repair acts on: threads, agents, running runs are not invoked for.
        filter: {
          eventName: lambda.FilterRule.or('INSERT', 'MODIFY'),
          dynamodb: { NewImage: { status: { S: lambda.FilterRule.or(...REPAIRED_STATUSES) } } },
        },
      }),
    );
    // It reads the run, its thread and its agent, gives back places, sets the waiting run, clears
    // the closing events and charges the tenant (UpdateItem), writes the usage record (PutItem),
    // and appends the closing events (run_events, PutItem); it sends a queued run's message, and
    // deletes a settled run's (DeleteMessage, by the receipt handle its dispatch recorded).
    // It also reads the audit records the run's record holds the facts of (BatchGetItem) and writes those missing (PutItem).
    props.store.runs.grant(fn, 'dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:UpdateItem', 'dynamodb:PutItem');
    props.store.runEvents.grant(fn, 'dynamodb:PutItem');
    props.threadQueue.grantSend(fn);
    props.threadQueue.grantRelease(fn);
    props.askWaiter.grantArm(fn);

  }
}
