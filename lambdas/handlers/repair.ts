import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SFNClient } from '@aws-sdk/client-sfn';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { Context, DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { runIdOfImage } from '../adapters/aws/dynamodb/store/changes.js';
import { awsClients, createWiring, sqsThreadQueue, stepFunctionsAskTimer, type WiringOptions } from '../runtimes/aws.js';
import { logger, metrics, publishMetrics } from '../runtimes/powertools.js';
import { flushing, tracingOf } from '../runtimes/tracing.js';

/**
 * The record's repair: each change of a run (from the runs table's stream, at least once and in
 * order per item) is followed by what the record says it calls for, done again in case the
 * function that wrote it died before doing it (`repairRun`: a queued run's message, the rest of
 * a settle). A change that could not be repaired is reported back by its sequence number and
 * retried from there, so a run's later changes wait behind it.
 */
export function createRepair(options: Omit<WiringOptions, 'providers'>) {
  const { gateway } = createWiring(options, { queue: sqsThreadQueue, timer: stepFunctionsAskTimer });
  return async (event: DynamoDBStreamEvent, context?: Context): Promise<DynamoDBBatchResponse> => {
    if (context) logger.addContext(context);
    try {
      // One repair per run in a batch: it reads the run as it is now, so its later records add nothing.
      const seen = new Set<string>();
      for (const record of event.Records) {
        const runId = runIdOfImage(record.dynamodb?.NewImage);
        if (runId === undefined || seen.has(runId)) continue;
        seen.add(runId);
        try {
          const result = await gateway.repairRun(runId);
          if (result === 'nothing') continue;
          const metric = metrics.singleMetric();
          metric.addDimension('result', result);
          metric.addMetric('Repairs', MetricUnit.Count, 1);
        } catch (error) {
          logger.error('a run could not be repaired; the batch is retried from it', { error: error as Error, runId });
          return { batchItemFailures: [{ itemIdentifier: record.dynamodb?.SequenceNumber ?? '' }] };
        }
      }
    } finally {
      publishMetrics();
    }
    return { batchItemFailures: [] };
  };
}

let repair: ReturnType<typeof createRepair> | undefined;

/** It reads and writes the record, sends to the thread queue (a queued run's message) and arms ask timers (a settle's). */
const tracing = tracingOf(process.env);

export const handler = flushing(tracing, (event: DynamoDBStreamEvent, context: Context) =>
  (repair ??= createRepair({ env: process.env, clients: awsClients(process.env, { dynamodb: DynamoDBClient, sqs: SQSClient, sfn: SFNClient }), tracing }))(event, context),
);
