import { createHash } from 'node:crypto';
import { ChangeMessageVisibilityCommand, DeleteMessageCommand, SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { z } from 'zod';
import type { ThreadQueue } from '../../core/ports.js';

/** The body of a thread-queue message: the run to dispatch and its context (the record holds the rest). */
export const threadMessageSchema = z.object({ threadId: z.string().min(1), runId: z.string().min(1), context: z.record(z.string()).optional() });
export type ThreadMessage = z.infer<typeof threadMessageSchema>;

/** Reads a message body the queue delivered; throws on anything this adapter did not write. */
export function parseThreadMessage(body: string): ThreadMessage {
  return threadMessageSchema.parse(JSON.parse(body));
}

/** The payload of the dispatcher's asynchronous invocation for an interjection. */
export const besideDispatchSchema = z.object({ funduqDispatchBeside: threadMessageSchema });
export type BesideDispatch = z.infer<typeof besideDispatchSchema>;

/** A message as its body carries it: what the port names, nothing else a caller's object may hold. */
export function bodyOf(message: ThreadMessage): ThreadMessage {
  return { threadId: message.threadId, runId: message.runId, ...(message.context ? { context: message.context } : {}) };
}

/**
 * How long a link run keeps its message in flight (ChangeMessageVisibility): SQS allows 12 hours
 * from the receive, and the receive may have come a while before the dispatcher ran (throttled
 * invokes are retried). A run still going after this takes the message again when it comes back.
 */
export const HOLD_SECONDS = 11 * 3600;

/**
 * The thread queue on SQS FIFO: one message group per thread, deduplicated by run id, so the
 * same run enqueued twice (a retried request) is delivered once, and a thread's runs are
 * delivered one at a time in arrival order. A message in flight holds its group: a link run
 * keeps its message in flight (`hold`) while its provider runs it, and its settle deletes it
 * (`release`), so the thread's next run waits with no dispatcher held. A repair lets a settled
 * run's message go the same way when its dispatcher died before Lambda deleted it.
 */
export class SqsThreadQueue implements ThreadQueue {
  constructor(
    private readonly options: {
      client: SQSClient;
      queueUrl: string;
      /** How an interjection is handed to a dispatcher beside the message group (`lambdaDispatchBeside`); absent, none is taken. */
      beside?: (message: ThreadMessage) => Promise<void>;
    },
  ) {}

  async dispatchBeside(message: ThreadMessage): Promise<void> {
    if (!this.options.beside) throw new Error("interjections need the dispatcher function (beside) in this queue's options");
    await this.options.beside(message);
  }

  /** Keeps a received message in flight for `HOLD_SECONDS`; false when it is gone already (its run settled meanwhile). */
  async hold(receiptHandle: string): Promise<boolean> {
    try {
      await this.options.client.send(new ChangeMessageVisibilityCommand({ QueueUrl: this.options.queueUrl, ReceiptHandle: receiptHandle, VisibilityTimeout: HOLD_SECONDS }));
      return true;
    } catch (error) {
      if (isGone(error)) return false;
      throw error;
    }
  }

  async release(receipt: string): Promise<void> {
    try {
      await this.options.client.send(new DeleteMessageCommand({ QueueUrl: this.options.queueUrl, ReceiptHandle: receipt }));
    } catch (error) {
      // Received again since (its receipt is stale): that receive's dispatcher finds the run settled and lets it go.
      if (!isGone(error)) throw error;
    }
  }

  async enqueue(message: ThreadMessage): Promise<void> {
    await this.options.client.send(
      new SendMessageCommand({
        QueueUrl: this.options.queueUrl,
        MessageBody: JSON.stringify(bodyOf(message)),
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

/** A receipt handle of a message deleted, or received again since. */
function isGone(error: unknown): boolean {
  const name = (error as { name?: string }).name ?? '';
  return name === 'ReceiptHandleIsInvalid' || name === 'MessageNotInflight';
}
