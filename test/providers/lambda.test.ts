import { Readable } from 'node:stream';
import { InvokeWithResponseStreamCommand, LambdaClient, type InvokeWithResponseStreamResponseEvent } from '@aws-sdk/client-lambda';
import { EventStreamCodec } from '@smithy/core/event-streams';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { ANONYMOUS, type Agent } from '../../lambdas/core/model.js';
import { LambdaProvider, lambdaKind } from '../../lambdas/providers/lambda.js';
import { agentCatalog } from '../../lambdas/providers/definition.js';
import { systemClock } from '../../lambdas/adapters/system-clock.js';
import { createProviders, PROVIDER_KINDS } from '../../lambdas/runtimes/providers.js';
import { harness, type Harness } from '../support/core-harness.js';
import { useDynalite } from '../support/dynalite.js';

const dynamo = useDynalite();
const lambda = mockClient(LambdaClient);
afterEach(() => lambda.reset());

const AGENT: Agent = {
  id: 'hosted',
  description: 'an agent deployed as a Lambda function',
  provider: { kind: 'lambda', functionName: 'travel-agent', qualifier: 'live' },
  takesInterjections: false,
  timeoutSeconds: 60,
  idleTimeoutSeconds: 30,
};

const encoder = new TextEncoder();
const sse = (events: Record<string, unknown>[]) => events.map((event) => `data: ${JSON.stringify(event)}\n\n`).join('');

/** A response stream as Lambda sends it: the payload in chunks (cut anywhere), then InvokeComplete. */
async function* responseStream(payload: string | Uint8Array, options: { cut?: number; error?: { ErrorCode: string; ErrorDetails?: string } } = {}): AsyncGenerator<InvokeWithResponseStreamResponseEvent> {
  const bytes = typeof payload === 'string' ? encoder.encode(payload) : payload;
  const cut = options.cut ?? 7;
  for (let i = 0; i < bytes.length; i += cut) {
    await Promise.resolve();
    yield { PayloadChunk: { Payload: bytes.subarray(i, i + cut) } } as InvokeWithResponseStreamResponseEvent;
  }
  yield { InvokeComplete: { ...(options.error ?? {}) } } as InvokeWithResponseStreamResponseEvent;
}

/** What `awslambda.HttpResponseStream.from` writes before the body: a JSON prelude and eight NUL bytes. */
function withPrelude(prelude: Record<string, unknown>, body: string): Uint8Array {
  const head = encoder.encode(JSON.stringify(prelude));
  const rest = encoder.encode(body);
  const bytes = new Uint8Array(head.length + 8 + rest.length);
  bytes.set(head);
  bytes.set(rest, head.length + 8);
  return bytes;
}

function script(threadId: string, runId: string, finish = true): Record<string, unknown>[] {
  return [
    { type: 'RUN_STARTED', threadId, runId },
    { type: 'TEXT_MESSAGE_START', messageId: 'm1', role: 'assistant' },
    { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: 'booked' },
    { type: 'TEXT_MESSAGE_END', messageId: 'm1' },
    ...(finish ? [{ type: 'RUN_FINISHED', threadId, runId }] : []),
  ];
}

async function hosted(): Promise<Harness> {
  const h = await harness(await dynamo.freshStore(), { providers: { lambda: new LambdaProvider(new LambdaClient({ region: 'eu-west-1' })) } });
  await h.store.agents.put(AGENT);
  return h;
}

async function runOnce(h: Harness) {
  const started = await h.gateway.startRun({ agentId: AGENT.id, input: h.input('book a flight'), door: 'agui', principal: ANONYMOUS });
  if (!started.ok) throw new Error(started.message);
  await h.settled();
  const run = await h.store.runs.get(started.value.run.runId);
  return { run, events: (await h.events(started.value.run.runId)).map((stored) => stored.event) };
}

/**
 * Lambda's own answer to InvokeWithResponseStream on the wire: AWS event-stream messages
 * (`PayloadChunk`s of the function's bytes, then `InvokeComplete`), which the SDK decodes.
 */
function eventStreamBytes(payload: string, cut: number): Buffer[] {
  const codec = new EventStreamCodec((bytes) => new TextDecoder().decode(bytes), (text) => encoder.encode(text));
  const message = (type: string, contentType: string, body: Uint8Array) =>
    Buffer.from(
      codec.encode({
        headers: { ':event-type': { type: 'string', value: type }, ':message-type': { type: 'string', value: 'event' }, ':content-type': { type: 'string', value: contentType } },
        body,
      }),
    );
  const bytes = encoder.encode(payload);
  const chunks: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += cut) chunks.push(message('PayloadChunk', 'application/octet-stream', bytes.subarray(i, i + cut)));
  return [...chunks, message('InvokeComplete', 'application/json', encoder.encode('{}'))];
}

