import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SFNClient } from '@aws-sdk/client-sfn';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { Context } from 'aws-lambda';
import { awsClients, createWiring, sqsThreadQueue, stepFunctionsAskTimer, type WiringOptions } from '../runtimes/aws.js';
import { logger, metrics, publishMetrics } from '../runtimes/powertools.js';
import { flushing, tracingOf } from '../runtimes/tracing.js';

/** What the schedule hands the sweep (the rule's constant input): how old a noted request must be to be of a dead function. */
export interface SweepEvent {
  olderThanSeconds: number;
}

/**
 * The sweep of requests that died before recording their run, on a schedule (`sweepArrivals`):
 * a request noted longer ago than the doors' function may run is of a function that died, and
 * gives back what it took (its places, the asks it closed); a run whose dispatcher's lease lapsed
 * is failed `dispatch_lost` and its thread's message let go. Safe twice, and beside the live flow.
 */
export function createSweep(options: Omit<WiringOptions, 'providers'>) {
  const { gateway } = createWiring(options, { queue: sqsThreadQueue, timer: stepFunctionsAskTimer });
  return async (event: SweepEvent, context?: Context): Promise<void> => {
    if (context) logger.addContext(context);
    try {
      const sweep = await gateway.sweepArrivals(event.olderThanSeconds * 1000);
      if (sweep.givenBack + sweep.handedOver > 0) logger.warn('requests whose door died were given back or handed over', { ...sweep });
      metrics.addMetric('ArrivalsGivenBack', MetricUnit.Count, sweep.givenBack);
      // A dispatcher whose lease lapsed died mid-run: its run fails now, and its thread moves on.
      const lapsed = await gateway.failLapsed();
      if (lapsed.failed + lapsed.released + lapsed.redelivered > 0) logger.warn('runs whose dispatcher was lost were failed dispatch_lost, or delivered again while still queued', { ...lapsed });
      metrics.addMetric('RunsFailedDispatchLost', MetricUnit.Count, lapsed.failed);
    } finally {
      publishMetrics();
    }
  };
}

let sweep: ReturnType<typeof createSweep> | undefined;

/** It reads and writes the record, arms ask timers again (asks opened again) and sends to the thread queue (an interjection never handed over). */
const tracing = tracingOf(process.env);

export const handler = flushing(tracing, (event: SweepEvent, context: Context) =>
  (sweep ??= createSweep({ env: process.env, clients: awsClients(process.env, { dynamodb: DynamoDBClient, sqs: SQSClient, sfn: SFNClient }), tracing }))(event, context),
);
