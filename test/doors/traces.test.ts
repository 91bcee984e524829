import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory } from '@a2a-js/sdk/client';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { tracedRunLife } from '../../lambdas/adapters/otel/runs.js';
import { createTracing } from '../../lambdas/adapters/otel/tracing.js';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { asTask, send, userMessage as a2aMessage } from '../support/a2a.js';
import { aguiAgent, readSse, startTestGateway, userMessage } from '../support/gateway.js';
import { startHeldAgent, type HeldAgent } from '../support/held-agent.js';

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

    // The record names the trace: the task's metadata.funduq, and each of its runs.
    const read = await client.getTask({ id: task.id, tenant: '' });
    const funduq = read.metadata?.funduq as { traceId?: string; runs: { runId: string; traceId?: string }[] };
    expect(funduq.traceId).toBe(CALLER_TRACE);
    expect(funduq.runs.map((run) => run.traceId)).toEqual([CALLER_TRACE]);
  });
});

describe('the record names each run\'s trace', () => {
  it('in the thread view: each run\'s traceId', async () => {
    const traced = aguiAgent(gateway, `thread-view-${Date.now()}`);
    traced.headers = { traceparent: TRACEPARENT };
    traced.messages = [userMessage('hello')];
    await traced.runAgent();
    const view = (await (await fetch(`${gateway.url}/threads/${traced.threadId}`)).json()) as { runs: { runId: string; traceId?: string }[] };
    expect(view.runs.map((run) => run.traceId)).toEqual([CALLER_TRACE]);
  });
});

const traceparentOf = (trace: string) => `00-${trace}-${'1'.repeat(16)}-01`;
const aguiPost = (url: string, traceparent: string, body: object) =>
  fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json', traceparent }, body: JSON.stringify({ messages: [], tools: [], context: [], state: {}, forwardedProps: {}, ...body }) });
const serverOf = (traceId: string) => spans().find((span) => span.kind === SpanKind.SERVER && span.spanContext().traceId === traceId)!;
const inTrace = (name: string, traceId: string) => spans().filter((span) => span.name === name && span.spanContext().traceId === traceId);