describe('the lambda provider kind', () => {
  it('invokes the named function with the RunAgentInput and relays its AG-UI stream, cut anywhere', async () => {
    const h = await hosted();
    lambda.on(InvokeWithResponseStreamCommand).callsFake(() => ({ StatusCode: 200, EventStream: responseStream(sse(script('thread-1', 'run-1')), { cut: 5 }) }));

    const { run, events } = await runOnce(h);

    expect(run).toMatchObject({ status: 'completed', outcome: 'success' });
    expect(events).toEqual(script('thread-1', 'run-1'));
    const [call] = lambda.commandCalls(InvokeWithResponseStreamCommand);
    expect(call.args[0].input).toMatchObject({ FunctionName: 'travel-agent', Qualifier: 'live' });
    const sent = JSON.parse(new TextDecoder().decode(call.args[0].input.Payload as Uint8Array));
    expect(sent).toMatchObject({ threadId: 'thread-1', runId: 'run-1', messages: [{ role: 'user', content: 'book a flight' }] });
  });

  it('reads a stream wrapped by HttpResponseStream: its prelude says 200 and text/event-stream', async () => {
    const h = await hosted();
    const body = withPrelude({ statusCode: 200, headers: { 'Content-Type': 'text/event-stream' } }, sse(script('thread-1', 'run-1')));
    lambda.on(InvokeWithResponseStreamCommand).callsFake(() => ({
      StatusCode: 200,
      ResponseStreamContentType: 'application/vnd.awslambda.http-integration-response',
      EventStream: responseStream(body, { cut: 3 }),
    }));

    const { run, events } = await runOnce(h);

    expect(run?.status).toBe('completed');
    expect(events).toEqual(script('thread-1', 'run-1'));
  });

  it.each([
    ['a prelude with status 503', { ResponseStreamContentType: 'application/vnd.awslambda.http-integration-response', EventStream: () => responseStream(withPrelude({ statusCode: 503 }, 'busy')) }, 'provider_http_503'],
    ['a prelude that says JSON', { ResponseStreamContentType: 'application/vnd.awslambda.http-integration-response', EventStream: () => responseStream(withPrelude({ statusCode: 200, headers: { 'content-type': 'application/json' } }, '{}')) }, 'provider_not_agui'],
    ['a JSON answer (a function that does not stream)', { ResponseStreamContentType: 'application/json', EventStream: () => responseStream('{"ok":true}') }, 'provider_not_agui'],
    ['a function error after two events', { EventStream: () => responseStream(sse(script('thread-1', 'run-1').slice(0, 2)), { error: { ErrorCode: 'Unhandled', ErrorDetails: 'TypeError: x is undefined' } }) }, 'provider_http_502'],
    ['a stream that ends without RUN_FINISHED', { EventStream: () => responseStream(sse(script('thread-1', 'run-1', false))) }, 'provider_stream_ended_without_finishing'],
    ['data that is not JSON', { EventStream: () => responseStream('data: nope\n\n') }, 'provider_sent_malformed_event'],
  ])('fails the run on %s', async (_what, answer, code) => {
    const h = await hosted();
    lambda.on(InvokeWithResponseStreamCommand).callsFake(() => ({ StatusCode: 200, ...answer, EventStream: answer.EventStream() }));

    const { run, events } = await runOnce(h);

    expect(run).toMatchObject({ status: 'failed', reason: code });
    expect(events.at(-1)).toMatchObject({ type: 'RUN_ERROR', code });
  });

  it.each([
    ['ResourceNotFoundException', 'Function not found: arn:aws:lambda:eu-west-1:123456789012:function:travel-agent:live'],
    ['AccessDeniedException', 'User is not authorized to perform: lambda:InvokeFunction'],
  ])('fails the run provider_unreachable on %s, naming the AWS error', async (name, message) => {
    const h = await hosted();
    lambda.on(InvokeWithResponseStreamCommand).rejects(Object.assign(new Error(message), { name, $fault: 'client', $metadata: {} }));

    const { run } = await runOnce(h);

    expect(run).toMatchObject({ status: 'failed', reason: 'provider_unreachable' });
    expect(run?.message).toBe(`could not invoke function travel-agent:live: ${name}: ${message}`);
  });

  it('lets go of the response stream when the run is cancelled, and the run ends cancelled', async () => {
    const h = await hosted();
    lambda.on(InvokeWithResponseStreamCommand).callsFake(() => ({
      StatusCode: 200,
      EventStream: (async function* (): AsyncGenerator<InvokeWithResponseStreamResponseEvent> {
        for (const event of script('thread-1', 'run-1').slice(0, 2)) yield { PayloadChunk: { Payload: encoder.encode(sse([event])) } } as InvokeWithResponseStreamResponseEvent;
        // The function keeps working: the stream stays open until the caller lets go.
        await new Promise(() => {});
      })(),
    }));
    const started = await h.gateway.startRun({ agentId: AGENT.id, input: h.input('wait'), door: 'agui', principal: ANONYMOUS });
    if (!started.ok) throw new Error(started.message);
    for await (const stored of h.gateway.followRun(started.value.run.runId, 0)) {
      if (stored.seq === 2) await h.gateway.cancelRun(started.value.run.runId, ANONYMOUS);
    }
    await h.settled();

    expect(await h.store.runs.get(started.value.run.runId)).toMatchObject({ status: 'cancelled', reason: 'cancel_requested' });
    const [call] = lambda.commandCalls(InvokeWithResponseStreamCommand);
    expect(((call.args as unknown[])[1] as { abortSignal?: AbortSignal } | undefined)?.abortSignal?.aborted).toBe(true);
  });
});

