import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { SFNClient, StartExecutionCommand, StopExecutionCommand } from '@aws-sdk/client-sfn';
import { SendMessageCommand, SQSClient, type SendMessageCommandInput } from '@aws-sdk/client-sqs';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { Context, DynamoDBStreamEvent, SQSEvent } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { handle, streamHandle } from 'hono/aws-lambda';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { DynamoRunStore } from '../../lambdas/adapters/aws/dynamodb/run-store.js';
import { localDynamoClient } from '../../lambdas/adapters/local/dynalite.js';
import { DEMO_AGENT } from '../../lambdas/adapters/local/runtime.js';
import { createAskExpirer } from '../../lambdas/handlers/ask-expirer.js';
import { createDispatcher } from '../../lambdas/handlers/dispatcher.js';
import { ENV } from '../../lambdas/handlers/environment.js';
import { logger } from '../../lambdas/handlers/powertools.js';
import { createStreamHandler } from '../../lambdas/handlers/stream-handler.js';
import { doorsApp, readSecretFromExtension, type Environment } from '../../lambdas/handlers/wiring.js';
import { useDynalite } from '../support/dynalite.js';

const dynamo = useDynalite();
const sqs = mockClient(SQSClient);
const sfn = mockClient(SFNClient);
const QUEUE_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/threads.fifo';
const STATE_MACHINE = 'arn:aws:states:eu-west-1:123456789012:stateMachine:AskWaiter';
const CREDENTIALS = { accessKeyId: 'test', secretAccessKey: 'test' };

/** The Lambda runtime's streaming globals, as `streamHandle` uses them. */
const streamed: Array<{ statusCode: number; headers: Record<string, string> }> = [];
beforeAll(() => {
  (globalThis as Record<string, unknown>).awslambda = {
    streamifyResponse: (handler: unknown) => handler,
    HttpResponseStream: {
      from: (stream: Writable, metadata: { statusCode: number; headers: Record<string, string> }) => {
        streamed.push(metadata);
        return stream;
      },
    },
  };
});

afterEach(() => {
  sqs.reset();
  sfn.reset();
  vi.restoreAllMocks();
});

function lambdaContext(): Context {
  return {
    functionName: 'test',
    awsRequestId: 'request-1',
    getRemainingTimeInMillis: () => 900_000,
  } as unknown as Context;
}

async function wired(overrides: Environment = {}) {
  const tables = await dynamo.freshTables();
  const env: Environment = {
    [ENV.runsTable]: tables.runs,
    [ENV.runEventsTable]: tables.runEvents,
    [ENV.threadQueueUrl]: QUEUE_URL,
    [ENV.askWaiterArn]: STATE_MACHINE,
    [ENV.threadQueueLimit]: '8',
    ...overrides,
  };
  const clients = {
    dynamodb: localDynamoClient(dynamo.endpoint),
    sqs: new SQSClient({ region: 'eu-west-1', credentials: CREDENTIALS }),
    sfn: new SFNClient({ region: 'eu-west-1', credentials: CREDENTIALS }),
  };
  const store = new DynamoRunStore({ client: clients.dynamodb, tables });
  await store.putAgent(DEMO_AGENT);
  return { env, clients, store };
}

function sqsEvent(message: SendMessageCommandInput): SQSEvent {
  return {
    Records: [
      {
        messageId: `m-${message.MessageDeduplicationId}`,
        receiptHandle: 'receipt',
        body: message.MessageBody as string,
        attributes: {
          ApproximateReceiveCount: '1',
          SentTimestamp: '0',
          SenderId: 'sender',
          ApproximateFirstReceiveTimestamp: '0',
          MessageGroupId: message.MessageGroupId,
          MessageDeduplicationId: message.MessageDeduplicationId,
        },
        messageAttributes: {},
        md5OfBody: '',
        eventSource: 'aws:sqs',
        eventSourceARN: 'arn:aws:sqs:eu-west-1:123456789012:threads.fifo',
        awsRegion: 'eu-west-1',
      },
    ],
  };
}