describe('traces of an interrupt answered by a later run, and of a cancel', () => {
  it('mark the asks as events, and link the answer\'s call (in a trace of its own) to the asking run\'s request', async () => {
    const [asking, answering] = ['a'.repeat(32), 'b'.repeat(32)];
    const threadId = `thread-ask-${Date.now()}`;
    const { events } = await readSse(await aguiPost(`${gateway.url}/agui/demo`, traceparentOf(asking), { threadId, runId: `${threadId}-ask`, messages: [userMessage('/ask 60')] }));
    const finished = events.find((event) => event.data.type === 'RUN_FINISHED')!.data;
    const [interrupt] = (finished.outcome as { interrupts: { id: string }[] }).interrupts;
    await vi.waitFor(() => expect(inTrace('invoke_agent demo', asking)).toHaveLength(1));
    const [ask] = inTrace('invoke_agent demo', asking);
    expect(ask.attributes['funduq.run.outcome']).toBe('interrupt');
    expect(ask.events.map((event) => [event.name, event.attributes])).toEqual([['funduq.ask.opened', { 'funduq.ask.ids': [interrupt.id], 'funduq.ask.expires_at': expect.any(String) }]]);

    await readSse(await aguiPost(`${gateway.url}/agui/demo`, traceparentOf(answering), { threadId, runId: `${threadId}-answer`, resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { approved: true } }] }));
    await vi.waitFor(() => expect(inTrace('invoke_agent demo', answering)).toHaveLength(1));
    const [answer] = inTrace('invoke_agent demo', answering);
    expect(answer.links).toHaveLength(1);
    expect(answer.links[0].context).toMatchObject({ traceId: asking, spanId: serverOf(asking).spanContext().spanId });
    expect(answer.links[0].attributes).toEqual({ 'funduq.ask.run.id': `${threadId}-ask`, 'funduq.ask.ids': [interrupt.id] });
    expect(answer.events.map((event) => event.name)).toEqual(['funduq.ask.answered']);

    // The link rides on the answer's own record: a process that never saw the answer taken (a
    // dispatcher on AWS) links it from the run alone.
    const record = (await gateway.store.runs.get(`${threadId}-answer`))!;
    const askingSpan = serverOf(asking).spanContext().spanId;
    expect(record.context).toEqual({ traceparent: `00-${answering}-${serverOf(answering).spanContext().spanId}-01`, 'funduq-answers': `00-${asking}-${askingSpan}-01` });
    const elsewhere = new InMemorySpanExporter();
    const dispatcher = tracedRunLife(createTracing({ serviceName: 'funduq', exporter: elsewhere }));
    dispatcher.providerCall!({ run: record, agent: (await gateway.store.agents.get('demo'))! })?.ended?.();
    dispatcher.settled!(record);
    const [far] = elsewhere.getFinishedSpans();
    expect(far.spanContext().traceId).toBe(answering);
    expect(far.links.map((link) => [link.context.traceId, link.context.spanId, link.attributes])).toEqual([[asking, askingSpan, { 'funduq.ask.run.id': `${threadId}-ask` }]]);
    expect(far.events.map((event) => event.name)).toEqual(['funduq.ask.answered']);
  });

  it('mark asks that expired unanswered by a span of their own, under the asking run\'s request, with the event', async () => {
    const trace = 'e'.repeat(32);
    const threadId = `thread-expiry-${Date.now()}`;
    const { events } = await readSse(await aguiPost(`${gateway.url}/agui/demo`, traceparentOf(trace), { threadId, runId: `${threadId}-ask`, messages: [userMessage('/ask 1')] }));
    const [interrupt] = (events.find((event) => event.data.type === 'RUN_FINISHED')!.data.outcome as { interrupts: { id: string }[] }).interrupts;
    await vi.waitFor(() => expect(inTrace('funduq.ask.expiry', trace)).toHaveLength(1), { timeout: 15_000 });
    const [expiry] = inTrace('funduq.ask.expiry', trace);
    expect(expiry.kind).toBe(SpanKind.INTERNAL);
    expect(parentOf(expiry)).toBe(serverOf(trace).spanContext().spanId);
    expect(expiry.attributes).toMatchObject({ 'funduq.run.id': `${threadId}-ask`, 'funduq.ask.ids': [interrupt.id], 'gen_ai.conversation.id': threadId });
    expect(expiry.events.map((event) => [event.name, event.attributes])).toEqual([['funduq.ask.expired', { 'funduq.ask.ids': [interrupt.id] }]]);
  });

  it('mark a cancel as an event on the call, which ends cancelled', async () => {
    const trace = 'c'.repeat(32);
    const threadId = `thread-cancel-${Date.now()}`;
    const runId = `${threadId}-run`;
    const response = await aguiPost(`${gateway.url}/agui/demo`, traceparentOf(trace), { threadId, runId, messages: [userMessage('/slow 500')] });
    await vi.waitFor(() => expect(inTrace('funduq.queue.wait', trace)).toHaveLength(1));
    expect((await fetch(`${gateway.url}/agui/demo/runs/${runId}/cancel`, { method: 'POST' })).status).toBe(202);
    await readSse(response);
    await vi.waitFor(() => expect(inTrace('invoke_agent demo', trace)).toHaveLength(1));
    const [call] = inTrace('invoke_agent demo', trace);
    expect(call.events.map((event) => event.name)).toEqual(['funduq.run.cancel_requested']);
    expect(call.attributes).toMatchObject({ 'funduq.run.status': 'cancelled', 'funduq.code': 'cancel_requested' });
  });
});

