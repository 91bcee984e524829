import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import { bodyOf, type BesideDispatch, type ThreadMessage } from './sqs-thread-queue.js';

/**
 * An interjection handed to the dispatcher function by an asynchronous invoke, beside its
 * thread's message group (which holds the running run it joins). Kept apart from the queue so a
 * function that takes no interjections bundles no Lambda client.
 */
export function lambdaDispatchBeside(options: { client: LambdaClient; functionName: string }): (message: ThreadMessage) => Promise<void> {
  return async (message) => {
    const payload: BesideDispatch = { funduqDispatchBeside: bodyOf(message) };
    await options.client.send(
      new InvokeCommand({
        FunctionName: options.functionName,
        InvocationType: 'Event',
        Payload: new TextEncoder().encode(JSON.stringify(payload)),
      }),
    );
  };
}
