import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { Tracer } from '@aws-lambda-powertools/tracer';

/** Powertools for every handler; the POWERTOOLS_* variables the stack sets tune them further. */
export const logger = new Logger({ serviceName: 'funduq' });
export const metrics = new Metrics({ namespace: 'funduq', serviceName: 'funduq' });
export const tracer = new Tracer({ serviceName: 'funduq' });

/** Flushes the invocation's metrics; single metrics went out already, and an empty flush only warns. */
export function publishMetrics(): void {
  if (metrics.hasStoredMetrics()) metrics.publishStoredMetrics();
}
