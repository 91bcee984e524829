import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { SendMessageRequest, type TaskPushNotificationConfig } from '@a2a-js/sdk';
import { ScanCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SFNClient, StartExecutionCommand, StopExecutionCommand } from '@aws-sdk/client-sfn';
import { SendMessageCommand, SQSClient, type SendMessageCommandInput } from '@aws-sdk/client-sqs';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { Context, DynamoDBRecord, DynamoDBStreamEvent, SQSEvent } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { handle, streamHandle } from 'hono/aws-lambda';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { DynamoStore, createDynamoStore } from '../../lambdas/adapters/aws/dynamodb/store/store.js';
import { RUN_EVENTS_TABLE, RUNS_TABLE, type TableNames } from '../../lambdas/adapters/aws/dynamodb/tables.js';
import { localDynamoClient } from '../../lambdas/adapters/local/dynalite.js';
import { DEMO_AGENT } from '../../lambdas/runtimes/local.js';
import { ADDRESSED_RUN_ID_KEY } from '../../lambdas/core/interjection.js';
import { createAskExpirer } from '../../lambdas/handlers/ask-expirer.js';
import { createDispatcher } from '../../lambdas/handlers/dispatcher.js';
import { ENV } from '../../lambdas/runtimes/environment.js';
import { changesIn, createStreamHandler } from '../../lambdas/handlers/stream-handler.js';
import { readSecretFromExtension, type Environment } from '../../lambdas/runtimes/aws.js';
import { doorsApp } from '../../lambdas/runtimes/aws-doors.js';
import { send, userMessage } from '../support/a2a.js';
import { useDynalite } from '../support/dynalite.js';
import { startReceiver, type Received } from '../support/receiver.js';
import { recordProjections } from '../../lambdas/core/a2a/task-state.js';

const dynamo = useDynalite();
const sqs = mockClient(SQSClient);
const sfn = mockClient(SFNClient);
const lambda = mockClient(LambdaClient);
const secrets = mockClient(SecretsManagerClient);
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
  lambda.reset();
  secrets.reset();
  vi.restoreAllMocks();
});

function lambdaContext(remainingMs = 900_000): Context {
  return {
    functionName: 'test',
    awsRequestId: 'request-1',
    getRemainingTimeInMillis: () => remainingMs,
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
    lambda: new LambdaClient({ region: 'eu-west-1', credentials: CREDENTIALS }),
  };
  const store = createDynamoStore({ client: clients.dynamodb, tables, projections: recordProjections });
  await store.agents.put(DEMO_AGENT);
  return { env, clients, store, tables };
}

/** Test-only allowance of the push sender: the receivers listen on loopback, over plain http. */
const LOOPBACK_PUSH = { allowHttp: true, allowLoopback: true, firstRetryMs: 1 };

/** A stream's batch as Lambda hands it over: `items` as their new images, sequence numbers from `first`. */
function streamBatch(table: string, eventName: 'INSERT' | 'MODIFY', items: Array<Record<string, unknown>>, first = 100): DynamoDBStreamEvent {
  const keyNames: string[] = table.startsWith('run-events')
    ? [RUN_EVENTS_TABLE.partitionKey, RUN_EVENTS_TABLE.sortKey]
    : [RUNS_TABLE.partitionKey, RUNS_TABLE.sortKey];
  return {
    Records: items.map((image, i): DynamoDBRecord => ({
      eventID: String(first + i),
      eventName,
      eventSource: 'aws:dynamodb',
      eventSourceARN: `arn:aws:dynamodb:eu-west-1:123456789012:table/${table}/stream/2026-01-01T00:00:00.000`,
      dynamodb: {
        SequenceNumber: String(first + i),
        Keys: Object.fromEntries(keyNames.map((name) => [name, image[name]])) as never,
        NewImage: image as never,
        StreamViewType: 'NEW_IMAGE',
      },
    })),
  };
}

