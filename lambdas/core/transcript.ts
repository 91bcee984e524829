import { EventType } from '@ag-ui/core';
import type { AgUiEventRecord } from './model.js';

/**
 * What a run's stream has said so far, kept as the events pass: whether it started and ended,
 * and what it left open (messages, tool calls, steps). The end of a run is derived from this.
 */
export class RunTranscript {
  started = false;
  finished?: AgUiEventRecord;
  errored?: AgUiEventRecord;
  private readonly openMessages = new Set<string>();
  private readonly openReasoning = new Set<string>();
  private readonly openSteps = new Set<string>();
  private readonly streamingToolCalls = new Set<string>();
  /** Tool calls started in this run, in order, with whether a result came back. */
  private readonly toolCalls = new Map<string, { name: string; answered: boolean }>();

  get ended(): boolean {
    return this.finished !== undefined || this.errored !== undefined;
  }

  observe(event: AgUiEventRecord): void {
    const e = event as Record<string, unknown>;
    switch (event.type) {
      case EventType.RUN_STARTED:
        this.started = true;
        break;
      case EventType.RUN_FINISHED:
        this.finished = event;
        break;
      case EventType.RUN_ERROR:
        this.errored = event;
        break;
      case EventType.TEXT_MESSAGE_START:
        this.openMessages.add(String(e.messageId));
        break;
      case EventType.TEXT_MESSAGE_END:
        this.openMessages.delete(String(e.messageId));
        break;
      case EventType.REASONING_MESSAGE_START:
        this.openReasoning.add(String(e.messageId));
        break;
      case EventType.REASONING_MESSAGE_END:
        this.openReasoning.delete(String(e.messageId));
        break;
      case EventType.STEP_STARTED:
        this.openSteps.add(String(e.stepName));
        break;
      case EventType.STEP_FINISHED:
        this.openSteps.delete(String(e.stepName));
        break;
      case EventType.TOOL_CALL_START:
        this.streamingToolCalls.add(String(e.toolCallId));
        if (!this.toolCalls.has(String(e.toolCallId))) {
          this.toolCalls.set(String(e.toolCallId), { name: String(e.toolCallName), answered: false });
        }
        break;
      case EventType.TOOL_CALL_END:
        this.streamingToolCalls.delete(String(e.toolCallId));
        break;
      case EventType.TOOL_CALL_RESULT: {
        const call = this.toolCalls.get(String(e.toolCallId));
        if (call) call.answered = true;
        break;
      }
    }
  }

  /**
   * Why an event is one the stream can do without, or nothing: a second RUN_STARTED, or the end of
   * a message, tool call or step that is not open (closed twice). The stock client refuses such an
   * event, and leaving it out changes nothing of what the stream says.
   */
  redundant(event: AgUiEventRecord): string | undefined {
    const e = event as Record<string, unknown>;
    switch (event.type) {
      case EventType.RUN_STARTED:
        return this.started ? 'a second RUN_STARTED' : undefined;
      case EventType.TEXT_MESSAGE_END:
        return this.openMessages.has(String(e.messageId)) ? undefined : `TEXT_MESSAGE_END of message "${String(e.messageId)}", which is not open`;
      case EventType.REASONING_MESSAGE_END:
        return this.openReasoning.has(String(e.messageId)) ? undefined : `REASONING_MESSAGE_END of message "${String(e.messageId)}", which is not open`;
      case EventType.TOOL_CALL_END:
        return this.streamingToolCalls.has(String(e.toolCallId)) ? undefined : `TOOL_CALL_END of tool call "${String(e.toolCallId)}", which is not open`;
      case EventType.STEP_FINISHED:
        return this.openSteps.has(String(e.stepName)) ? undefined : `STEP_FINISHED of step "${String(e.stepName)}", which is not open`;
      default:
        return undefined;
    }
  }

  /** Tool calls this run started and left without a result, in the order they were made. */
  unansweredToolCalls(): { toolCallId: string; toolCallName: string }[] {
    const open: { toolCallId: string; toolCallName: string }[] = [];
    for (const [toolCallId, call] of this.toolCalls) {
      if (!call.answered) open.push({ toolCallId, toolCallName: call.name });
    }
    return open;
  }

  /**
   * Events that close what the stream left open, so that a run stopped part-way still reads
   * as a well-formed AG-UI stream (a stock client refuses RUN_FINISHED over open messages).
   */
  closingEvents(): AgUiEventRecord[] {
    const events: AgUiEventRecord[] = [];
    for (const messageId of this.openMessages) events.push({ type: EventType.TEXT_MESSAGE_END, messageId });
    for (const messageId of this.openReasoning) events.push({ type: EventType.REASONING_MESSAGE_END, messageId });
    for (const toolCallId of this.streamingToolCalls) events.push({ type: EventType.TOOL_CALL_END, toolCallId });
    for (const stepName of this.openSteps) events.push({ type: EventType.STEP_FINISHED, stepName });
    return events;
  }
}
