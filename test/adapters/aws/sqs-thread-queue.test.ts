import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { ChangeMessageVisibilityCommand, DeleteMessageCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { besideDispatchSchema, HOLD_SECONDS, parseThreadMessage, SqsThreadQueue, sqsId } from '../../../lambdas/adapters/aws/sqs-thread-queue.js';
import { lambdaDispatchBeside } from '../../../lambdas/adapters/aws/lambda-dispatch-beside.js';

const QUEUE_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/funduq-threads.fifo';
const sqs = mockClient(SQSClient);
const lambda = mockClient(LambdaClient);

afterEach(() => {
  sqs.reset();
  lambda.reset();
});

function queue() {
  return new SqsThreadQueue({ client: new SQSClient({ region: 'eu-west-1' }), queueUrl: QUEUE_URL });
}

/** The doors' queue: interjections go to the dispatcher by an asynchronous invoke. */
function queueWithBeside() {
  return new SqsThreadQueue({
    client: new SQSClient({ region: 'eu-west-1' }),
    queueUrl: QUEUE_URL,
    beside: lambdaDispatchBeside({ client: new LambdaClient({ region: 'eu-west-1' }), functionName: 'funduq-dispatcher' }),
  });
}

describe('the SQS thread queue', () => {
  it('hands an interjection to the dispatcher by an asynchronous invoke, not through the message group', async () => {
    lambda.on(InvokeCommand).resolves({ StatusCode: 202 });
    const withBeside = queueWithBeside();
    await withBeside.dispatchBeside({ threadId: 'thread-1', runId: 'run-2' });
    expect(sqs.commandCalls(SendMessageCommand)).toHaveLength(0);
    const [call] = lambda.commandCalls(InvokeCommand);
    expect(call.args[0].input).toMatchObject({ FunctionName: 'funduq-dispatcher', InvocationType: 'Event' });
    const payload = JSON.parse(new TextDecoder().decode(call.args[0].input.Payload as Uint8Array));
    expect(besideDispatchSchema.parse(payload)).toEqual({ funduqDispatchBeside: { threadId: 'thread-1', runId: 'run-2' } });
  });

  it('refuses an interjection when it was not given the dispatcher to invoke', async () => {
    await expect(queue().dispatchBeside({ threadId: 't', runId: 'r' })).rejects.toThrow(/dispatcher function/);
  });

  it('sends a run to its thread’s message group, deduplicated by the run id', async () => {
    sqs.on(SendMessageCommand).resolves({ MessageId: 'm-1' });
    await queue().enqueue({ threadId: 'thread-1', runId: 'run-1' });
    expect(sqs.commandCalls(SendMessageCommand).map((call) => call.args[0].input)).toEqual([
      {
        QueueUrl: QUEUE_URL,
        MessageBody: JSON.stringify({ threadId: 'thread-1', runId: 'run-1' }),
        MessageGroupId: 'thread-1',
        MessageDeduplicationId: 'run-1',
      },
    ]);
  });

  it("carries the run's context in the message's body, and in an interjection's invoke", async () => {
    sqs.on(SendMessageCommand).resolves({ MessageId: 'm-1' });
    lambda.on(InvokeCommand).resolves({ StatusCode: 202 });
    const context = { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' };
    const withBeside = queueWithBeside();
    await withBeside.enqueue({ threadId: 'thread-1', runId: 'run-1', context });
    await withBeside.dispatchBeside({ threadId: 'thread-1', runId: 'run-2', context });
    const [sent] = sqs.commandCalls(SendMessageCommand).map((call) => call.args[0].input);
    expect(parseThreadMessage(sent.MessageBody as string)).toEqual({ threadId: 'thread-1', runId: 'run-1', context });
    const payload = JSON.parse(new TextDecoder().decode(lambda.commandCalls(InvokeCommand)[0].args[0].input.Payload as Uint8Array));
    expect(besideDispatchSchema.parse(payload)).toEqual({ funduqDispatchBeside: { threadId: 'thread-1', runId: 'run-2', context } });
  });

  it('gives an id SQS would refuse (too long, outside printable ASCII) a stable stand-in, and keeps the real one in the body', async () => {
    sqs.on(SendMessageCommand).resolves({ MessageId: 'm-1' });
    const threadId = 'fil de discussion';
    const runId = 'r'.repeat(129);
    await queue().enqueue({ threadId, runId });
    await queue().enqueue({ threadId, runId });
    const [first, second] = sqs.commandCalls(SendMessageCommand).map((call) => call.args[0].input);
    expect(first.MessageGroupId).toMatch(/^sha256-[0-9a-f]{64}$/);
    expect(first.MessageDeduplicationId).toMatch(/^sha256-[0-9a-f]{64}$/);
    expect(second).toEqual(first);
    expect(parseThreadMessage(first.MessageBody as string)).toEqual({ threadId, runId });
  });

  it('keeps ids SQS accepts as they are, punctuation included', () => {
    expect(sqsId('tenant:a/thread#1')).toBe('tenant:a/thread#1');
    expect(sqsId('x'.repeat(128))).toBe('x'.repeat(128));
    expect(sqsId('été')).not.toBe('été');
  });

  it('passes a refusal of SQS to the caller, so the run is not reported queued', async () => {
    sqs.on(SendMessageCommand).rejects(Object.assign(new Error('queue does not exist'), { name: 'QueueDoesNotExist' }));
    await expect(queue().enqueue({ threadId: 't', runId: 'r' })).rejects.toThrow('queue does not exist');
  });

  it('lets a settled run’s message go by its receipt handle, and takes a handle that expired as another delivery’s to delete', async () => {
    sqs.on(DeleteMessageCommand).resolvesOnce({}).rejectsOnce(Object.assign(new Error('expired'), { name: 'ReceiptHandleIsInvalid' })).rejects(Object.assign(new Error('no'), { name: 'AccessDenied' }));
    await queue().release('handle-1');
    expect(sqs.commandCalls(DeleteMessageCommand)[0].args[0].input).toEqual({ QueueUrl: QUEUE_URL, ReceiptHandle: 'handle-1' });
    await expect(queue().release('handle-1')).resolves.toBeUndefined();
    await expect(queue().release('handle-1')).rejects.toThrow('no');
  });

  it('reads back only the bodies it writes', () => {
    expect(() => parseThreadMessage('{"runId":"r"}')).toThrow();
    expect(() => parseThreadMessage('not json')).toThrow();
  });

  it('keeps a link run’s message in flight for 11 hours (under SQS’s 12 from the receive), and deletes it when the run settles', async () => {
    sqs.on(ChangeMessageVisibilityCommand).resolves({});
    sqs.on(DeleteMessageCommand).resolves({});
    expect(await queue().hold('receipt-1')).toBe(true);
    await queue().release('receipt-1');
    expect(sqs.commandCalls(ChangeMessageVisibilityCommand).map((call) => call.args[0].input)).toEqual([{ QueueUrl: QUEUE_URL, ReceiptHandle: 'receipt-1', VisibilityTimeout: HOLD_SECONDS }]);
    expect(HOLD_SECONDS).toBe(39_600);
    expect(sqs.commandCalls(DeleteMessageCommand).map((call) => call.args[0].input)).toEqual([{ QueueUrl: QUEUE_URL, ReceiptHandle: 'receipt-1' }]);
  });

  it('takes a message its run let go before it was held, or one received again since, as gone, and passes other refusals on', async () => {
    sqs.on(ChangeMessageVisibilityCommand).rejects(Object.assign(new Error('not in flight'), { name: 'MessageNotInflight' }));
    sqs.on(DeleteMessageCommand).rejectsOnce(Object.assign(new Error('stale'), { name: 'ReceiptHandleIsInvalid' })).rejects(Object.assign(new Error('denied'), { name: 'AccessDenied' }));
    expect(await queue().hold('receipt-1')).toBe(false);
    await queue().release('receipt-1');
    await expect(queue().release('receipt-1')).rejects.toThrow('denied');
  });
});