describe('a lambda agent definition', () => {
  const catalog = agentCatalog(PROVIDER_KINDS);

  it('names a function, by name or ARN, with an optional qualifier, and shows it to an admin', () => {
    const parsed = catalog.parse({ id: 'hosted', provider: 'lambda', description: 'd', functionName: 'arn:aws:lambda:eu-west-1:123456789012:function:travel-agent', qualifier: '3' });
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
    expect(parsed.agent.provider).toEqual({ kind: 'lambda', functionName: 'arn:aws:lambda:eu-west-1:123456789012:function:travel-agent', qualifier: '3' });
    expect(catalog.view(parsed.agent)).toMatchObject({ provider: 'lambda', functionName: 'arn:aws:lambda:eu-west-1:123456789012:function:travel-agent', qualifier: '3' });
  });

  it('is refused without a function, with a qualifier in the name, or with a URL (the agui-http field)', () => {
    const issues = (body: Record<string, unknown>) => {
      const parsed = catalog.parse({ id: 'hosted', provider: 'lambda', description: 'd', ...body });
      return parsed.ok ? [] : parsed.issues.map((issue) => issue.path.join('.'));
    };
    expect(issues({})).toEqual(['functionName']);
    expect(issues({ functionName: 'travel-agent:live' })).toEqual(['functionName']);
    expect(issues({ functionName: 'travel-agent', url: 'https://example.com' })).toEqual(['']);
    expect(lambdaKind.kind).toBe('lambda');
  });

  it('is refused for a provider kind funduq does not have, naming the kinds it has', () => {
    const parsed = catalog.parse({ id: 'x', provider: 'grpc', description: 'd' });
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.issues[0]).toMatchObject({ path: ['provider'], message: 'must be one of "agui-http", "lambda", "link", "demo"' });
  });
});

// Last in the file: it takes the mock off the Lambda client.
describe('the lambda provider kind on the wire', () => {
  it('runs through the provider registry on the SDK’s own decoding of Lambda’s event-stream bytes', async () => {
    // The SDK's own client, unmocked from here on: the bytes come from its request handler.
    lambda.restore();
    const sent: Array<{ path: string; body: string }> = [];
    const client = new LambdaClient({
      region: 'eu-west-1',
      credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'example' },
      requestHandler: {
        handle: async (request: { path: string; body: Uint8Array | string }) => {
          sent.push({ path: request.path, body: typeof request.body === 'string' ? request.body : new TextDecoder().decode(request.body) });
          // Cut mid-event, mid-line and mid-character: the provider reads bytes, not messages.
          const body = Readable.from(eventStreamBytes(sse(script('thread-1', 'run-1')), 9));
          // The HTTP response's Content-Type is the stream's (ResponseStreamContentType): a handler that set none streams octets.
          return { response: { statusCode: 200, headers: { 'content-type': 'application/octet-stream' }, body } };
        },
      },
    });
    const h = await harness(await dynamo.freshStore(), { providers: createProviders({ clock: systemClock, ids: { newId: () => 'x' }, lambda: client }) });
    await h.store.agents.put(AGENT);

    const { run, events } = await runOnce(h);

    expect(run).toMatchObject({ status: 'completed', outcome: 'success' });
    expect(events).toEqual(script('thread-1', 'run-1'));
    expect(sent).toHaveLength(1);
    expect(sent[0].path).toBe('/2021-11-15/functions/travel-agent/response-streaming-invocations');
    expect(JSON.parse(sent[0].body)).toMatchObject({ threadId: 'thread-1', runId: 'run-1' });
  });
});
