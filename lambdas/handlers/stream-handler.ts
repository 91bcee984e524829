import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { AttributeValue as StreamAttributeValue, Context, DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { RUNS_TABLE } from '../adapters/aws/dynamodb/tables.js';
import type { Run } from '../core/model.js';
import { ENV } from './environment.js';
import { logger, metrics, publishMetrics } from './powertools.js';
import type { Environment } from './wiring.js';

/** Attributes the runs table holds for its keys, indexes and expiry, not for the run. */
const TABLE_ATTRIBUTES: readonly string[] = [
  RUNS_TABLE.partitionKey,
  RUNS_TABLE.sortKey,
  RUNS_TABLE.byThread.partitionKey,
  RUNS_TABLE.byTenant.partitionKey,
  RUNS_TABLE.timeToLive,
];

/**
 * A run's record changed (a status, its asks). This is where push notifications will be sent
 * when the A2A door lands (its push configs live in the runs table); until then the change is
 * logged and counted.
 */
export async function deliverRunChange(run: Run): Promise<void> {
  logger.info('run changed', { runId: run.runId, threadId: run.threadId, status: run.status });
  const metric = metrics.singleMetric();
  metric.addDimension('status', run.status);
  metric.addMetric('RunChanges', MetricUnit.Count, 1);
}

/**
 * The record's changes from both tables' streams (new images). A record that fails is reported
 * back by its sequence number, so the batch is retried from there (and bisected) rather than
 * from its start.
 */
export function createStreamHandler(options: { env: Environment }) {
  const runsTable = options.env[ENV.runsTable];
  return async (event: DynamoDBStreamEvent, context?: Context): Promise<DynamoDBBatchResponse> => {
    if (context) logger.addContext(context);
    const batchItemFailures: DynamoDBBatchResponse['batchItemFailures'] = [];
    try {
      for (const record of event.Records) {
        try {
          if (tableOf(record) === runsTable) {
            const run = runOf(record);
            if (run) await deliverRunChange(run);
          } else if (record.eventName === 'INSERT') {
            metrics.addMetric('EventsStored', MetricUnit.Count, 1);
          }
        } catch (error) {
          logger.error('a change of the record was not handled', { error: error as Error, eventID: record.eventID });
          const sequenceNumber = record.dynamodb?.SequenceNumber;
          if (sequenceNumber) batchItemFailures.push({ itemIdentifier: sequenceNumber });
          break;
        }
      }
    } finally {
      publishMetrics();
    }
    return { batchItemFailures };
  };
}

/** arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label> */
function tableOf(record: DynamoDBRecord): string | undefined {
  return record.eventSourceARN?.split(':table/')[1]?.split('/stream/')[0];
}

/**
 * The run in a runs-table record, or undefined for the table's other items (threads, agents) and
 * for removals. Told apart by shape, so this does not depend on the store's key layout.
 */
function runOf(record: DynamoDBRecord): Run | undefined {
  const image = record.dynamodb?.NewImage;
  if (!image) return undefined;
  // As the store reads them: caller JSON may hold numbers past 2^53, which stay (imprecise) numbers.
  const item = unmarshall(image as Record<string, StreamAttributeValue> as Record<string, AttributeValue>, {
    wrapNumbers: (value: string) => Number(value),
  });
  if (typeof item.runId !== 'string' || typeof item.status !== 'string' || typeof item.rootRunId !== 'string') return undefined;
  for (const attribute of TABLE_ATTRIBUTES) delete item[attribute];
  return item as Run;
}

let streamHandler: ReturnType<typeof createStreamHandler> | undefined;

export const handler = (event: DynamoDBStreamEvent, context: Context) =>
  (streamHandler ??= createStreamHandler({ env: process.env }))(event, context);
