import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Context } from 'aws-lambda';
import { waitTimestamp, type AskWaiterInput } from '../adapters/aws/step-functions-ask-timer.js';
import type { AskTimer } from '../core/ports.js';
import { logger, publishMetrics } from '../runtimes/powertools.js';
import { awsClients, createWiring, type WiringOptions } from '../runtimes/aws.js';
import { flushing, tracingOf } from '../runtimes/tracing.js';

/**
 * Inside the ask waiter's execution, a re-arm (the timer fired before the earliest `expiresAt`,
 * by clock skew) cannot start the run's execution again: it is the one running. So the re-arm is
 * kept here and handed back as the execution's next wait.
 */
export class RearmHandback implements AskTimer {
  private readonly rearms = new Map<string, string>();

  async arm(runId: string, expiresAt: string): Promise<void> {
    this.rearms.set(runId, expiresAt);
  }

  async disarm(runId: string): Promise<void> {
    this.rearms.delete(runId);
  }

  take(runId: string): string | undefined {
    const expiresAt = this.rearms.get(runId);
    this.rearms.delete(runId);
    return expiresAt;
  }
}

/** The ask waiter's task: expire the run's open asks, and say whether to wait again. */
export function createAskExpirer(options: Omit<WiringOptions, 'timer'>) {
  const timer = new RearmHandback();
  const { gateway } = createWiring({ ...options, timer });
  return async (input: AskWaiterInput, context?: Context): Promise<AskWaiterInput> => {
    if (context) logger.addContext(context);
    const { runId } = input;
    // The run's context goes on to the execution's next round, as it came.
    const carried = input.context ? { context: input.context } : {};
    try {
      timer.take(runId);
      await gateway.expireAsks(runId);
      const again = timer.take(runId);
      if (again !== undefined) {
        logger.info('woken before the asks expire; waiting again', { runId, expiresAt: again });
        return { runId, expiresAt: waitTimestamp(again), ...carried };
      }
      logger.info('asks expired', { runId });
      return { runId, ...carried };
    } finally {
      publishMetrics();
    }
  };
}

let expirer: ReturnType<typeof createAskExpirer> | undefined;

/** The expirer calls the record only: its re-arm goes back to its own execution, and it enqueues nothing. */
const tracing = tracingOf(process.env);

export const handler = flushing(tracing, (input: AskWaiterInput, context: Context) =>
  (expirer ??= createAskExpirer({ env: process.env, clients: awsClients(process.env, { dynamodb: DynamoDBClient }), tracing }))(input, context),
);
