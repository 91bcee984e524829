import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { spansOf, type ReceivedSpan } from '../support/aws-box/cloudwatch-traces.js';
import { runInput } from '../support/aws-box/run-input.js';
import { BOX_CONTEXT, useAwsBox } from '../support/aws-box/box.js';
import { readSse } from '../support/gateway.js';
import { startHeldAgent, type HeldAgent } from '../support/held-agent.js';

/** What the stack is deployed with; the box points it at the receiver below before any function starts. */
const COLLECTOR = 'http://otlp-receiver.box.invalid:4318';

/** An OTLP/HTTP receiver on loopback: the spans every function exported, as OTLP/JSON carries them. */
const received: ReceivedSpan[] = [];
let receiver: Server;
/** The collector's key, kept in a secret of the account (the stack names it, never its value). */
const HEADERS_SECRET = 'funduq/otlp-headers';
const COLLECTOR_KEY = `Bearer ${randomUUID()}`;
/** The names of the metrics the functions exported beside their spans. */
const metricNames: string[] = [];
const metricsOf = (body: string) =>
  (JSON.parse(body) as { resourceMetrics: { scopeMetrics: { metrics: { name: string }[] }[] }[] }).resourceMetrics.flatMap((resource) => resource.scopeMetrics.flatMap((scope) => scope.metrics.map((metric) => metric.name)));
/** The `authorization` header of each export the receiver took. */
const authorizations: Array<string | undefined> = [];
const aws = useAwsBox({ context: { ...BOX_CONTEXT, otlpEndpoint: COLLECTOR, otlpHeadersSecret: HEADERS_SECRET } });
let held: HeldAgent;

beforeAll(async () => {
  receiver = createServer((req, res) => {
    authorizations.push(req.headers.authorization);
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      if (req.url === '/v1/metrics') metricNames.push(...metricsOf(body));
      else received.push(...spansOf(body));
      res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  // The operator's secret, made before the deploy as the README says: an ARN of the account's, six characters after its name.
  const accountSecret = [...aws.box.endpoint.secrets.values()][0].arn;
  const arn = `${accountSecret.slice(0, accountSecret.indexOf(':secret:') + ':secret:'.length)}${HEADERS_SECRET}-Ab12Cd`;
  aws.box.endpoint.secrets.set(arn, { id: 'OperatorsOtlpHeaders', arn, name: HEADERS_SECRET, value: `authorization=${encodeURIComponent(COLLECTOR_KEY)}` });
  aws.box.lambda.rewrites.set(COLLECTOR, `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`);
  held = await startHeldAgent();
  const put = await aws.box.admin('PUT', 'agents/held', { url: held.url, description: 'holds its runs' });
  expect(put.status).toBe(201);
  const demo = await aws.box.admin('PUT', 'agents/demo', { provider: 'demo', description: 'the demo agent' });
  expect(demo.status).toBe(201);
});

afterAll(async () => {
  held?.release();
  await held?.close();
  receiver?.close();
});

describe('traces on AWS', { timeout: 120_000 }, () => {
  it('follow one trace from the caller through the door, the thread queue and the dispatcher to the agent, each function flushing its spans', async () => {
    const { box } = aws;
    const traceId = randomUUID().replaceAll('-', '');
    const input = runInput(`t-${randomUUID()}`, 'traced');
    const response = await box.fetch(`${box.url}/agui/held`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${'2'.repeat(16)}-01` },
      body: JSON.stringify(input),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('traceparent')).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    await vi.waitFor(() => expect(held.received.map((run) => run.runId)).toContain(input.runId), { timeout: 30_000 });
    const headers = held.headers[held.received.findIndex((run) => run.runId === input.runId)];
    expect(headers.traceparent).toMatch(new RegExp(`^00-${traceId}-`));
    held.release();
    await readSse(response);

    const inTrace = () => received.filter((span) => span.traceId.toLowerCase() === traceId);
    await vi.waitFor(() => expect(inTrace().map((span) => span.name)).toEqual(expect.arrayContaining(['POST /agui/:agentId', 'funduq.queue.wait', 'invoke_agent held'])), { timeout: 30_000 });
    const server = inTrace().find((span) => span.name === 'POST /agui/:agentId')!;
    const call = inTrace().find((span) => span.name === 'invoke_agent held')!;
    expect(server.parentSpanId).toBe('2'.repeat(16));
    // The dispatcher's call is the door's request's child, across the queue; the agent was called as its child.
    expect(call.parentSpanId).toBe(server.spanId);
    expect(headers.traceparent).toBe(`00-${traceId}-${call.spanId}-01`);
    expect(new Set(inTrace().map((span) => span.service))).toEqual(new Set(['funduq']));
    // The dispatcher's invocation flushed the run's metrics beside its spans, before it returned.
    await vi.waitFor(() => expect(metricNames).toEqual(expect.arrayContaining(['gen_ai.client.operation.duration', 'funduq.runs', 'funduq.queue.wait.duration'])), { timeout: 30_000 });
    // Each function read the collector's key from the secret and sent it with every export.
    expect(authorizations.length).toBeGreaterThanOrEqual(2);
    expect(new Set(authorizations)).toEqual(new Set([COLLECTOR_KEY]));
  });

  it("link an answer, taken by a door and dispatched by another function, to the asking run's trace, and name each run's trace in the thread view", async () => {
    const { box } = aws;
    const [asking, answering] = [randomUUID().replaceAll('-', ''), randomUUID().replaceAll('-', '')];
    const threadId = `t-${randomUUID()}`;
    const post = (trace: string, input: object) =>
      box.fetch(`${box.url}/agui/demo`, { method: 'POST', headers: { 'content-type': 'application/json', traceparent: `00-${trace}-${'3'.repeat(16)}-01` }, body: JSON.stringify(input) });
    const asked = await readSse(await post(asking, runInput(threadId, '/ask')));
    const finished = asked.events.at(-1)!.data as { type: string; outcome: { interrupts: { id: string }[] } };
    expect(finished.type).toBe('RUN_FINISHED');
    const answer = runInput(threadId, '', { messages: [], resume: [{ interruptId: finished.outcome.interrupts[0].id, status: 'resolved', payload: { approved: true } }] });
    await readSse(await post(answering, answer));

    const find = (name: string, trace: string) => received.filter((span) => span.name === name && span.traceId.toLowerCase() === trace);
    await vi.waitFor(() => expect(find('invoke_agent demo', answering)).toHaveLength(1), { timeout: 30_000 });
    await vi.waitFor(() => expect(find('POST /agui/:agentId', asking)).toHaveLength(1), { timeout: 30_000 });
    const [call] = find('invoke_agent demo', answering);
    const [askingRequest] = find('POST /agui/:agentId', asking);
    expect((call.links ?? []).map((link) => [link.traceId.toLowerCase(), link.spanId.toLowerCase()])).toEqual([[asking, askingRequest.spanId.toLowerCase()]]);

    const view = (await (await box.request('GET', `/threads/${encodeURIComponent(threadId)}`)).json()) as { runs: { runId: string; traceId?: string }[] };
    expect(view.runs.map((run) => [run.runId, run.traceId])).toEqual([
      [expect.any(String), asking],
      [answer.runId, answering],
    ]);
  });
});
