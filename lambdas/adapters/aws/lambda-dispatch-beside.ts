import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import type { BesideDispatch, ThreadMessage } from './sqs-thread-queue.js';

/**
 * An interjection handed to the dispatcher function by an asynchronous invoke, beside its
 * thread's message group (which holds the running run it joins). Kept apart from the queue so a
 * function that takes no interjections bundles no Lambda client.
 */
export function lambdaDispatchBeside(options: { client: LambdaClient; functionName: string }): (message: ThreadMessage) => Promise<void> {
  return async (message) => {
    const payload: BesideDispatch = { funduqDispatchBeside: { threadId: message.threadId, runId: message.runId } };
    await options.client.send(
      new InvokeCommand({
        FunctionName: options.functionName,
        InvocationType: 'Event',
        Payload: new TextEncoder().encode(JSON.stringify(payload)),
      }),
    );
  };
}