/** What a table holds, as the stream saw it written: every item's image (run_events in seq order). */
async function imagesOf(client: DynamoDBClient, table: string): Promise<Array<Record<string, unknown>>> {
  const { Items = [] } = await client.send(new ScanCommand({ TableName: table, ConsistentRead: true }));
  return Items.sort((a, b) => Number(a.seq?.N ?? 0) - Number(b.seq?.N ?? 0));
}

/** Every record of a settled run's task, as the two streams would hand them to the stream handler. */
async function streamsOf(client: DynamoDBClient, tables: TableNames): Promise<{ events: DynamoDBStreamEvent; runs: DynamoDBStreamEvent }> {
  return {
    events: streamBatch(tables.runEvents, 'INSERT', await imagesOf(client, tables.runEvents)),
    runs: streamBatch(tables.runs, 'MODIFY', await imagesOf(client, tables.runs)),
  };
}

function pushConfig(url: string, fields: Partial<TaskPushNotificationConfig> = {}): TaskPushNotificationConfig {
  return { tenant: '', id: 'hook', taskId: '', url, token: 'let-me-in', authentication: undefined, ...fields };
}

/** A JSON-RPC SendMessage (A2A 1.0) of `text`, with a push config when one is given. */
function sendMessageRpc(text: string, config?: TaskPushNotificationConfig) {
  return {
    jsonrpc: '2.0',
    id: 'send-1',
    method: 'SendMessage',
    params: SendMessageRequest.toJSON(send(userMessage(text), config ? { taskPushNotificationConfig: config } : {})),
  };
}

type RpcTask = { id: string; status: { state: string }; artifacts?: Array<{ parts: Array<{ text?: string }> }> };

/** Sends `text` to the demo agent through the streaming doors function and its dispatcher; the settled task. */
async function sendThroughDoors(w: Awaited<ReturnType<typeof wired>>, text: string, config?: TaskPushNotificationConfig): Promise<RpcTask> {
  const dispatched = deliverTo(createDispatcher({ env: w.env, clients: w.clients }));
  const doors = streamHandle(doorsApp({ env: w.env, clients: w.clients, push: LOOPBACK_PUSH }));
  // At the agent's URL as its card names it, with its "/".
  const body = await stream(doors, restEvent('POST', '/a2a/demo/', sendMessageRpc(text, config), {}, { 'a2a-version': '1.0' }));
  await Promise.all(dispatched);
  const answer = JSON.parse(body) as { id: string; result?: { task?: RpcTask }; error?: unknown };
  expect(answer).toMatchObject({ jsonrpc: '2.0', id: 'send-1', result: { task: { id: expect.any(String) } } });
  return answer.result?.task as RpcTask;
}

