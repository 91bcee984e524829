import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory } from '@a2a-js/sdk/client';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createTracing } from '../../lambdas/adapters/otel/tracing.js';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { asTask, send, userMessage as a2aMessage } from '../support/a2a.js';
import { aguiAgent, readSse, startTestGateway, userMessage } from '../support/gateway.js';

const CALLER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';
const TRACEPARENT = `00-${CALLER_TRACE}-${CALLER_SPAN}-01`;
/** Text only the caller knows: with content capture off it is in no attribute and no event of any span. */
const SECRET = 'the-secret-words-of-the-caller';

const exporter = new InMemorySpanExporter();
let gateway: LocalGateway;

beforeAll(async () => {
  gateway = await startTestGateway({ tracing: createTracing({ serviceName: 'funduq', exporter }) });
});
afterAll(() => gateway.close());
beforeEach(() => exporter.reset());

const spans = () => exporter.getFinishedSpans();
const named = (name: string) => spans().filter((span) => span.name === name);
const one = (name: string): ReadableSpan => {
  const found = named(name);
  expect(found, `spans named ${name} among ${spans().map((span) => span.name).join(', ')}`).toHaveLength(1);
  return found[0];
};
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;
const keys = (span: ReadableSpan) => Object.keys(span.attributes).sort();

function noContentAnywhere(): void {
  for (const span of spans()) {
    const texts = [span.name, ...Object.values(span.attributes).map(String), ...span.events.flatMap((event) => [event.name, ...Object.values(event.attributes ?? {}).map(String)])];
    expect(texts.filter((text) => text.includes(SECRET)), span.name).toEqual([]);
  }
}

describe('traces of an AG-UI run', () => {
  it('continue the caller\'s traceparent: the request\'s server span, the queue wait and invoke_agent under it, exact names, kinds and attribute keys', async () => {
    const agent = aguiAgent(gateway, `thread-${Date.now()}`);
    agent.headers = { traceparent: TRACEPARENT };
    agent.messages = [userMessage(SECRET)];
    await agent.runAgent();
    await vi.waitFor(() => expect(named('invoke_agent demo')).toHaveLength(1));

    const server = one('POST /agui/:agentId');
    expect(server.kind).toBe(SpanKind.SERVER);
    expect(server.spanContext().traceId).toBe(CALLER_TRACE);
    expect(parentOf(server)).toBe(CALLER_SPAN);
    expect(keys(server)).toEqual(['http.request.method', 'http.response.status_code', 'http.route', 'url.path', 'url.scheme', 'user_agent.original']);
    expect(server.attributes['http.route']).toBe('/agui/:agentId');
    expect(server.attributes['http.response.status_code']).toBe(200);

    const wait = one('funduq.queue.wait');
    expect(wait.kind).toBe(SpanKind.INTERNAL);
    expect(parentOf(wait)).toBe(server.spanContext().spanId);

    const call = one('invoke_agent demo');
    expect(call.kind).toBe(SpanKind.CLIENT);
    expect(call.spanContext().traceId).toBe(CALLER_TRACE);
    expect(parentOf(call)).toBe(server.spanContext().spanId);
    expect(keys(call)).toEqual(
      ['funduq.door', 'funduq.run.id', 'funduq.run.outcome', 'funduq.run.status', 'funduq.tenant', 'funduq.thread.id', 'gen_ai.agent.id', 'gen_ai.agent.name', 'gen_ai.conversation.id', 'gen_ai.operation.name', 'gen_ai.provider.name'],
    );
    expect(call.attributes).toMatchObject({ 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'demo', 'gen_ai.provider.name': 'funduq.demo', 'gen_ai.conversation.id': agent.threadId, 'funduq.run.outcome': 'success' });
    expect(call.instrumentationScope).toMatchObject({ name: 'funduq', schemaUrl: 'https://opentelemetry.io/schemas/1.41.0' });
    noContentAnywhere();
  });

  it('answers an SSE run with a traceparent naming the request\'s span, in a new trace when the caller sent none', async () => {
    const response = await fetch(`${gateway.url}/agui/demo`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream' },
      body: JSON.stringify({ threadId: `thread-sse-${Date.now()}`, runId: `run-${Date.now()}`, messages: [userMessage('hello')], tools: [], context: [], state: {}, forwardedProps: {} }),
    });
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const traceparent = response.headers.get('traceparent');
    expect(traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    await readSse(response);
    await vi.waitFor(() => expect(named('invoke_agent demo')).toHaveLength(1));
    const [, traceId, spanId] = traceparent!.split('-');
    const server = one('POST /agui/:agentId');
    expect(server.spanContext()).toMatchObject({ traceId, spanId });
    expect(parentOf(server)).toBeUndefined();
    expect(one('invoke_agent demo').spanContext().traceId).toBe(traceId);
  });
});

describe('traces of an A2A SendMessage', () => {
  it('put the SendMessage span under the request\'s, with the task\'s id, state, message id and conversation, and the run under the request', async () => {
    const fetchImpl: typeof fetch = (input, init) => {
      const headers = new Headers(init?.headers);
      headers.set('traceparent', TRACEPARENT);
      return fetch(input, { ...init, headers });
    };
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: ['JSONRPC'], transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })] }),
    );
    const client = await factory.createFromUrl(`${gateway.url}/a2a/demo/`);
    exporter.reset();
    const message = a2aMessage(SECRET);
    const task = asTask(await client.sendMessage(send(message)));
    await vi.waitFor(() => expect(named('invoke_agent demo')).toHaveLength(1));

    const server = one('POST /a2a/:agentId/');
    expect(server.kind).toBe(SpanKind.SERVER);
    expect(parentOf(server)).toBe(CALLER_SPAN);
    const method = one('SendMessage');
    expect(method.kind).toBe(SpanKind.INTERNAL);
    expect(parentOf(method)).toBe(server.spanContext().spanId);
    expect(keys(method)).toEqual(['a2a.message.id', 'a2a.task.id', 'a2a.task.state', 'gen_ai.conversation.id', 'rpc.method']);
    expect(method.attributes).toEqual({
      'rpc.method': 'SendMessage',
      'a2a.message.id': message.messageId,
      'a2a.task.id': task.id,
      'a2a.task.state': 'TASK_STATE_COMPLETED',
      'gen_ai.conversation.id': task.contextId,
    });
    const call = one('invoke_agent demo');
    expect(call.spanContext().traceId).toBe(CALLER_TRACE);
    expect(parentOf(call)).toBe(server.spanContext().spanId);
    // One conversation whichever door: the thread id is the task's contextId.
    expect(call.attributes['gen_ai.conversation.id']).toBe(task.contextId);
    expect(call.attributes['funduq.door']).toBe('a2a');
    noContentAnywhere();
  });
});
