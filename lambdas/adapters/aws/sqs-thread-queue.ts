import { createHash } from 'node:crypto';
import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
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

/** The payload of the dispatcher's asynchronous invocation for an interjection. */
export const besideDispatchSchema = z.object({ funduqDispatchBeside: threadMessageSchema });
export type BesideDispatch = z.infer<typeof besideDispatchSchema>;

/**
 * The thread queue on SQS FIFO: one message group per thread, deduplicated by run id, so the
 * same run enqueued twice (a retried request) is delivered once, and a thread's runs are
 * delivered one at a time in arrival order.
 */
export class SqsThreadQueue implements ThreadQueue {
  constructor(
    private readonly options: {
      client: SQSClient;
      queueUrl: string;
      /** The dispatcher function, invoked asynchronously for interjections (they bypass the message group). */
      beside?: { client: LambdaClient; functionName: string };
    },
  ) {}

  async dispatchBeside(message: ThreadMessage): Promise<void> {
    const beside = this.options.beside;
    if (!beside) throw new Error('interjections need the dispatcher function name (beside) in this queue\'s options');
    const payload: BesideDispatch = { funduqDispatchBeside: { threadId: message.threadId, runId: message.runId } };
    await beside.client.send(
      new InvokeCommand({
        FunctionName: beside.functionName,
        InvocationType: 'Event',
        Payload: new TextEncoder().encode(JSON.stringify(payload)),
      }),
    );
  }

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
