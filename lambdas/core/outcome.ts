import { EventType, type Interrupt, type RunFinishedOutcome } from '@ag-ui/core';
import type { AgUiEventRecord, Ask, Run, RunStatus } from './model.js';
import type { RunTranscript } from './transcript.js';

/** How a run ended, and the events funduq adds so the stream says so. */
export interface RunEnd {
  status: Extract<RunStatus, 'completed' | 'failed' | 'cancelled'>;
  outcome?: Run['outcome'];
  reason?: string;
  message?: string;
  asks?: Record<string, Ask>;
  /** Appended after the provider's own events. */
  closingEvents: AgUiEventRecord[];
  /** Events of the agent's stream left out (see `Run.droppedEvents`). */
  droppedEvents?: Run['droppedEvents'];
}

export interface EndContext {
  threadId: string;
  runId: string;
  cancelRequested: boolean;
  /** A failure funduq saw (the provider threw, sent a malformed event, the store refused). */
  failure?: { code: string; message: string };
}

/**
 * Derives the end of a run from what was streamed (AG-UI 1.0): RUN_FINISHED → completed (its
 * outcome says success or interrupt; a `cancelled` outcome is a cancelled run), RUN_ERROR →
 * failed, neither → failed `provider_stream_ended_without_finishing`, or cancelled when a cancel
 * was asked for. A provider that finishes after a cancel request is recorded completed.
 */
export function deriveEnd(transcript: RunTranscript, context: EndContext): RunEnd {
  if (transcript.finished) return finishedEnd(transcript, transcript.finished);
  if (transcript.errored) {
    const error = transcript.errored as { code?: unknown; message?: unknown };
    return {
      status: 'failed',
      reason: typeof error.code === 'string' && error.code.length > 0 ? error.code : 'agent_error',
      message: typeof error.message === 'string' ? error.message : undefined,
      closingEvents: [],
    };
  }
  if (context.failure) return failedEnd(context.failure.code, context.failure.message);
  if (context.cancelRequested) return cancelledEnd(transcript, context, 'cancel_requested');
  return failedEnd(
    'provider_stream_ended_without_finishing',
    'the agent ended its stream without RUN_FINISHED or RUN_ERROR',
  );
}

export function failedEnd(code: string, message: string): RunEnd {
  return {
    status: 'failed',
    reason: code,
    message,
    closingEvents: [{ type: EventType.RUN_ERROR, message, code }],
  };
}

/** A cancelled run's stream ends with AG-UI 1.0's own `cancelled` outcome. */
export function cancelledEnd(
  transcript: RunTranscript | undefined,
  context: { threadId: string; runId: string },
  reason: string,
): RunEnd {
  const opening: AgUiEventRecord[] = transcript?.started
    ? []
    : [{ type: EventType.RUN_STARTED, threadId: context.threadId, runId: context.runId }];
  return {
    status: 'cancelled',
    reason,
    closingEvents: [
      ...opening,
      ...(transcript?.closingEvents() ?? []),
      {
        type: EventType.RUN_FINISHED,
        threadId: context.threadId,
        runId: context.runId,
        outcome: { type: 'cancelled' },
      },
    ],
  };
}

function finishedEnd(transcript: RunTranscript, finished: AgUiEventRecord): RunEnd {
  const outcome = (finished as { outcome?: RunFinishedOutcome }).outcome;
  if (outcome?.type === 'cancelled') {
    return { status: 'cancelled', outcome: 'cancelled', reason: 'agent_cancelled', closingEvents: [] };
  }
  const interrupts = outcome?.type === 'interrupt' ? outcome.interrupts : [];
  const asks: Record<string, Ask> = {};
  for (const interrupt of interrupts) asks[interrupt.id] = interruptAsk(interrupt);
  const approvals = new Set(interrupts.map((i) => i.toolCallId).filter((id) => id !== undefined));
  const pending =
    outcome?.type === 'success' && outcome.pendingToolCallIds && outcome.pendingToolCallIds.length > 0
      ? new Set(outcome.pendingToolCallIds)
      : undefined;
  for (const call of transcript.unansweredToolCalls()) {
    if (approvals.has(call.toolCallId) || (pending && !pending.has(call.toolCallId))) continue;
    asks[call.toolCallId] = {
      id: call.toolCallId,
      kind: 'tool_call',
      state: 'open',
      toolCallId: call.toolCallId,
      toolCallName: call.toolCallName,
    };
  }
  const hasAsks = Object.keys(asks).length > 0;
  return {
    status: 'completed',
    outcome: outcome?.type === 'interrupt' ? 'interrupt' : 'success',
    asks: hasAsks ? asks : undefined,
    closingEvents: [],
  };
}

function interruptAsk(interrupt: Interrupt): Ask {
  const ask: Ask = { id: interrupt.id, kind: 'interrupt', state: 'open', interrupt };
  if (interrupt.toolCallId !== undefined) ask.toolCallId = interrupt.toolCallId;
  // An expiresAt that does not parse leaves the interrupt unexpired, as AG-UI 1.0 says consumers read it.
  if (interrupt.expiresAt !== undefined && !Number.isNaN(Date.parse(interrupt.expiresAt))) {
    ask.expiresAt = new Date(Date.parse(interrupt.expiresAt)).toISOString();
  }
  return ask;
}

/** The earliest expiry among open asks: when the whole set can no longer be answered. */
export function earliestExpiry(asks: Record<string, Ask> | undefined): string | undefined {
  let earliest: string | undefined;
  for (const ask of Object.values(asks ?? {})) {
    if (ask.state !== 'open' || ask.expiresAt === undefined) continue;
    if (earliest === undefined || ask.expiresAt < earliest) earliest = ask.expiresAt;
  }
  return earliest;
}

export function openAsks(run: Run | undefined): Ask[] {
  return Object.values(run?.asks ?? {}).filter((ask) => ask.state === 'open');
}
