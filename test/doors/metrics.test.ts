import type { Attributes } from '@opentelemetry/api';
import { AggregationTemporality, DataPointType, InMemoryMetricExporter, type MetricData } from '@opentelemetry/sdk-metrics';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTracing, type Tracing } from '../../lambdas/adapters/otel/tracing.js';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { readSse, startTestGateway, userMessage } from '../support/gateway.js';
import { startMeteredAgent, type MeteredAgent } from '../support/metered-agent.js';

/** Text only the caller knows: it is in no metric's attributes. */
const SECRET = 'the-secret-words-of-the-caller';
const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
let tracing: Tracing;
let gateway: LocalGateway;
let agent: MeteredAgent;

beforeAll(async () => {
  agent = await startMeteredAgent();
  // Metrics only: no span is exported, and the runs' lives are still measured.
  tracing = createTracing({ serviceName: 'funduq', metricExporter: exporter, metricsIntervalMs: 3_600_000 });
  gateway = await startTestGateway({ tracing });
  const put = await fetch(`${gateway.url}/admin/agents/metered`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ url: agent.url, description: 'reports its usage' }) });
  expect(put.status).toBe(201);
});
afterAll(async () => {
  await gateway?.close();
  await tracing?.shutdown();
  await agent?.close();
});

async function run(agentId: string, threadId: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const response = await fetch(`${gateway.url}/agui/${agentId}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ threadId, runId: `${threadId}-${Math.random().toString(36).slice(2)}`, messages: [], tools: [], context: [], state: {}, forwardedProps: {}, ...body }),
  });
  expect(response.status).toBe(200);
  return (await readSse(response)).events.at(-1)!.data;
}

/** The metrics as the last flush exported them (cumulative: everything since the start). */
async function collected(): Promise<MetricData[]> {
  await tracing.flush();
  return exporter.getMetrics().at(-1)!.scopeMetrics.flatMap((scope) => scope.metrics);
}

function points(metrics: MetricData[], name: string): Array<{ attributes: Attributes; value: unknown }> {
  const metric = metrics.find((m) => m.descriptor.name === name);
  expect(metric, `a metric named ${name} among ${metrics.map((m) => m.descriptor.name).join(', ')}`).toBeDefined();
  return metric!.dataPoints.map((point) => ({ attributes: point.attributes, value: point.value }));
}

describe("the runs' metrics, through OpenTelemetry", () => {
  it("measure each agent call's duration and tokens on the GenAI conventions, and count the runs by how they ended", async () => {
    const thread = `thread-metrics-${Date.now()}`;
    await run('metered', thread, { messages: [userMessage(SECRET)] });
    await run('metered', thread, { messages: [userMessage('fail')] });
    const metrics = await collected();

    const agentOf = { 'gen_ai.agent.name': 'metered', 'gen_ai.agent.id': 'metered', 'funduq.tenant': 'anonymous' };
    const duration = metrics.find((m) => m.descriptor.name === 'gen_ai.client.operation.duration')!;
    expect(duration).toMatchObject({ descriptor: { unit: 's' }, dataPointType: DataPointType.HISTOGRAM });
    expect(points(metrics, 'gen_ai.client.operation.duration').map(({ attributes, value }) => [attributes, (value as { count: number }).count])).toEqual(
      expect.arrayContaining([
        [{ ...agentOf, 'gen_ai.operation.name': 'invoke_agent' }, 1],
        [{ ...agentOf, 'gen_ai.operation.name': 'invoke_agent', 'error.type': 'refused' }, 1],
      ]),
    );
    // Each run reported 100 input and 20 output tokens of model m1.
    expect(points(metrics, 'gen_ai.client.token.usage').map(({ attributes, value }) => [attributes, (value as { sum: number; count: number }).sum, (value as { count: number }).count])).toEqual([
      [{ ...agentOf, 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.response.model': 'm1', 'gen_ai.token.type': 'input' }, 200, 2],
      [{ ...agentOf, 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.response.model': 'm1', 'gen_ai.token.type': 'output' }, 40, 2],
    ]);
    expect(points(metrics, 'funduq.runs').filter(({ attributes }) => attributes['gen_ai.agent.id'] === 'metered')).toEqual([
      { attributes: { ...agentOf, 'funduq.run.status': 'completed', 'funduq.run.outcome': 'success' }, value: 1 },
      { attributes: { ...agentOf, 'funduq.run.status': 'failed', 'funduq.code': 'refused' }, value: 1 },
    ]);
    const waits = points(metrics, 'funduq.queue.wait.duration').find(({ attributes }) => attributes['gen_ai.agent.id'] === 'metered')!;
    expect((waits.value as { count: number }).count).toBe(2);
    expect(JSON.stringify(metrics.map((m) => m.dataPoints.map((point) => point.attributes)))).not.toContain(SECRET);
  });

  it('keep the open asks: one more when a run ends asking, one fewer once it is answered or expires', async () => {
    const open = async () => {
      const metric = (await collected()).find((m) => m.descriptor.name === 'funduq.asks.open');
      return Number(metric?.dataPoints.find((point) => point.attributes['gen_ai.agent.id'] === 'demo')?.value ?? 0);
    };
    const before = await open();
    const thread = `thread-asks-${Date.now()}`;
    const finished = await run('demo', thread, { messages: [userMessage('/ask 60')] });
    const [interrupt] = (finished.outcome as { interrupts: { id: string }[] }).interrupts;
    expect(await open()).toBe(before + 1);
    await run('demo', thread, { resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { approved: true } }] });
    expect(await open()).toBe(before);
    // One that expires unanswered is closed by its expiry.
    await run('demo', `${thread}-expiring`, { messages: [userMessage('/ask 1')] });
    expect(await open()).toBe(before + 1);
    await vi.waitFor(async () => expect(await open()).toBe(before), { timeout: 15_000 });
  });

  it('count a submission refused before its run was recorded, by its code', async () => {
    const refusals = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    const spentTracing = createTracing({ serviceName: 'funduq', metricExporter: refusals, metricsIntervalMs: 3_600_000 });
    const spent = await startTestGateway({ tenantBudget: { period: 'month', tokens: 0 }, tracing: spentTracing });
    try {
      const response = await fetch(`${spent.url}/agui/demo`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ threadId: `thread-spent-${Date.now()}`, runId: `run-${Date.now()}`, messages: [userMessage(SECRET)], tools: [], context: [], state: {}, forwardedProps: {} }),
      });
      expect(response.status).toBe(429);
      await spentTracing.flush();
      const metrics = refusals.getMetrics().at(-1)!.scopeMetrics.flatMap((scope) => scope.metrics);
      expect(points(metrics, 'funduq.submissions.refused')).toEqual([{ attributes: { 'funduq.code': 'tenant_budget_exhausted', 'gen_ai.agent.id': 'demo', 'funduq.tenant': 'anonymous' }, value: 1 }]);
      expect(metrics.map((m) => m.descriptor.name)).not.toContain('funduq.runs');
    } finally {
      await spent.close();
      await spentTracing.shutdown();
    }
  });
});
