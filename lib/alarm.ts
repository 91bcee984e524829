import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';

/** A 5-minute period: every alarm of the stack looks at this. */
export const ALARM_PERIOD = Duration.minutes(5);

/**
 * An alarm that goes off at the first occurrence in a period (one failed execution, one message
 * on a dead-letter queue, one function error): in this stack each of those means something a user
 * accepted may not have happened. No data is no occurrence.
 */
export function alarmOnAny(scope: Construct, id: string, description: string, metric: cloudwatch.IMetric): cloudwatch.Alarm {
  return new cloudwatch.Alarm(scope, id, {
    alarmDescription: description,
    metric,
    threshold: 1,
    evaluationPeriods: 1,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
}

/**
 * Where a stream's event source parks a change its function kept failing on (an on-failure
 * destination), with an alarm at the first one: the change's work was given up on.
 */
export function parkedChanges(scope: Construct, description: string): { queue: sqs.Queue; alarm: cloudwatch.Alarm } {
  const queue = new sqs.Queue(scope, 'Failures', {
    retentionPeriod: Duration.days(14),
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
  });
  const alarm = alarmOnAny(scope, 'FailuresAlarm', description, queue.metricApproximateNumberOfMessagesVisible({ period: ALARM_PERIOD, statistic: cloudwatch.Stats.MAXIMUM }));
  return { queue, alarm };
}
