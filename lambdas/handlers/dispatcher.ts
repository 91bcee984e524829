import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { besideDispatchSchema, parseThreadMessage, type BesideDispatch } from '../adapters/aws/sqs-thread-queue.js';
import { logger, metrics, publishMetrics, tracer } from './powertools.js';
import { createWiring, type WiringOptions } from './wiring.js';

/** Kept back from the Lambda deadline for settling a run: its closing events and its end. */
export const SETTLE_MARGIN_MS = 30_000;

/**
 * One thread-queue message is one run. The handler returns once the run has settled, which
 * deletes the message and releases the thread's next run. A message that failed is reported
 * back, so SQS redelivers it (and the core fails a run it finds still running `dispatch_lost`).
 * An asynchronous invoke carrying `funduqDispatchBeside` is an interjection, dispatched beside
 * its thread's running run; Lambda retries a failed one under the same `dispatch_lost` rule.
 */
export function createDispatcher(options: Omit<WiringOptions, 'runDeadline'>) {
  let deadline: number | undefined;
  const { gateway } = createWiring({ ...options, runDeadline: () => deadline });
  return async (event: SQSEvent | BesideDispatch, context: Context): Promise<SQSBatchResponse | undefined> => {
    logger.addContext(context);
    deadline = Date.now() + context.getRemainingTimeInMillis() - SETTLE_MARGIN_MS;
    if ('funduqDispatchBeside' in event) {
      const { runId } = besideDispatchSchema.parse(event).funduqDispatchBeside;
      const result = await gateway.dispatchRun(runId, true);
      logger.info('interjection dispatched', { runId, result });
      publishMetrics();
      return undefined;
    }
    const batchItemFailures: SQSBatchResponse['batchItemFailures'] = [];
    try {
      for (const record of event.Records) {
        try {
          const { threadId, runId } = parseThreadMessage(record.body);
          logger.appendKeys({ threadId, runId });
          tracer.putAnnotation('runId', runId);
          const result = await gateway.dispatchRun(runId);
          logger.info('run dispatched', { result, receiveCount: record.attributes.ApproximateReceiveCount });
          const metric = metrics.singleMetric();
          metric.addDimension('result', result);
          metric.addMetric('Dispatches', MetricUnit.Count, 1);
        } catch (error) {
          logger.error('dispatch failed; the message returns to the queue', { error: error as Error, messageId: record.messageId });
          metrics.addMetric('DispatchFailures', MetricUnit.Count, 1);
          batchItemFailures.push({ itemIdentifier: record.messageId });
        } finally {
          logger.removeKeys(['threadId', 'runId']);
        }
      }
    } finally {
      publishMetrics();
    }
    return { batchItemFailures };
  };
}

let dispatcher: ReturnType<typeof createDispatcher> | undefined;

export const handler = (event: SQSEvent | BesideDispatch, context: Context) =>
  (dispatcher ??= createDispatcher({ env: process.env }))(event, context);
