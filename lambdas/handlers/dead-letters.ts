import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { parseThreadMessage } from '../adapters/aws/sqs-thread-queue.js';
import { awsClients, createWiring, sqsThreadQueue, type WiringOptions } from '../runtimes/aws.js';
import { eachMessage, logger, metrics } from '../runtimes/powertools.js';
import { flushing, tracingOf } from '../runtimes/tracing.js';

/**
 * The thread queue's dead-letter queue: a message lands there once its receives are used up, so
 * no dispatcher will ever run its run. Each one fails its run `dispatch_failed` (its places go
 * back, its caller's stream ends with that RUN_ERROR). A message that could not be handled is
 * reported back and comes again; the alarm on the queue still says it arrived.
 */
export function createDeadLetters(options: Omit<WiringOptions, 'providers' | 'timer'>) {
  // The queue only lets go of a message a link run held (its settle does).
  const { gateway } = createWiring(options, { queue: sqsThreadQueue });
  return async (event: SQSEvent, context?: Context): Promise<SQSBatchResponse> => {
    if (context) logger.addContext(context);
    return eachMessage(event.Records, 'a dead letter could not be handled; it comes again', async (record) => {
      const { threadId, runId } = parseThreadMessage(record.body);
      const result = await gateway.failUndelivered(runId);
      logger.warn('a dead-lettered run', { threadId, runId, result });
      const metric = metrics.singleMetric();
      metric.addDimension('result', result);
      metric.addMetric('DeadLetteredRuns', MetricUnit.Count, 1);
    });
  };
}

let deadLetters: ReturnType<typeof createDeadLetters> | undefined;

/** It calls the record, and the thread queue to let go of a link run's message: a failed run arms no timer and enqueues nothing. */
const tracing = tracingOf(process.env);

export const handler = flushing(tracing, (event: SQSEvent, context: Context) =>
  (deadLetters ??= createDeadLetters({ env: process.env, clients: awsClients(process.env, { dynamodb: DynamoDBClient, sqs: SQSClient }), tracing }))(event, context),
);
