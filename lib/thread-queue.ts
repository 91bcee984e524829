import { Duration } from 'aws-cdk-lib';
import type * as iam from 'aws-cdk-lib/aws-iam';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { ALARM_PERIOD, alarmOnAny } from './alarm.js';

/** The thread queue's visibility timeout, in dispatcher timeouts. */
export const VISIBILITY_FACTOR = 6;

export interface ThreadQueueProps {
  /**
   * The dispatcher's Lambda timeout. A message stays invisible while its run is dispatched; if it
   * reappeared before the dispatch returned, a second dispatcher would find the run `running` and
   * fail it `dispatch_lost` while the first one is still at work.
   */
  dispatcherTimeout: Duration;
  /** The timeout of the function that reads the dead-letter queue: that queue's visibility is derived from it, as the thread queue's is. */
  deadLettersTimeout: Duration;
  /** Receives before a message goes to the dead-letter queue. */
  maxReceiveCount: number;
}

/**
 * The inbound gap: one SQS FIFO message group per thread (`MessageGroupId` = thread id,
 * `MessageDeduplicationId` = run id). A group's next message is delivered only once the previous
 * one is deleted, i.e. when the dispatcher returned for the previous run.
 */
export class ThreadQueue extends Construct {
  readonly queue: sqs.Queue;
  readonly deadLetters: sqs.Queue;
  readonly deadLettersAlarm: cloudwatch.Alarm;

  constructor(scope: Construct, id: string, props: ThreadQueueProps) {
    super(scope, id);
    this.deadLetters = new sqs.Queue(this, 'DeadLetters', {
      fifo: true,
      // An event source too: six times its function's timeout, as the thread queue's (see below).
      visibilityTimeout: Duration.seconds(props.deadLettersTimeout.toSeconds() * VISIBILITY_FACTOR),
      retentionPeriod: Duration.days(14),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
    });
    this.queue = new sqs.Queue(this, 'Queue', {
      fifo: true,
      // Deduplication is by run id, never by body: the same run enqueued twice is one message.
      contentBasedDeduplication: false,
      // High-throughput FIFO: the quota applies per thread rather than per queue
      // (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/high-throughput-fifo.html).
      deduplicationScope: sqs.DeduplicationScope.MESSAGE_GROUP,
      fifoThroughputLimit: sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID,
      // At least six times the function's timeout, as AWS asks of a queue that is a Lambda event
      // source: a throttled invoke is retried while the message stays invisible, and a message
      // that reappears uses up one of its receives (and holds its thread's group meanwhile).
      // https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html
      visibilityTimeout: Duration.seconds(props.dispatcherTimeout.toSeconds() * VISIBILITY_FACTOR),
      retentionPeriod: Duration.days(4),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      deadLetterQueue: { queue: this.deadLetters, maxReceiveCount: props.maxReceiveCount },
    });
    this.deadLettersAlarm = alarmOnAny(
      this,
      'DeadLettersAlarm',
      'funduq thread queue: runs reached the dead-letter queue and were never dispatched',
      this.deadLetters.metricApproximateNumberOfMessagesVisible({ period: ALARM_PERIOD, statistic: cloudwatch.Stats.MAXIMUM }),
    );
  }

  /** What a function needs to enqueue a run: SendMessage, nothing else (it is given the queue's URL). */
  grantSend(grantee: iam.IGrantable): void {
    this.queue.grant(grantee, 'sqs:SendMessage');
  }

  /** What a function that settles runs, or repairs them, needs to let go of a settled run's message by its receipt handle: DeleteMessage. */
  grantRelease(grantee: iam.IGrantable): void {
    this.queue.grant(grantee, 'sqs:DeleteMessage');
  }

  /** What the sweep needs to deliver again, at once, a still-queued run's message whose dispatcher died: ChangeMessageVisibility. */
  grantRedeliver(grantee: iam.IGrantable): void {
    this.queue.grant(grantee, 'sqs:ChangeMessageVisibility');
  }
}
