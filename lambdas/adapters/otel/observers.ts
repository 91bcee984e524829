import type { RunLife } from '../../core/run-life.js';
import { meteredRunLife } from './metrics.js';
import { tracedRunLife } from './runs.js';
import type { Tracing } from './tracing.js';

/** The observers of runs' lives that OpenTelemetry's exports need: none when nothing is exported. */
export function telemetryObservers(tracing: Tracing | undefined): RunLife[] {
  if (!tracing) return [];
  return [...(tracing.enabled ? [tracedRunLife(tracing)] : []), ...(tracing.metered ? [meteredRunLife(tracing.meter)] : [])];
}
