import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { linkTimerMessageSchema } from '../adapters/aws/link/sqs-timer.js';
import { systemClock } from '../adapters/system-clock.js';
import { createWiring, sqsThreadQueue, stepFunctionsAskTimer, type WiringOptions } from '../runtimes/aws.js';
import { awsLink, linkFunctionClients } from '../runtimes/link/aws.js';
import { eachMessage, logger, metrics } from '../runtimes/powertools.js';
import { flushing, tracingOf } from '../runtimes/tracing.js';

/**
 * The provider link's timers: each message of the link-timer queue is one job, delivered when its
 * delay ends. One that came before its time (a wait longer than SQS's 15 minutes) is sent again for
 * the rest; a due one is fired (the job reads the run and does nothing when the run moved on). A
 * job that failed is reported back and comes again after the queue's visibility timeout.
 */
export function createLinkTimer(options: Omit<WiringOptions, 'providers' | 'link'>) {
  const { env, clients } = options;
  const link = awsLink(env, clients, options.clock ?? systemClock, options.ids ?? { newId: () => crypto.randomUUID() });
  if (!link) throw new Error('the link timer needs the link key secret (FUNDUQ_LINK_KEY_SECRET_ARN)');
  let ready: ReturnType<typeof setUp> | undefined;
  const setUp = async () => {
    const taken = await link();
    const { gateway } = createWiring({ ...options, link: taken.deps }, { queue: sqsThreadQueue, timer: stepFunctionsAskTimer });
    return { gateway, timer: taken.timer };
  };
  return async (event: SQSEvent, context?: Context): Promise<SQSBatchResponse> => {
    if (context) logger.addContext(context);
    const { gateway, timer } = await (ready ??= setUp().catch((error: unknown) => {
      ready = undefined;
      throw error;
    }));
    return eachMessage(event.Records, 'a link timer failed; it comes again', async (record) => {
      const message = linkTimerMessageSchema.parse(JSON.parse(record.body));
      if (await timer.hop(message)) return;
      await gateway.link.fire(message.job);
      const metric = metrics.singleMetric();
      metric.addDimension('kind', message.job.kind);
      metric.addMetric('LinkTimers', MetricUnit.Count, 1);
    });
  };
}

let timerHandler: ReturnType<typeof createLinkTimer> | undefined;

/** It reads and writes the record, posts to the link's connections, sends to its own queue (hops, later jobs), arms ask timers and lets thread-queue messages go. */
const tracing = tracingOf(process.env);

export const handler = flushing(tracing, (event: SQSEvent, context: Context) =>
  (timerHandler ??= createLinkTimer({ env: process.env, clients: linkFunctionClients(process.env), tracing }))(event, context),
);
