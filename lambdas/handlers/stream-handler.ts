import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { Context, DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import type { PushSenderSettings } from '../adapters/http/push-sender.js';
import type { TableNames } from '../adapters/aws/dynamodb/tables.js';
import { eventOfKeys, runOfImage } from '../adapters/aws/dynamodb/store/changes.js';
import { pushForChange } from '../core/a2a/push.js';
import { systemClock } from '../adapters/system-clock.js';
import type { Run } from '../core/model.js';
import type { Clock, RunChange, RunStore } from '../core/ports.js';
import { logger, metrics, publishMetrics } from '../runtimes/powertools.js';
import { InvocationPushSender, OutOfTime } from '../runtimes/push-delivery.js';
import { awsClients, awsPushSender, createStore, tableNames, type Clients, type Environment } from '../runtimes/aws.js';

/**
 * One run's part of a batch: its latest record from the runs table (a status change), or its new
 * events from run_events. `from` is the sequence number of the first record it was made of.
 */
export type RecordedChange =
  | { kind: 'status'; runId: string; run: Run; from: string }
  | { kind: 'events'; runId: string; seqs: number[]; from: string };

export interface StreamHandlerOptions {
  env: Environment;
  clients: Pick<Clients, 'dynamodb' | 'secretsManager'>;
  /** Over `PUSH_SENDER_SETTINGS`: tests allow their loopback receiver and shorten the backoff. */
  push?: Partial<PushSenderSettings>;
  clock?: Pick<Clock, 'now'>;
}

/**
 * The record's changes from both tables' streams (new images), turned into A2A push notifications
 * by the core (`pushForChange`), one call per run and kind in each batch. A receiver that fails is
 * the core's to note (a dead letter on its config); a change that could not be handled (the store
 * failed, or its notifications could outlast the invocation) is reported back by the sequence
 * number of its first record, and the batch is retried from there (then bisected, then parked).
 */
export function createStreamHandler(options: StreamHandlerOptions) {
  const store = createStore(options);
  const clock = options.clock ?? systemClock;
  const tables = tableNames(options.env);
  const push = awsPushSender(options, clock);
  return async (event: DynamoDBStreamEvent, context?: Context): Promise<DynamoDBBatchResponse> => {
    if (context) logger.addContext(context);
    const invocation = new InvocationPushSender(push.sender, push.settings, () => context?.getRemainingTimeInMillis() ?? Number.POSITIVE_INFINITY);
    const batchItemFailures: DynamoDBBatchResponse['batchItemFailures'] = [];
    try {
      for (const recorded of changesIn(event.Records, tables)) {
        try {
          await pushForChange({ store, clock }, invocation, await runChange(store, recorded));
        } catch (error) {
          // Running out of time is expected under a slow receiver; anything else is a fault.
          const log = error instanceof OutOfTime ? logger.warn.bind(logger) : logger.error.bind(logger);
          log('a change of the record was not handled; the batch is retried from it', {
            error: error as Error,
            runId: recorded.runId,
            kind: recorded.kind,
            sequenceNumber: recorded.from,
          });
          metrics.addMetric('ChangesReportedBack', MetricUnit.Count, 1);
          // The lowest reported sequence number is where Lambda resumes: what follows is retried anyway.
          batchItemFailures.push({ itemIdentifier: recorded.from });
          break;
        }
      }
      if (invocation.delivered > 0) metrics.addMetric('PushesDelivered', MetricUnit.Count, invocation.delivered);
      if (invocation.undelivered > 0) metrics.addMetric('PushesDeadLettered', MetricUnit.Count, invocation.undelivered);
    } finally {
      publishMetrics();
    }
    return { batchItemFailures };
  };
}

/**
 * A batch's records as changes, one per run and kind, in the order of their first records. A run's
 * status records collapse into its latest: a push says the task's state as the record has it now.
 * The runs table's other items (threads, agents, push configs, message claims) are nobody's news.
 */
export function changesIn(records: readonly DynamoDBRecord[], tables: TableNames): RecordedChange[] {
  const changes = new Map<string, RecordedChange>();
  for (const record of records) {
    // Never absent on a stream record; an empty identifier would fail the whole batch (Lambda's rule).
    const from = record.dynamodb?.SequenceNumber ?? '';
    const table = tableOf(record);
    if (table === tables.runs) {
      const run = runOfImage(record.dynamodb?.NewImage);
      if (!run) continue;
      const key = `status ${run.runId}`;
      const earlier = changes.get(key);
      changes.set(key, { kind: 'status', runId: run.runId, run, from: earlier?.from ?? from });
    } else if (table === tables.runEvents && record.eventName === 'INSERT') {
      const { runId, seq } = eventOfKeys(record.dynamodb?.Keys) ?? {};
      if (runId === undefined || seq === undefined) continue;
      const key = `events ${runId}`;
      const earlier = changes.get(key);
      if (earlier?.kind === 'events') earlier.seqs.push(seq);
      else changes.set(key, { kind: 'events', runId, seqs: [seq], from });
    }
  }
  return [...changes.values()];
}

/**
 * The change as the core's change feed says it. Events are read back through the store rather than
 * decoded from the stream image: how an event is kept in its item is the store adapter's business.
 */
async function runChange(store: RunStore, recorded: RecordedChange): Promise<RunChange> {
  if (recorded.kind === 'status') return { kind: 'status', runId: recorded.runId, run: recorded.run };
  const wanted = new Set(recorded.seqs);
  const first = Math.min(...recorded.seqs);
  const last = Math.max(...recorded.seqs);
  const events = await store.events.read(recorded.runId, first - 1, last - first + 1);
  return { kind: 'events', runId: recorded.runId, events: events.filter((stored) => wanted.has(stored.seq)) };
}

/** arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label> */
function tableOf(record: DynamoDBRecord): string | undefined {
  return record.eventSourceARN?.split(':table/')[1]?.split('/stream/')[0];
}

let streamHandler: ReturnType<typeof createStreamHandler> | undefined;

export const handler = (event: DynamoDBStreamEvent, context: Context) =>
  (streamHandler ??= createStreamHandler({ env: process.env, clients: awsClients(process.env, { dynamodb: DynamoDBClient, secretsManager: SecretsManagerClient }) }))(event, context);
