import { Duration } from 'aws-cdk-lib';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import type * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import type { AskWaiter } from './ask-waiter.js';
import { GatewayFunction } from './gateway-function.js';
import type { Store } from './store.js';
import type { ThreadQueue } from './thread-queue.js';

/**
 * Lambda's ceiling. A run longer than this fails `provider_timeout` (a limit of this version);
 * the thread queue's visibility timeout is derived from it.
 */
export const DISPATCHER_TIMEOUT = Duration.minutes(15);

export interface DispatcherProps {
  store: Store;
  threadQueue: ThreadQueue;
  askWaiter: AskWaiter;
  /** At most this many runs are dispatched at once, across all threads (2 to 1000: SQS maximum concurrency's range). */
  reservedConcurrency: number;
  logRetention: logs.RetentionDays;
  environment: Record<string, string>;
}

/**
 * Turns one thread-queue message into one run: marks it running, relays the provider's events
 * into the record, settles it and returns, which deletes the message and releases the thread's
 * next run.
 */
export class Dispatcher extends Construct {
  readonly function: GatewayFunction;

  constructor(scope: Construct, id: string, props: DispatcherProps) {
    super(scope, id);
    if (!Number.isInteger(props.reservedConcurrency) || props.reservedConcurrency < 2 || props.reservedConcurrency > 1000) {
      throw new Error(`dispatcher reserved concurrency must be an integer from 2 to 1000, got ${props.reservedConcurrency}`);
    }
    this.function = new GatewayFunction(this, 'Dispatcher', {
      handler: 'dispatcher',
      description: 'funduq: dispatches one queued run to its agent provider',
      timeout: DISPATCHER_TIMEOUT,
      // A dispatcher waits on its agent for most of a run: billed GB-seconds, not CPU, are its cost
      // (measured in `npm run bench`, scenario 6: 0.6 s of CPU per 10 s run fits 256 MB).
      memorySize: 256,
      logRetention: props.logRetention,
      environment: props.environment,
      reservedConcurrentExecutions: props.reservedConcurrency,
    });
    const fn = this.function.function;
    fn.addEventSource(
      new SqsEventSource(props.threadQueue.queue, {
        // One message is one run: a batch would hold a thread's later runs behind an earlier one's failure.
        batchSize: 1,
        reportBatchItemFailures: true,
        // The poller never invokes beyond the reserved concurrency, so no message waits out its
        // visibility timeout behind a throttled invoke (AWS: "maximum concurrency for SQS event sources").
        maxConcurrency: props.reservedConcurrency,
      }),
    );
    props.store.runs.grantReadWriteData(fn);
    props.store.runEvents.grantReadWriteData(fn);
    props.askWaiter.grantArm(fn);
  }
}
