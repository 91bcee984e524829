import { createHash } from 'node:crypto';
import { SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { z } from 'zod';
import type { ThreadQueue } from '../../core/ports.js';

/** The body of a thread-queue message: the run to dispatch (the record holds the rest). */
export const threadMessageSchema = z.object({ threadId: z.string().min(1), runId: z.string().min(1) });
export type ThreadMessage = z.infer<typeof threadMessageSchema>;

/** Reads a message body the queue delivered; throws on anything this adapter did not write. */
export function parseThreadMessage(body: string): ThreadMessage {
  return threadMessageSchema.parse(JSON.parse(body));
}

/**
 * The thread queue on SQS FIFO: one message group per thread, deduplicated by run id, so the
 * same run enqueued twice (a retried request) is delivered once, and a thread's runs are
 * delivered one at a time in arrival order.
 */
export class SqsThreadQueue implements ThreadQueue {
  constructor(private readonly options: { client: SQSClient; queueUrl: string }) {}

  async enqueue(message: ThreadMessage): Promise<void> {
    await this.options.client.send(
      new SendMessageCommand({
        QueueUrl: this.options.queueUrl,
        MessageBody: JSON.stringify({ threadId: message.threadId, runId: message.runId }),
        MessageGroupId: sqsId(message.threadId),
        MessageDeduplicationId: sqsId(message.runId),
      }),
    );
  }
}

/**
 * Group and deduplication ids take at most 128 characters of ASCII letters, digits and
 * punctuation (SQS SendMessage). Thread and run ids are the caller's (AG-UI honours them), so an
 * id outside that alphabet is replaced by its SHA-256, which keeps it stable and distinct.
 */
export function sqsId(id: string): string {
  return /^[\x21-\x7e]{1,128}$/.test(id) ? id : `sha256-${createHash('sha256').update(id).digest('hex')}`;
}