describe('traces of a retry and of a budget refusal', () => {
  it('put a retry of the same runId in its own trace, linked to the first attempt\'s request', async () => {
    const [firstTrace, retryTrace] = ['7'.repeat(32), '8'.repeat(32)];
    const threadId = `thread-retry-${Date.now()}`;
    const body = { threadId, runId: `${threadId}-run`, messages: [userMessage('hello')] };
    await readSse(await aguiPost(`${gateway.url}/agui/demo`, traceparentOf(firstTrace), body));
    const retried = await readSse(await aguiPost(`${gateway.url}/agui/demo`, traceparentOf(retryTrace), body));
    expect(retried.events.map((event) => event.data.type)).toContain('RUN_FINISHED');
    await vi.waitFor(() => expect(inTrace('funduq.run.retry', retryTrace)).toHaveLength(1));
    const [retry] = inTrace('funduq.run.retry', retryTrace);
    expect(retry.kind).toBe(SpanKind.INTERNAL);
    expect(parentOf(retry)).toBe(serverOf(retryTrace).spanContext().spanId);
    expect(retry.attributes).toMatchObject({ 'funduq.run.id': body.runId, 'gen_ai.conversation.id': threadId });
    expect(retry.links.map((link) => [link.context.traceId, link.context.spanId, link.attributes])).toEqual([[firstTrace, serverOf(firstTrace).spanContext().spanId, { 'funduq.run.id': body.runId }]]);
    // The run itself was called once, in the first attempt's trace.
    expect(named('invoke_agent demo').filter((span) => span.attributes['funduq.run.id'] === body.runId).map((span) => span.spanContext().traceId)).toEqual([firstTrace]);
  });

  it('trace a budget refusal with its code, under the refused request', async () => {
    const refusals = new InMemorySpanExporter();
    const spent = await startTestGateway({ tenantBudget: { period: 'month', tokens: 0 }, tracing: createTracing({ serviceName: 'funduq', exporter: refusals }) });
    try {
      const trace = '9'.repeat(32);
      const threadId = `thread-budget-${Date.now()}`;
      const response = await aguiPost(`${spent.url}/agui/demo`, traceparentOf(trace), { threadId, runId: `${threadId}-run`, messages: [userMessage(SECRET)] });
      expect(response.status).toBe(429);
      expect(await response.json()).toMatchObject({ error: { code: 'tenant_budget_exhausted' } });
      const all = () => refusals.getFinishedSpans().filter((span) => span.spanContext().traceId === trace);
      await vi.waitFor(() => expect(all().map((span) => span.name).sort()).toEqual(['POST /agui/:agentId', 'funduq.run.refused']));
      const refusal = all().find((span) => span.name === 'funduq.run.refused')!;
      const server = all().find((span) => span.name === 'POST /agui/:agentId')!;
      expect(parentOf(refusal)).toBe(server.spanContext().spanId);
      expect(refusal.kind).toBe(SpanKind.INTERNAL);
      expect(refusal.status).toMatchObject({ code: 2, message: 'tenant_budget_exhausted' });
      expect(keys(refusal)).toEqual(['funduq.code', 'funduq.door', 'funduq.run.id', 'funduq.tenant', 'funduq.thread.id', 'gen_ai.agent.id', 'gen_ai.conversation.id']);
      expect(refusal.attributes).toMatchObject({ 'funduq.code': 'tenant_budget_exhausted', 'funduq.tenant': 'anonymous', 'gen_ai.agent.id': 'demo' });
      expect(server.attributes['http.response.status_code']).toBe(429);
      expect(JSON.stringify(all().map((span) => [span.attributes, span.events]))).not.toContain(SECRET);
    } finally {
      await spent.close();
    }
  });
});

