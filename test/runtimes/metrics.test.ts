import { Metrics } from '@aws-lambda-powertools/metrics';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { composeRunLife } from '../../lambdas/core/run-life.js';
import { runMetrics } from '../../lambdas/runtimes/run-metrics.js';
import { usageMetrics } from '../../lambdas/runtimes/usage-metrics.js';
import { harness } from '../support/core-harness.js';
import { useStore } from '../support/stores.js';

const stores = useStore();

/**
 * The embedded-metric-format lines Powertools wrote: through the global console, as POWERTOOLS_DEV
 * has it in tests, which would also turn metrics off unless told otherwise.
 */
let written: Record<string, unknown>[] = [];
beforeEach(() => {
  written = [];
  vi.stubEnv('POWERTOOLS_METRICS_DISABLED', 'false');
  vi.spyOn(console, 'log').mockImplementation((line: unknown) => {
    const parsed = typeof line === 'string' && line.startsWith('{') ? (JSON.parse(line) as Record<string, unknown>) : undefined;
    if (parsed && '_aws' in parsed) written.push(parsed);
  });
});
afterEach(() => {
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
});

/** The metric names of a line, and its dimensions. */
function shape(line: Record<string, unknown>): { metrics: string[]; dimensions: string[][] } {
  const [directive] = (line._aws as { CloudWatchMetrics: { Dimensions: string[][]; Metrics: { Name: string }[] }[] }).CloudWatchMetrics;
  return { metrics: directive.Metrics.map((metric) => metric.Name), dimensions: directive.Dimensions };
}

describe('the usage meter, an observer of runs', () => {
  it('writes one set of metrics per settled run, by tenant and agent only, and none when a repair completes a settle again', async () => {
    const h = await harness(await stores.freshStore(), { life: composeRunLife([usageMetrics(new Metrics({ namespace: 'funduq' }))]) });
    h.provider.script = async function* (input) {
      yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
      yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId, usage: [{ provider: 'p', model: 'm1', inputTokens: 10, outputTokens: 4 }] };
    };
    await h.send('one');
    await h.send('two');
    await h.settled();
    await h.gateway.repairRun('run-1');
    expect(written.map(shape)).toEqual([
      { metrics: ['Runs', 'RunningTime', 'Events', 'Bytes', 'InputTokens', 'OutputTokens'], dimensions: [['tenant', 'agent']] },
      { metrics: ['Runs', 'RunningTime', 'Events', 'Bytes', 'InputTokens', 'OutputTokens'], dimensions: [['tenant', 'agent']] },
    ]);
    expect(written[0]).toMatchObject({ tenant: 'anonymous', agent: 'scripted', Runs: 1, Events: 2, InputTokens: 10, OutputTokens: 4 });
  });
});

describe("the runs' metrics, an observer of runs", () => {
  it('count each dispatch by its result, and each expiry of a waiting run', async () => {
    const metrics = new Metrics({ namespace: 'funduq', serviceName: 'funduq' });
    const h = await harness(await stores.freshStore(), { life: composeRunLife([runMetrics(metrics)]) });
    h.provider.script = async function* (input) {
      yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
      const expiresAt = new Date(h.clock.now() + 1_000).toISOString();
      yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId, outcome: { type: 'interrupt', interrupts: [{ id: 'i1', reason: 'confirm', expiresAt }] } };
    };
    await h.send('/ask');
    await h.settled();
    expect(await h.gateway.dispatchRun('run-1')).toBe('skipped');
    h.clock.advance(2_000);
    await h.gateway.expireAsks('run-1');
    expect(written.map((line) => [shape(line).metrics, line.result])).toEqual([
      [['Dispatches'], 'ran'],
      [['Dispatches'], 'skipped'],
      [['AskExpiries'], undefined],
    ]);
  });
});