/** What a receiver was told, as `kind:state-or-text`, in order. */
function told(received: Received[]): string[] {
  return received.map(({ body }) => {
    if (body.statusUpdate) return `status:${(body.statusUpdate as { status: { state: string } }).status.state}`;
    const parts = (body.artifactUpdate as { artifact: { parts?: Array<{ text?: string }> } } | undefined)?.artifact.parts;
    return parts ? `artifact:${parts.map((part) => part.text ?? '').join('')}` : Object.keys(body).join(',');
  });
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
        // A thread id is the caller's, unique within its tenant: the group is the tenant's thread.
        MessageBody: JSON.stringify({ threadId: 'anonymous/thread-1', runId: 'run-1' }),
        MessageGroupId: 'anonymous/thread-1',
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
    expect(Object.values((await store.runs.get('run-2'))?.asks ?? {}).map((ask) => ask.state)).toEqual(['open']);

    const late = createAskExpirer({ env, clients, clock: { now: () => Date.parse(waiterInput.expiresAt) + 1 } });
    await expect(late(waiterInput)).resolves.toEqual({ runId: 'run-2' });
    expect(Object.values((await store.runs.get('run-2'))?.asks ?? {}).map((ask) => ask.state)).toEqual(['expired']);
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
    const ran = await store.events.read('run-4', 0);
    // A crashed attempt looks like this: the run marked running, its message back in the queue.
    await store.runs.transition('run-4', ['completed'], { status: 'running' });

    await expect(dispatcher(sqsEvent(message), lambdaContext())).resolves.toEqual({ batchItemFailures: [] });
    expect(await store.runs.get('run-4')).toMatchObject({ status: 'failed', reason: 'dispatch_lost' });
    const after = await store.events.read('run-4', 0);
    expect(after.slice(0, ran.length)).toEqual(ran);
    expect(after.slice(ran.length).map((stored) => stored.event.type)).toEqual(['RUN_ERROR']);
  });

  it('hand an interjection from the doors to the dispatcher by an asynchronous invoke, run beside the running run', async () => {
    const { env, clients, store } = await wired({ [ENV.dispatcherFunction]: 'funduq-dispatcher' });
    await store.agents.put({ ...DEMO_AGENT, takesInterjections: true });
    const dispatcher = createDispatcher({ env, clients });
    const invoked: Array<Promise<unknown>> = [];
    lambda.on(InvokeCommand).callsFake((input: { Payload: Uint8Array }) => {
      invoked.push(dispatcher(JSON.parse(new TextDecoder().decode(input.Payload)), lambdaContext()));
      return { StatusCode: 202 };
    });
    sqs.on(SendMessageCommand).resolves({ MessageId: 'm' });
    const doors = streamHandle(doorsApp({ env, clients }));
    // The long run stays as a crashed-free dispatcher would hold it: running.
    void stream(doors, restEvent('POST', '/agui/demo', runInput('thread-9', 'run-long', 'working on it')));
    await vi.waitFor(async () => expect(await store.runs.get('run-long')).toBeDefined());
    await store.runs.transition('run-long', ['queued'], { status: 'running' });

    const interjection = { ...runInput('thread-9', 'run-join', 'also this'), forwardedProps: { [ADDRESSED_RUN_ID_KEY]: 'run-long' } };
    const body = await stream(doors, restEvent('POST', '/agui/demo', interjection));
    await Promise.all(invoked);
    expect(lambda.commandCalls(InvokeCommand)[0].args[0].input).toMatchObject({ FunctionName: 'funduq-dispatcher', InvocationType: 'Event' });
    expect(sqs.commandCalls(SendMessageCommand)).toHaveLength(1);
    expect(sseEvents(body).at(-1)).toMatchObject({ type: 'RUN_FINISHED' });
    expect(await store.runs.get('run-join')).toMatchObject({ status: 'completed', addressedRunId: 'run-long' });
    expect((await store.runs.get('run-long'))?.status).toBe('running');
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

  it('answer an A2A SendMessage (JSON-RPC) posted through API Gateway with its Task, run to its end', async () => {
    const w = await wired();
    const task = await sendThroughDoors(w, 'hello there');
    expect(task.status.state).toBe('TASK_STATE_COMPLETED');
    expect(task.artifacts?.flatMap((artifact) => artifact.parts.map((part) => part.text)).join('')).toContain('hello ');
    expect(streamed.at(-1)).toMatchObject({ statusCode: 200, headers: { 'content-type': expect.stringContaining('application/json') } });
    expect(sqs.commandCalls(SendMessageCommand)).toHaveLength(1);
  });

  it('serve the agent card without a credential, its endpoints under the public URL the stack sets', async () => {
    const publicUrl = 'https://abc123.execute-api.eu-west-1.amazonaws.com/v1/';
    const { env, clients } = await wired({ [ENV.apiAuth]: 'apiKey', [ENV.publicUrl]: publicUrl });
    const app = buffered(doorsApp({ env, clients }));
    const response = await app(restEvent('GET', '/a2a/demo/.well-known/agent-card.json', undefined, {}, { 'a2a-version': '1.0' }));
    expect(response.statusCode).toBe(200);
    const card = JSON.parse(response.body) as { supportedInterfaces: Array<{ url: string; protocolBinding: string }>; capabilities: { pushNotifications: boolean } };
    expect(card.supportedInterfaces.map((i) => [i.protocolBinding, i.url])).toEqual(
      expect.arrayContaining([
        ['JSONRPC', `${publicUrl}a2a/demo/`],
        ['HTTP+JSON', `${publicUrl}a2a/demo/rest`],
      ]),
    );
    expect(card.capabilities.pushNotifications).toBe(true);
    // The rest of the A2A door still wants the caller's key.
    expect((await app(restEvent('GET', '/a2a/demo/rest/tasks'))).statusCode).toBe(401);
  });

  it('deliver the push notifications of a settled run, from both streams’ records, to its task’s receiver', async () => {
    const receiver = await startReceiver();
    try {
      const w = await wired();
      const task = await sendThroughDoors(w, 'hello there', pushConfig(receiver.url));
      expect(receiver.received).toEqual([]);
      const handler = createStreamHandler({ env: w.env, clients: w.clients, push: LOOPBACK_PUSH });
      const { events, runs } = await streamsOf(w.clients.dynamodb, w.tables);

      await expect(handler(events, lambdaContext())).resolves.toEqual({ batchItemFailures: [] });
      await expect(handler(runs, lambdaContext())).resolves.toEqual({ batchItemFailures: [] });

      const said = told(receiver.accepted);
      expect(said[0]).toBe('status:TASK_STATE_WORKING');
      expect(said.at(-1)).toBe('status:TASK_STATE_COMPLETED');
      const text = said.filter((line) => line.startsWith('artifact:')).map((line) => line.slice('artifact:'.length)).join('');
      expect(text).toBe(task.artifacts?.flatMap((artifact) => artifact.parts.map((part) => part.text)).join(''));
      expect(receiver.accepted.every(({ body }) => JSON.stringify(body).includes(task.id))).toBe(true);
      expect(receiver.accepted[0].headers).toMatchObject({ 'x-a2a-notification-token': 'let-me-in', 'content-type': 'application/a2a+json' });
    } finally {
      await receiver.close();
    }
  });

  it('sign the stream handler’s pushes with the keys the doors publish, both derived from the stack’s secret, read once and again after a failed read', async () => {
    const receiver = await startReceiver();
    try {
      const publicUrl = 'https://abc123.execute-api.eu-west-1.amazonaws.com/v1/';
      const secretArn = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:PushSigningSeed-abc';
      secrets.on(GetSecretValueCommand, { SecretId: secretArn }).rejectsOnce(new Error('throttled')).resolves({ SecretString: 'q'.repeat(64) });
      const w = await wired({ [ENV.pushSigningSecretArn]: secretArn, [ENV.publicUrl]: publicUrl });
      const clients = { ...w.clients, secretsManager: new SecretsManagerClient({ region: 'eu-west-1', credentials: CREDENTIALS }) };
      await sendThroughDoors(w, 'signed on AWS', pushConfig(receiver.url));
      const handler = createStreamHandler({ env: w.env, clients, push: LOOPBACK_PUSH });
      const { events } = await streamsOf(w.clients.dynamodb, w.tables);

      // The secret could not be read: nothing is sent unsigned, and the change is tried again.
      await expect(handler(events, lambdaContext())).resolves.toEqual({ batchItemFailures: [{ itemIdentifier: '100' }] });
      expect(receiver.received).toEqual([]);
      await expect(handler(events, lambdaContext())).resolves.toEqual({ batchItemFailures: [] });
      expect(receiver.accepted.length).toBeGreaterThan(0);

      const doors = buffered(doorsApp({ env: w.env, clients }));
      const card = JSON.parse((await doors(restEvent('GET', '/a2a/demo/.well-known/agent-card.json', undefined, {}, { 'a2a-version': '1.0' }))).body);
      const extension = card.capabilities.extensions.find((e: { uri: string }) => e.uri.endsWith('/ext/push-signing/v1'));
      expect(extension.params.jwksUrl).toBe(`${publicUrl}.well-known/jwks.json`);
      const published = await doors(restEvent('GET', '/.well-known/jwks.json'));
      expect(published.statusCode).toBe(200);
      const keys = createLocalJWKSet(JSON.parse(published.body));
      for (const push of receiver.accepted) {
        const { payload } = await jwtVerify(String(push.headers['x-funduq-notification-jwt']), keys, { algorithms: ['ES256'], audience: receiver.url, issuer: publicUrl });
        expect(payload.request_body_sha256).toBe(createHash('sha256').update(push.raw).digest('hex'));
      }
      expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(3);
    } finally {
      await receiver.close();
    }
  });

  it('record a dead letter on the config of a receiver that keeps failing, try it no more in that batch, and move on', async () => {
    const broken = await startReceiver(() => 500);
    try {
      const w = await wired();
      const task = await sendThroughDoors(w, 'nobody hears', pushConfig(broken.url));
      const handler = createStreamHandler({ env: w.env, clients: w.clients, push: { ...LOOPBACK_PUSH, attempts: 2 } });
      const { events } = await streamsOf(w.clients.dynamodb, w.tables);

      await expect(handler(events, lambdaContext())).resolves.toEqual({ batchItemFailures: [] });
      // The first notification's two tries; the rest of the batch's were dead-lettered untried.
      expect(broken.received).toHaveLength(2);
      const config = await w.store.pushConfigs.get(task.id, 'hook');
      expect(config?.deadLetter).toMatchObject({ error: expect.stringContaining('HTTP 500') });
    } finally {
      await broken.close();
    }
  });

  it('report a change back as a batch item failure, by its first record, when its delivery could outlast the invocation', async () => {
    const receiver = await startReceiver();
    try {
      const w = await wired();
      await sendThroughDoors(w, 'too late', pushConfig(receiver.url));
      const handler = createStreamHandler({ env: w.env, clients: w.clients, push: LOOPBACK_PUSH });
      const { events } = await streamsOf(w.clients.dynamodb, w.tables);

      // 10 s left: less than one notification's three tries of up to 5 s each, and the margin.
      await expect(handler(events, lambdaContext(10_000))).resolves.toEqual({ batchItemFailures: [{ itemIdentifier: '100' }] });
      expect(receiver.received).toEqual([]);
      await expect(handler(events, lambdaContext())).resolves.toEqual({ batchItemFailures: [] });
      expect(told(receiver.accepted)[0]).toBe('status:TASK_STATE_WORKING');
    } finally {
      await receiver.close();
    }
  });

  it('make one change per run of a batch: its events together, its status records as the latest, other items skipped', () => {
    const tables = { runs: 'runs-x', runEvents: 'run-events-x' };
    const run = (runId: string, status: string, extra: Record<string, unknown> = {}) =>
      marshall({ pk: `run#${runId}`, sk: 'run', threadKey: 't', tenantKey: 'acme', runId, threadId: 't', rootRunId: runId, status, ...extra }, {
        allowImpreciseNumbers: true,
      });
    const event = (runId: string, seq: number) => marshall({ runId, seq, e: '{"type":"TEXT_MESSAGE_CONTENT"}' });
    const records = [
      ...streamBatch(tables.runEvents, 'INSERT', [event('a', 1), event('b', 1), event('a', 2), event('b', 2), event('a', 3)], 10).Records,
      ...streamBatch(
        tables.runs,
        'MODIFY',
        [
          marshall({ pk: 'thread#t', sk: 'thread', threadId: 't', unsettled: 0 }),
          run('a', 'running'),
          marshall({ pk: 'task#a', sk: 'pushcfg#hook', taskId: 'a', configId: 'hook', url: 'https://example.com/hook' }),
          run('b', 'completed', { input: { big: 2 ** 60 } }),
          run('a', 'completed'),
        ],
        20,
      ).Records,
    ];

    const changes = changesIn(records, tables);

    expect(changes.map(({ kind, runId, from }) => [kind, runId, from])).toEqual([
      ['events', 'a', '10'],
      ['events', 'b', '11'],
      ['status', 'a', '21'],
      ['status', 'b', '23'],
    ]);
    expect(changes.slice(0, 2).map((change) => change.kind === 'events' && change.seqs)).toEqual([[1, 2, 3], [1, 2]]);
    const [a, b] = changes.slice(2).map((change) => (change.kind === 'status' ? change.run : undefined));
    expect(a).toMatchObject({ runId: 'a', status: 'completed' });
    expect(a).not.toHaveProperty(RUNS_TABLE.partitionKey);
    expect(b).toMatchObject({ runId: 'b', input: { big: 2 ** 60 } });
  });
});
