import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import type { SQSBatchResponse, SQSRecord } from 'aws-lambda';

/** Powertools for every handler; the POWERTOOLS_* variables the stack sets tune them further. Traces: OpenTelemetry (`tracing.ts`). */
export const logger = new Logger({ serviceName: 'funduq' });
export const metrics = new Metrics({ namespace: 'funduq', serviceName: 'funduq' });

/** Flushes the invocation's metrics; single metrics went out already, and an empty flush only warns. */
export function publishMetrics(): void {
  if (metrics.hasStoredMetrics()) metrics.publishStoredMetrics();
}

/**
 * An SQS batch, one message at a time: a message whose handling throws is logged as `failed` and
 * reported back (it comes again after its visibility timeout), as is one its handler keeps
 * (`'kept'`: held in flight on purpose); Lambda deletes the rest. The invocation's metrics are
 * published either way.
 */
export async function eachMessage(
  records: SQSRecord[],
  failed: string,
  handle: (record: SQSRecord) => Promise<'kept' | void>,
): Promise<SQSBatchResponse> {
  const batchItemFailures: SQSBatchResponse['batchItemFailures'] = [];
  try {
    for (const record of records) {
      try {
        if ((await handle(record)) === 'kept') batchItemFailures.push({ itemIdentifier: record.messageId });
      } catch (error) {
        logger.error(failed, { error: error as Error, messageId: record.messageId });
        batchItemFailures.push({ itemIdentifier: record.messageId });
      }
    }
  } finally {
    publishMetrics();
  }
  return { batchItemFailures };
}
