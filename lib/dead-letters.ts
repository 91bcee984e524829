import { Duration } from 'aws-cdk-lib';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import type * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { GatewayFunction } from './gateway-function.js';
import type { Store } from './store.js';
import type { ThreadQueue } from './thread-queue.js';

/** The dead letters' function's timeout; its queue's visibility is six times it (`ThreadQueue`). */
export const DEAD_LETTERS_TIMEOUT = Duration.seconds(30);

export interface DeadLettersProps {
  store: Store;
  threadQueue: ThreadQueue;
  logRetention: logs.RetentionDays;
  environment: Record<string, string>;
}

/**
 * Reads the thread queue's dead-letter queue: a message there has used up its receives, so no
 * dispatcher will run its run; the function fails that run `dispatch_failed` and gives back its
 * places, so nothing accepted stays queued for ever. The queue keeps its alarm: a dead letter is
 * still news to the operator.
 */
export class DeadLetters extends Construct {
  readonly function: GatewayFunction;

  constructor(scope: Construct, id: string, props: DeadLettersProps) {
    super(scope, id);
    this.function = new GatewayFunction(this, 'DeadLetters', {
      handler: 'dead-letters',
      description: 'funduq: fails the runs whose thread-queue messages were dead-lettered',
      timeout: DEAD_LETTERS_TIMEOUT,
      memorySize: 256,
      logRetention: props.logRetention,
      environment: props.environment,
    });
    const fn = this.function.function;
    fn.addEventSource(new SqsEventSource(props.threadQueue.deadLetters, { batchSize: 10, reportBatchItemFailures: true }));
    // It reads the run and its agent, writes the run's end and gives back its places, charges its
    // tenant and writes its usage record (runs); it reads the run's log and appends its RUN_ERROR (run_events).
    props.store.runs.grant(fn, 'dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:PutItem');
    props.store.runEvents.grant(fn, 'dynamodb:Query', 'dynamodb:PutItem');
  }
}