describe('traces of runs of an agui-http agent on one thread', () => {
  const queued = new InMemorySpanExporter();
  let local: LocalGateway;
  let held: HeldAgent;
  beforeAll(async () => {
    held = await startHeldAgent();
    local = await startTestGateway({ threadQueueLimit: 1, tracing: createTracing({ serviceName: 'funduq', exporter: queued }) });
    const admin = await fetch(`${local.url}/admin/agents/held`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ url: held.url, description: 'holds every run until the test lets go', timeoutSeconds: 60, idleTimeoutSeconds: 60 }),
    });
    expect(admin.status).toBeLessThan(300);
  });
  afterAll(async () => {
    held.release();
    await local.close();
    await held.close();
  });

  it('send the call\'s traceparent to the agent, give a queued run its wait, and trace a refusal with its code', async () => {
    const [first, second, third] = ['d'.repeat(32), 'e'.repeat(32), 'f'.repeat(32)];
    const threadId = `thread-held-${Date.now()}`;
    const url = `${local.url}/agui/held`;
    const running = await aguiPost(url, traceparentOf(first), { threadId, runId: `${threadId}-1`, messages: [userMessage('one')] });
    await vi.waitFor(() => expect(held.received).toHaveLength(1));
    const waiting = await aguiPost(url, traceparentOf(second), { threadId, runId: `${threadId}-2`, messages: [userMessage('two')] });
    const refused = await aguiPost(url, traceparentOf(third), { threadId, runId: `${threadId}-3`, messages: [userMessage('three')] });
    expect(refused.status).toBe(429);
    held.release();
    await readSse(running);
    await readSse(waiting);
    const all = () => queued.getFinishedSpans();
    const find = (name: string, trace: string) => all().filter((span) => span.name === name && span.spanContext().traceId === trace);
    await vi.waitFor(() => expect(all().filter((span) => span.name === 'invoke_agent held')).toHaveLength(2));

    // The agent was called in the caller's trace, as the child of the gateway's call span.
    const [call] = find('invoke_agent held', first);
    expect(held.headers[0].traceparent).toBe(`00-${first}-${call.spanContext().spanId}-01`);
    expect(call.attributes['gen_ai.provider.name']).toBe('funduq.agui-http');

    // The queued run waited for the first one to end, in its own caller's trace.
    const [wait] = find('funduq.queue.wait', second);
    const toMs = ([s, ns]: [number, number]) => s * 1000 + ns / 1e6;
    expect(toMs(wait.endTime)).toBeGreaterThanOrEqual(toMs(call.endTime) - 1);
    expect(parentOf(wait)).toBe(all().find((span) => span.kind === SpanKind.SERVER && span.spanContext().traceId === second)!.spanContext().spanId);
    expect(held.headers[1].traceparent).toMatch(new RegExp(`^00-${second}-`));

    const [refusal] = find('funduq.run.refused', third);
    expect(refusal.attributes).toMatchObject({ 'funduq.code': 'thread_queue_full', 'funduq.door': 'agui', 'gen_ai.agent.id': 'held' });
    expect(refusal.status.code).toBe(2);
    const server = all().find((span) => span.kind === SpanKind.SERVER && span.spanContext().traceId === third)!;
    expect(server.attributes['http.response.status_code']).toBe(429);
    expect(parentOf(refusal)).toBe(server.spanContext().spanId);
  });
});

describe('content capture', () => {
  it('puts the caller\'s messages on the call only when a setting opts in', async () => {
    const captured = new InMemorySpanExporter();
    const local = await startTestGateway({ tracing: createTracing({ serviceName: 'funduq', exporter: captured, captureContent: true }) });
    try {
      const agent = aguiAgent(local, `thread-capture-${Date.now()}`);
      agent.messages = [userMessage(SECRET)];
      await agent.runAgent();
      await vi.waitFor(() => expect(captured.getFinishedSpans().filter((span) => span.name === 'invoke_agent demo')).toHaveLength(1));
      const [call] = captured.getFinishedSpans().filter((span) => span.name === 'invoke_agent demo');
      expect(JSON.parse(String(call.attributes['gen_ai.input.messages']))).toEqual([expect.objectContaining({ role: 'user', content: SECRET })]);
    } finally {
      await local.close();
    }
  });
});
