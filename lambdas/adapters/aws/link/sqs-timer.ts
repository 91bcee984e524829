import { SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { z } from 'zod';
import type { LinkJob, LinkTimer } from '../../../core/ports.js';

/** SQS's longest delay (SendMessage DelaySeconds); a later job hops through the queue again. */
export const LONGEST_DELAY_SECONDS = 900;

const linkJobSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('offer'), runId: z.string(), offer: z.number() }),
  z.object({ kind: z.literal('unclaimed'), runId: z.string() }),
  z.object({ kind: z.literal('deadline'), runId: z.string() }),
  z.object({ kind: z.literal('idle'), runId: z.string(), seq: z.number() }),
  z.object({ kind: z.literal('grace'), runId: z.string(), connectionId: z.string() }),
  z.object({ kind: z.literal('ending'), runId: z.string() }),
]) satisfies z.ZodType<LinkJob>;

/** The body of a link-timer message: the job, and when it is due (epoch ms). */
export const linkTimerMessageSchema = z.object({ job: linkJobSchema, due: z.number() });
export type LinkTimerMessage = z.infer<typeof linkTimerMessageSchema>;

/**
 * The link's timers on AWS: delayed messages on a standard queue, each handled by the link-timer
 * function when it is due (`dueIn`). Delivery is at least once and a job's handler reads the run
 * first, so a job that comes twice or late is harmless.
 */
export class SqsLinkTimer implements LinkTimer {
  constructor(private readonly options: { client: SQSClient; queueUrl: string; now: () => number }) {}

  async schedule(job: LinkJob, afterMs: number): Promise<void> {
    await this.send({ job, due: this.options.now() + Math.max(0, afterMs) });
  }

  /** Sends a message again for what is left of its wait, when it came before its time (a hop); false when it is due now. */
  async hop(message: LinkTimerMessage): Promise<boolean> {
    // SQS delays are whole seconds: within one of its time a job is due.
    if (message.due - this.options.now() < 1000) return false;
    await this.send(message);
    return true;
  }

  private async send(message: LinkTimerMessage): Promise<void> {
    const seconds = Math.min(LONGEST_DELAY_SECONDS, Math.max(0, Math.ceil((message.due - this.options.now()) / 1000)));
    await this.options.client.send(new SendMessageCommand({ QueueUrl: this.options.queueUrl, MessageBody: JSON.stringify(message), DelaySeconds: seconds }));
  }
}
