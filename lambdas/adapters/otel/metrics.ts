import type { Attributes, Meter } from '@opentelemetry/api';
import type { Run } from '../../core/model.js';
import type { RunLife } from '../../core/run-life.js';
import { ATTR, INVOKE_AGENT, METRIC } from '../../core/traces.js';

const seconds = (from: string, to: string) => Math.max(0, (Date.parse(to) - Date.parse(from)) / 1000);

/**
 * Each run's life as OpenTelemetry metrics (names in `core/traces.ts`). Every value comes from the
 * run's record, so the process that records a moment measures it whoever made the run: an ended
 * run's duration, outcome and tokens where it settled, its queue wait where it started. The open
 * asks are a sum of what each process saw open and close (a backend adds up the processes).
 */
export function meteredRunLife(meter: Meter): RunLife {
  const duration = meter.createHistogram(METRIC.operationDuration, { unit: 's', description: "A call to an agent, from its run's start to its end" });
  const tokens = meter.createHistogram(METRIC.tokenUsage, { unit: '{token}', description: 'Tokens the agent reported for a run, by type and model' });
  const runs = meter.createCounter(METRIC.runs, { unit: '{run}', description: 'Runs ended, by status, outcome and code' });
  const queueWait = meter.createHistogram(METRIC.queueWait, { unit: 's', description: "A run's wait in its thread's queue, from its record to its start" });
  const asksOpen = meter.createUpDownCounter(METRIC.asksOpen, { unit: '{ask}', description: 'Asks waiting for an answer' });
  const refused = meter.createCounter(METRIC.refused, { unit: '{submission}', description: 'Submissions refused before a run was recorded, by code' });
  const of = (run: Pick<Run, 'agentId' | 'tenant'>): Attributes => ({ [ATTR.agentName]: run.agentId, [ATTR.agentId]: run.agentId, [ATTR.tenant]: run.tenant });

  return {
    started(run) {
      if (run.startedAt) queueWait.record(seconds(run.createdAt, run.startedAt), of(run));
    },

    settled(run) {
      const ended = { ...of(run), [ATTR.status]: run.status, ...(run.outcome ? { [ATTR.outcome]: run.outcome } : {}), ...(run.reason ? { [ATTR.code]: run.reason } : {}) };
      runs.add(1, ended);
      if (run.startedAt && run.endedAt) {
        duration.record(seconds(run.startedAt, run.endedAt), { ...of(run), [ATTR.operationName]: INVOKE_AGENT, ...(run.status === 'failed' ? { [ATTR.errorType]: run.reason ?? 'failed' } : {}) });
      }
      for (const entry of run.usage?.tokens ?? []) {
        const model = typeof entry.model === 'string' ? { [ATTR.responseModel]: entry.model } : {};
        const base = { ...of(run), [ATTR.operationName]: INVOKE_AGENT, ...model };
        if (typeof entry.inputTokens === 'number') tokens.record(entry.inputTokens, { ...base, [ATTR.tokenType]: 'input' });
        if (typeof entry.outputTokens === 'number') tokens.record(entry.outputTokens, { ...base, [ATTR.tokenType]: 'output' });
      }
      const open = Object.values(run.asks ?? {}).filter((ask) => ask.state === 'open').length;
      if (open > 0) asksOpen.add(open, of(run));
    },

    answered(waiting, answer) {
      asksOpen.add(-answer.askIds.length, of(waiting));
    },

    expired(run, askIds) {
      asksOpen.add(-askIds.length, of(run));
    },

    refused(refusal) {
      refused.add(1, { [ATTR.code]: refusal.code, [ATTR.agentId]: refusal.agentId, [ATTR.tenant]: refusal.tenant });
    },
  };
}