function restEvent(
  method: string,
  path: string,
  body?: unknown,
  identity: Record<string, unknown> = {},
  headers: Record<string, string> = {},
) {
  return {
    version: '1.0',
    resource: '/{proxy+}',
    path,
    httpMethod: method,
    headers: { 'content-type': 'application/json', host: 'api.example.com', ...headers },
    multiValueHeaders: {},
    queryStringParameters: null,
    multiValueQueryStringParameters: null,
    pathParameters: null,
    stageVariables: null,
    requestContext: { path: `/v1${path}`, stage: 'v1', domainName: 'api.example.com', identity, authorizer: {} },
    body: body === undefined ? null : JSON.stringify(body),
    isBase64Encoded: false,
  };
}

function runInput(threadId: string, runId: string, text: string) {
  return {
    threadId,
    runId,
    messages: [{ id: `u-${runId}`, role: 'user', content: text }],
    tools: [],
    context: [],
    state: {},
    forwardedProps: {},
  };
}

/**
 * SQS FIFO, in process: a message sent to the thread queue is handed to the dispatcher
 * handler as SQS would deliver it, once SendMessage has returned.
 */
function deliverTo(dispatcher: ReturnType<typeof createDispatcher>) {
  const dispatched: Array<Promise<unknown>> = [];
  sqs.on(SendMessageCommand).callsFake((input: SendMessageCommandInput) => {
    dispatched.push(new Promise((resolve) => setImmediate(resolve)).then(() => dispatcher(sqsEvent(input), lambdaContext())));
    return { MessageId: `m-${input.MessageDeduplicationId}` };
  });
  return dispatched;
}

/** Invokes the buffered doors handler as Lambda would. */
function buffered(app: ReturnType<typeof doorsApp>) {
  const handler = handle(app) as unknown as (event: unknown) => Promise<{ statusCode: number; body: string }>;
  return (event: unknown) => handler(event);
}

/** Invokes the streaming doors handler as Lambda would, and reads the whole response stream. */
async function stream(handler: unknown, event: unknown): Promise<string> {
  const chunks: Buffer[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      chunks.push(Buffer.from(chunk));
      done();
    },
  });
  await (handler as (event: unknown, stream: Writable, context: Context) => Promise<void>)(event, sink, lambdaContext());
  return Buffer.concat(chunks).toString('utf8');
}

function sseEvents(body: string): Array<Record<string, unknown>> {
  return body
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => JSON.parse(line.slice('data: '.length)));
}

