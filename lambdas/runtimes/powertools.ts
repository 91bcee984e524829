import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';

/** Powertools for every handler; the POWERTOOLS_* variables the stack sets tune them further. Tracing: `tracer.ts`. */
export const logger = new Logger({ serviceName: 'funduq' });
export const metrics = new Metrics({ namespace: 'funduq', serviceName: 'funduq' });

/** Flushes the invocation's metrics; single metrics went out already, and an empty flush only warns. */
export function publishMetrics(): void {
  if (metrics.hasStoredMetrics()) metrics.publishStoredMetrics();
}
