import { Duration, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
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
  /** At most this many runs are dispatched from the thread queue at once, across all threads (2 to 1000: SQS maximum concurrency's range). */
  maxConcurrency: number;
  /**
   * Opt-in: concurrency reserved for the dispatcher. Unset, none is: Lambda keeps 100 of an
   * account's concurrency unreserved, so any reservation is refused on an account whose quota is
   * below 100 plus it (a new account's default is 10).
   */
  reservedConcurrency?: number;
  logRetention: logs.RetentionDays;
  environment: Record<string, string>;
  /** The functions agents of the `lambda` kind run on (names or ARNs): the only ones the dispatcher may invoke. */
  agentFunctions?: readonly string[];
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
    if (!Number.isInteger(props.maxConcurrency) || props.maxConcurrency < 2 || props.maxConcurrency > 1000) {
      throw new Error(`the dispatcher's maximum concurrency must be an integer from 2 to 1000, got ${props.maxConcurrency}`);
    }
    if (props.reservedConcurrency !== undefined && props.reservedConcurrency <= props.maxConcurrency) {
      throw new Error(
        `the dispatcher's reserved concurrency (${props.reservedConcurrency}) must be more than its maximum concurrency (${props.maxConcurrency}): interjections are dispatched beside the queue's runs`,
      );
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
        // Bounds dispatch without reserving concurrency: the poller invokes no more than this many
        // at once (AWS: "maximum concurrency for SQS event sources"), and a throttled invoke is
        // retried while the message stays invisible (the queue's visibility is 6× this timeout).
        maxConcurrency: props.maxConcurrency,
      }),
    );
    props.store.grantRecord(fn);
    props.askWaiter.grantArm(fn);
    // An interjection whose run settled before it was dispatched becomes the thread's next run.
    props.threadQueue.grantSend(fn);
    grantAgentInvoke(fn, props.agentFunctions);
  }
}

/** The functions agents of the `lambda` kind run on (names or ARNs): the only ones a function that relays runs may invoke. */
export function grantAgentInvoke(fn: lambda.IFunction, agentFunctions: readonly string[] | undefined): void {
  if (!agentFunctions || agentFunctions.length === 0) return;
  fn.addToRolePolicy(
    new iam.PolicyStatement({
      // InvokeWithResponseStream is authorised by lambda:InvokeFunction; a qualifier is a suffix of the ARN.
      actions: ['lambda:InvokeFunction'],
      resources: agentFunctions.flatMap((name) => {
        const arn = functionArn(Stack.of(fn), name);
        return [arn, `${arn}:*`];
      }),
    }),
  );
}

/** A function's ARN from its name, partial ARN (`account:function:name`) or ARN, in the stack's account and region. */
function functionArn(stack: Stack, name: string): string {
  if (name.startsWith('arn:')) return name;
  const partial = /^(\d{12}):function:(.+)$/.exec(name);
  if (partial) return `arn:${stack.partition}:lambda:${stack.region}:${partial[1]}:function:${partial[2]}`;
  return `arn:${stack.partition}:lambda:${stack.region}:${stack.account}:function:${name}`;
}
