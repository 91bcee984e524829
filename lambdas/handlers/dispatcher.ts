import { ApiGatewayManagementApiClient } from '@aws-sdk/client-apigatewaymanagementapi';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { SFNClient } from '@aws-sdk/client-sfn';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { besideDispatchSchema, parseThreadMessage, SqsThreadQueue, type BesideDispatch } from '../adapters/aws/sqs-thread-queue.js';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { systemClock } from '../adapters/system-clock.js';
import { awsClients, createWiring, sqsThreadQueue, stepFunctionsAskTimer, type WiringOptions } from '../runtimes/aws.js';
import { awsLink } from '../runtimes/link/aws.js';
import { eachMessage, logger, publishMetrics } from '../runtimes/powertools.js';
import { createProviders } from '../runtimes/providers.js';
import { flushing, tracingOf } from '../runtimes/tracing.js';
import { SETTLE_MARGIN_MS } from '../runtimes/door-relay.js';

/**
 * One thread-queue message is one run. The handler returns once the run has settled, which
 * deletes the message and releases the thread's next run; a run of a `link` agent is handed to
 * its providers instead, and keeps its message in flight until it settles (no dispatcher held). A message that failed is reported
 * back, so SQS redelivers it (and the core fails a run it finds still running `dispatch_lost`).
 * An asynchronous invoke carrying `funduqDispatchBeside` is an interjection, dispatched beside
 * its thread's running run; Lambda retries a failed one under the same `dispatch_lost` rule.
 */
export function createDispatcher(options: Omit<WiringOptions, 'providers'>) {
  let deadline: number | undefined;
  const { gateway, queue } = createWiring({ ...options, providers: createProviders }, { queue: sqsThreadQueue, timer: stepFunctionsAskTimer });
  // A run's time limit is cut to the function's own end less the time to settle, so a run that
  // would outlive the function fails `provider_timeout` instead of being killed and later failed `dispatch_lost`.
  const dispatch = { deadline: () => deadline };
  return async (event: SQSEvent | BesideDispatch, context: Context): Promise<SQSBatchResponse | undefined> => {
    logger.addContext(context);
    deadline = Date.now() + context.getRemainingTimeInMillis() - SETTLE_MARGIN_MS;
    if ('funduqDispatchBeside' in event) {
      const { runId, context: carried } = besideDispatchSchema.parse(event).funduqDispatchBeside;
      const result = await gateway.dispatchRun(runId, { ...dispatch, beside: true, ...(carried ? { context: carried } : {}) });
      logger.info('interjection dispatched', { runId, result });
      publishMetrics();
      return undefined;
    }
    // Each dispatch is counted by the runs' metrics (an observer of runs' lives), failures too.
    return eachMessage(event.Records, 'dispatch failed; the message returns to the queue', async (record) => {
      const { threadId, runId, context: carried } = parseThreadMessage(record.body);
      logger.appendKeys({ threadId, runId });
      try {
        const result = await gateway.dispatchRun(runId, { ...dispatch, receipt: record.receiptHandle, ...(carried ? { context: carried } : {}) });
        logger.info('run dispatched', { result, receiveCount: record.attributes.ApproximateReceiveCount });
        // A link run handed off, or a run its door relays, holds its message: kept in flight (its
        // thread waits) and reported back, so Lambda does not delete it; the run's settle does.
        // Gone already: its run settled.
        if ((result === 'handed_off' || result === 'held_at_door') && queue instanceof SqsThreadQueue && (await queue.hold(record.receiptHandle))) return 'kept';
        // Its message came again while this dispatch stalled, and that delivery runs the run: the
        // message is that one's to delete, so this older receive leaves it. Made visible again for
        // a run whose door's lease went meanwhile: the next receive runs it.
        if (result === 'superseded' || result === 'redelivered') return 'kept';
      } finally {
        logger.removeKeys(['threadId', 'runId']);
      }
    });
  };
}

let dispatcher: Promise<ReturnType<typeof createDispatcher>> | undefined;

/**
 * What the dispatcher calls: the record, the thread queue (an interjection whose run settled first
 * is enqueued as the next ordinary run; a link run's message is held), the ask waiter (armed when
 * a run settles with asks), the agents of the `lambda` kind and, where the stack deploys it, the
 * provider link (offers over `@connections`, its timers, the link key secret).
 */
const tracing = tracingOf(process.env);

export const handler = flushing(tracing, async (event: SQSEvent | BesideDispatch, context: Context) => {
  dispatcher ??= (async () => {
    const clients = awsClients(process.env, { dynamodb: DynamoDBClient, sqs: SQSClient, sfn: SFNClient, lambda: LambdaClient, secretsManager: SecretsManagerClient, connections: ApiGatewayManagementApiClient });
    const link = await awsLink(process.env, clients, systemClock, { newId: () => crypto.randomUUID() })?.();
    return createDispatcher({ env: process.env, clients, tracing, ...(link ? { link: link.deps } : {}) });
  })().catch((error: unknown) => {
    dispatcher = undefined;
    throw error;
  });
  return (await dispatcher)(event, context);
});
