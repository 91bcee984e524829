import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { RunLife } from '../core/run-life.js';
import { usageRecordOf } from '../core/usage.js';

/**
 * The usage meter, an observer of runs' lives: each settled run's usage record as CloudWatch
 * metrics (Powertools' embedded metric format: a log line, no API call) with the tenant and the
 * agent as their only dimensions: Powertools' own `service` dimension is cleared, so the metrics
 * of one tenant and agent are one series whatever function wrote them. One set per run, written
 * when its end is (a run settles once; a repair that completes a settle writes none).
 */
export function usageMetrics(metrics = new Metrics({ namespace: 'funduq' })): RunLife {
  metrics.clearDefaultDimensions();
  return {
    settled(run) {
      const record = usageRecordOf(run);
      metrics.addDimensions({ tenant: record.tenant, agent: record.agentId });
      metrics.addMetric('Runs', MetricUnit.Count, 1);
      metrics.addMetric('RunningTime', MetricUnit.Milliseconds, record.runningMs);
      metrics.addMetric('Events', MetricUnit.Count, record.events);
      metrics.addMetric('Bytes', MetricUnit.Bytes, record.bytes);
      let input = 0;
      let output = 0;
      for (const entry of record.tokens ?? []) {
        input += entry.inputTokens ?? 0;
        output += entry.outputTokens ?? 0;
      }
      if (record.tokens) {
        metrics.addMetric('InputTokens', MetricUnit.Count, input);
        metrics.addMetric('OutputTokens', MetricUnit.Count, output);
      }
      // A currency is no dimension (tenant and agent only): it is in the metric's name.
      if (record.cost) metrics.addMetric(`Cost${record.cost.currency}`, MetricUnit.Count, record.cost.amount);
      metrics.publishStoredMetrics();
    },
  };
}
