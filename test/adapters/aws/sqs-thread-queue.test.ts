import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { besideDispatchSchema, parseThreadMessage, SqsThreadQueue, sqsId } from '../../../lambdas/adapters/aws/sqs-thread-queue.js';

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

describe('the SQS thread queue', () => {
  it('hands an interjection to the dispatcher by an asynchronous invoke, not through the message group', async () => {
    lambda.on(InvokeCommand).resolves({ StatusCode: 202 });
    const withBeside = new SqsThreadQueue({
      client: new SQSClient({ region: 'eu-west-1' }),
      queueUrl: QUEUE_URL,
      beside: { client: new LambdaClient({ region: 'eu-west-1' }), functionName: 'funduq-dispatcher' },
    });
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

  it('reads back only the bodies it writes', () => {
    expect(() => parseThreadMessage('{"runId":"r"}')).toThrow();
    expect(() => parseThreadMessage('not json')).toThrow();
  });
});
