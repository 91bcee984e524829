import { Duration } from 'aws-cdk-lib';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import type * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import type { SweepEvent } from '../lambdas/handlers/sweep.js';
import type { AskWaiter } from './ask-waiter.js';
import { STREAM_TIMEOUT } from './doors-api.js';
import { GatewayFunction } from './gateway-function.js';
import type { Store } from './store.js';
import type { ThreadQueue } from './thread-queue.js';

export interface SweepProps {
  store: Store;
  threadQueue: ThreadQueue;
  askWaiter: AskWaiter;
  /** Minutes between two sweeps (`arrivalSweepMinutes`). */
  everyMinutes: number;
  logRetention: logs.RetentionDays;
  environment: Record<string, string>;
}

/**
 * A request noted longer ago than this is of a door that is gone: no door's invocation outlives
 * its function's timeout, and a minute more covers a write still on its way and clock skew. So a
 * door that is merely slow never has its place taken from under it.
 */
export const ARRIVAL_DEAD_AFTER = STREAM_TIMEOUT.plus(Duration.minutes(1));

/**
 * The sweep of requests whose door died between taking something (a tenant's or a thread's
 * place, the asks an answer closes) and recording their run: no change of a run's item exists
 * for the repair to follow, so a schedule finds them by their arrival notes (the `byKey` index's
 * `arrival#` partitions) and gives back what they took.
 */
export class Sweep extends Construct {
  readonly function: GatewayFunction;
  readonly rule: events.Rule;

  constructor(scope: Construct, id: string, props: SweepProps) {
    super(scope, id);
    this.function = new GatewayFunction(this, 'Sweep', {
      handler: 'sweep',
      description: 'funduq: gives back what requests whose door died took, fails runs whose dispatcher was lost, seals the audit log and deletes what retention ended',
      timeout: Duration.seconds(60),
      memorySize: 256,
      logRetention: props.logRetention,
      environment: props.environment,
    });
    const fn = this.function.function;
    const input: SweepEvent = { olderThanSeconds: ARRIVAL_DEAD_AFTER.toSeconds() };
    this.rule = new events.Rule(this, 'Schedule', {
      description: 'funduq: the sweep of requests that died before recording their run',
      schedule: events.Schedule.rate(Duration.minutes(props.everyMinutes)),
      // A sweep that failed is done again by the next one: nothing is retried in between.
      targets: [new targets.LambdaFunction(fn, { event: events.RuleTargetInput.fromObject(input), retryAttempts: 0 })],
    });
    // It lists the notes (Query on the byKey index), reads their runs and the runs they answer
    // (GetItem), gives back places and opens asks again (UpdateItem), drops an abandoned thread
    // and the notes (DeleteItem), arms the timers of asks opened again, and hands an interjection
    // its door never handed over to the thread queue.
    props.store.runs.grant(fn, 'dynamodb:Query', 'dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem', 'dynamodb:PutItem');
    props.askWaiter.grantArm(fn);
    props.threadQueue.grantSend(fn);
    // Lapsed leases (Query on byKey's `lease#` partitions, each ended by a DeleteItem): their runs
    // fail `dispatch_lost` as a dead letter's do (their end, places, usage record: UpdateItem,
    // PutItem; their log read and its RUN_ERROR appended), and their thread's message goes.
    props.store.runEvents.grant(fn, 'dynamodb:Query', 'dynamodb:PutItem');
    props.threadQueue.grantRelease(fn);
    props.threadQueue.grantRedeliver(fn);
    // Retention's pass, once an hour: it deletes what retention ended (BatchWriteItem on both
    // tables), and on finishing a deletion cut short reads whether its audit record was written
    // (BatchGetItem).
    props.store.runs.grant(fn, 'dynamodb:BatchWriteItem', 'dynamodb:BatchGetItem');
    props.store.runEvents.grant(fn, 'dynamodb:BatchWriteItem');
  }
}
