import { MetricUnit, type Metrics } from '@aws-lambda-powertools/metrics';
import type { RunLife } from '../core/run-life.js';

/**
 * The runs' operational metrics on AWS, an observer of their lives, through the function's
 * Powertools metrics (those not single are published at the end of its invocation): `Dispatches` by `result` for each
 * thread-queue message dispatched, `DispatchFailures` for one whose dispatch threw (the message
 * comes again), `AskExpiries` for each waiting run whose asks expired.
 */
export function runMetrics(metrics: Metrics): RunLife {
  return {
    dispatched(dispatch) {
      if (dispatch.result === undefined) {
        metrics.addMetric('DispatchFailures', MetricUnit.Count, 1);
        return;
      }
      const metric = metrics.singleMetric();
      metric.addDimension('result', dispatch.result);
      metric.addMetric('Dispatches', MetricUnit.Count, 1);
    },
    // At once, not with the invocation's others: a door that finds an ask lapsed expires it too, and publishes none.
    expired() {
      metrics.singleMetric().addMetric('AskExpiries', MetricUnit.Count, 1);
    },
  };
}
