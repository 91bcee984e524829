import type { RunAgentInput } from '@ag-ui/core';
import type { Ask, AskState } from './model.js';

export type AskClosing = Record<string, { state: Exclude<AskState, 'open'>; closedByRunId?: string }>;

/**
 * How an input relates to the thread's open asks: an `answer` answers every one of them
 * (`resume[]` entries for interrupts, tool messages for plain tool calls); a `partial` answer is
 * an ordinary message; `none` names no ask at all.
 */
export type AnswerMatch =
  | { kind: 'answer'; closing: AskClosing }
  | { kind: 'partial' }
  | { kind: 'none' };

export function matchAnswer(input: RunAgentInput, open: readonly Ask[], answeringRunId: string): AnswerMatch {
  const resume = new Map((input.resume ?? []).map((entry) => [entry.interruptId, entry]));
  const toolResults = new Set(
    input.messages.flatMap((message) => (message.role === 'tool' ? [message.toolCallId] : [])),
  );
  if (open.length === 0) return { kind: 'none' };
  const closing: AskClosing = {};
  for (const ask of open) {
    if (ask.kind === 'interrupt') {
      const entry = resume.get(ask.id);
      if (!entry) return resume.size > 0 || hasAny(open, toolResults) ? { kind: 'partial' } : { kind: 'none' };
      // A resume entry with status "cancelled" abandons its interrupt rather than answering it.
      closing[ask.id] = { state: entry.status === 'cancelled' ? 'cancelled' : 'answered', closedByRunId: answeringRunId };
    } else {
      const answered = resume.has(ask.id) || (ask.toolCallId !== undefined && toolResults.has(ask.toolCallId));
      if (!answered) return resume.size > 0 || hasAny(open, toolResults) ? { kind: 'partial' } : { kind: 'none' };
      const entry = resume.get(ask.id);
      closing[ask.id] = { state: entry?.status === 'cancelled' ? 'cancelled' : 'answered', closedByRunId: answeringRunId };
    }
  }
  return { kind: 'answer', closing };
}

function hasAny(open: readonly Ask[], toolResults: ReadonlySet<string>): boolean {
  return open.some((ask) => ask.toolCallId !== undefined && toolResults.has(ask.toolCallId));
}

/** Asks the input's `resume[]` names, among all asks of the waiting run (open or not). */
export function namedAsks(input: RunAgentInput, asks: readonly Ask[]): Ask[] {
  const names = new Set((input.resume ?? []).map((entry) => entry.interruptId));
  return asks.filter((ask) => names.has(ask.id));
}