describe('the AWS handlers', () => {
  it('stream an AG-UI run posted through API Gateway: queued on its thread’s group, dispatched, relayed to its end', async () => {
    const { env, clients } = await wired();
    const dispatched = deliverTo(createDispatcher({ env, clients }));
    const doors = streamHandle(doorsApp({ env, clients }));

    const body = await stream(doors, restEvent('POST', '/agui/demo', runInput('thread-1', 'run-1', 'hello there')));

    expect(sqs.commandCalls(SendMessageCommand).map((call) => call.args[0].input)).toEqual([
      {
        QueueUrl: QUEUE_URL,
        MessageBody: JSON.stringify({ threadId: 'thread-1', runId: 'run-1' }),
        MessageGroupId: 'thread-1',
        MessageDeduplicationId: 'run-1',
      },
    ]);
    await expect(Promise.all(dispatched)).resolves.toEqual([{ batchItemFailures: [] }]);
    expect(streamed.at(-1)).toMatchObject({ statusCode: 200, headers: { 'content-type': expect.stringContaining('text/event-stream') } });
    const types = sseEvents(body).map((event) => event.type);
    expect(types[0]).toBe('RUN_STARTED');
    expect(types.at(-1)).toBe('RUN_FINISHED');
    expect(body).toContain('hello ');
  });

  it('arm the ask waiter when a run settles with an expiring interrupt, and expire it when the waiter fires', async () => {
    const { env, clients, store } = await wired();
    const dispatched = deliverTo(createDispatcher({ env, clients }));
    sfn.on(StartExecutionCommand).resolves({ executionArn: 'arn', startDate: new Date() });
    const doors = streamHandle(doorsApp({ env, clients }));

    await stream(doors, restEvent('POST', '/agui/demo', runInput('thread-2', 'run-2', '/ask 30')));
    await Promise.all(dispatched);

    const [start] = sfn.commandCalls(StartExecutionCommand).map((call) => call.args[0].input);
    expect(start).toMatchObject({ stateMachineArn: STATE_MACHINE, name: 'run-2' });
    const waiterInput = JSON.parse(start.input as string) as { runId: string; expiresAt: string };
    expect(waiterInput.runId).toBe('run-2');

    const early = createAskExpirer({ env, clients });
    await expect(early(waiterInput)).resolves.toEqual({ runId: 'run-2', expiresAt: waiterInput.expiresAt });
    expect(Object.values((await store.getRun('run-2'))?.asks ?? {}).map((ask) => ask.state)).toEqual(['open']);

    const late = createAskExpirer({ env, clients, clock: { now: () => Date.parse(waiterInput.expiresAt) + 1 } });
    await expect(late(waiterInput)).resolves.toEqual({ runId: 'run-2' });
    expect(Object.values((await store.getRun('run-2'))?.asks ?? {}).map((ask) => ask.state)).toEqual(['expired']);
    expect(sfn.commandCalls(StartExecutionCommand)).toHaveLength(1);
  });

  it('stop the waiter when the asks are cancelled', async () => {
    const { env, clients } = await wired();
    const dispatched = deliverTo(createDispatcher({ env, clients }));
    sfn.on(StartExecutionCommand).resolves({ executionArn: 'arn', startDate: new Date() });
    sfn.on(StopExecutionCommand).resolves({ stopDate: new Date() });
    const app = doorsApp({ env, clients });

    await stream(streamHandle(app), restEvent('POST', '/agui/demo', runInput('thread-3', 'run-3', '/ask 30')));
    await Promise.all(dispatched);
    const response = await buffered(app)(restEvent('POST', '/agui/demo/runs/run-3/cancel'));

    expect(response.statusCode).toBe(202);
    expect(sfn.commandCalls(StopExecutionCommand).map((call) => call.args[0].input.executionArn)).toEqual([
      'arn:aws:states:eu-west-1:123456789012:execution:AskWaiter:run-3',
    ]);
  });

  it('fail a run redelivered while the record says it is running dispatch_lost, without running it again', async () => {
    const { env, clients, store } = await wired();
    const dispatcher = createDispatcher({ env, clients });
    const dispatched = deliverTo(dispatcher);
    await stream(streamHandle(doorsApp({ env, clients })), restEvent('POST', '/agui/demo', runInput('thread-4', 'run-4', 'hi')));
    await Promise.all(dispatched);
    const [message] = sqs.commandCalls(SendMessageCommand).map((call) => call.args[0].input);
    const ran = await store.readEvents('run-4', 0);
    // A crashed attempt looks like this: the run marked running, its message back in the queue.
    await store.transitionRun('run-4', ['completed'], { status: 'running' });

    await expect(dispatcher(sqsEvent(message), lambdaContext())).resolves.toEqual({ batchItemFailures: [] });
    expect(await store.getRun('run-4')).toMatchObject({ status: 'failed', reason: 'dispatch_lost' });
    const after = await store.readEvents('run-4', 0);
    expect(after.slice(0, ran.length)).toEqual(ran);
    expect(after.slice(ran.length).map((stored) => stored.event.type)).toEqual(['RUN_ERROR']);
  });

  it('report a message it cannot read back to SQS, so it is retried and then dead-lettered', async () => {
    const { env, clients } = await wired();
    const dispatcher = createDispatcher({ env, clients });
    const event = sqsEvent({ QueueUrl: QUEUE_URL, MessageBody: '{"nope":1}', MessageDeduplicationId: 'x', MessageGroupId: 'g' });
    await expect(dispatcher(event, lambdaContext())).resolves.toEqual({ batchItemFailures: [{ itemIdentifier: 'm-x' }] });
  });

  it('take the caller from API Gateway’s API key, and refuse a request that carries none', async () => {
    const { env, clients } = await wired({ [ENV.apiAuth]: 'apiKey' });
    const app = buffered(doorsApp({ env, clients }));
    expect((await app(restEvent('GET', '/threads/nope'))).statusCode).toBe(401);
    expect((await app(restEvent('GET', '/threads/nope', undefined, { apiKeyId: 'key-1' }))).statusCode).toBe(404);
    expect((await app(restEvent('GET', '/healthz'))).statusCode).toBe(200);
  });

  it('guard the admin routes with the token from Secrets Manager, read once, on the first request', async () => {
    const secretArn = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:funduq/admin-AbCdEf';
    const { env, clients } = await wired({ [ENV.adminTokenSecretArn]: secretArn });
    const reads: string[] = [];
    let unavailable = true;
    const readSecret = async (secretId: string) => {
      reads.push(secretId);
      if (unavailable) {
        unavailable = false;
        throw new Error('extension not ready');
      }
      return 'the-admin-token';
    };
    const app = buffered(doorsApp({ env, clients, readSecret }));
    const bearer = { authorization: 'Bearer the-admin-token' };

    expect((await app(restEvent('GET', '/admin/agents', undefined, {}, bearer))).statusCode).toBe(500);
    expect((await app(restEvent('GET', '/admin/agents'))).statusCode).toBe(401);
    expect((await app(restEvent('GET', '/admin/agents', undefined, {}, bearer))).statusCode).toBe(200);
    expect(reads).toEqual([secretArn, secretArn]);
  });

  it('serve no admin routes when no token secret is configured, rather than open ones', async () => {
    const { env, clients } = await wired();
    const app = buffered(doorsApp({ env, clients }));
    expect((await app(restEvent('GET', '/admin/agents'))).statusCode).toBe(404);
  });

  it('read a secret from the Parameters and Secrets extension with the function’s session token', async () => {
    const asked: Array<{ url?: string; token?: string | string[] }> = [];
    const server = createServer((request, response) => {
      asked.push({ url: request.url, token: request.headers['x-aws-parameters-secrets-token'] });
      response.setHeader('content-type', 'application/json');
      response.end(JSON.stringify({ Name: 'funduq/admin', SecretString: 's3cret' }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const env = { PARAMETERS_SECRETS_EXTENSION_HTTP_PORT: String(port), AWS_SESSION_TOKEN: 'session' };
      await expect(readSecretFromExtension('arn:aws:secretsmanager:x:1:secret:a/b', env)).resolves.toBe('s3cret');
      expect(asked).toEqual([{ url: '/secretsmanager/get?secretId=arn%3Aaws%3Asecretsmanager%3Ax%3A1%3Asecret%3Aa%2Fb', token: 'session' }]);
    } finally {
      server.close();
    }
  });

  it('hand each changed run from the runs stream to delivery, and skip the table’s other items', async () => {
    const { env } = await wired();
    const info = vi.spyOn(logger, 'info');
    const runImage = {
      pk: 'run#run-9',
      sk: 'run',
      threadKey: 't',
      tenantKey: 'acme',
      runId: 'run-9',
      threadId: 'thread-9',
      rootRunId: 'run-9',
      status: 'completed',
      input: { big: 2 ** 60 },
    };
    const record = (image: Record<string, unknown>, sequence: string) => ({
      eventID: sequence,
      eventName: 'MODIFY' as const,
      eventSourceARN: `arn:aws:dynamodb:eu-west-1:123456789012:table/${env[ENV.runsTable]}/stream/2026-01-01T00:00:00.000`,
      dynamodb: { SequenceNumber: sequence, NewImage: marshall(image, { allowImpreciseNumbers: true }) as never },
    });
    const event: DynamoDBStreamEvent = {
      Records: [record({ pk: 'thread#t', sk: 'thread', threadId: 't', queued: 0 }, '1'), record(runImage, '2')],
    };
    await expect(createStreamHandler({ env })(event)).resolves.toEqual({ batchItemFailures: [] });
    const delivered = info.mock.calls.filter(([message]) => message === 'run changed');
    expect(delivered).toEqual([['run changed', { runId: 'run-9', threadId: 'thread-9', status: 'completed' }]]);
  });
});
