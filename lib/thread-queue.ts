import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';

export interface ThreadQueueProps {
  /**
   * The dispatcher's Lambda timeout. A message stays invisible while its run is dispatched; if it
   * reappeared before the dispatch returned, a second dispatcher would find the run `running` and
   * fail it `dispatch_lost` while the first one is still at work.
   */
  dispatcherTimeout: Duration;
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
      visibilityTimeout: props.dispatcherTimeout.plus(Duration.minutes(5)),
      retentionPeriod: Duration.days(4),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      deadLetterQueue: { queue: this.deadLetters, maxReceiveCount: props.maxReceiveCount },
    });
    this.deadLettersAlarm = new cloudwatch.Alarm(this, 'DeadLettersAlarm', {
      alarmDescription: 'funduq thread queue: runs reached the dead-letter queue and were never dispatched',
      metric: this.deadLetters.metricApproximateNumberOfMessagesVisible({
        period: Duration.minutes(5),
        statistic: cloudwatch.Stats.MAXIMUM,
      }),
      threshold: 1,
      evaluationPeriods: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
  }
}
