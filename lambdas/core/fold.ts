import { EventType, type AssistantMessage, type Message, type ToolMessage } from '@ag-ui/core';
import { logOf } from './log.js';
import type { RunStore } from './ports.js';
import type { Run, StoredEvent } from './model.js';

/**
 * The conversation of a thread, folded from its record: each run's input messages (AG-UI
 * callers resend the history, so a message id is kept once) followed by what the agent said.
 */
export async function foldThread(store: RunStore, runs: readonly Run[]): Promise<Message[]> {
  const logs = await Promise.all(runs.map((run) => logOf(store, run)));
  const fold = new MessageFold();
  runs.forEach((run, i) => {
    for (const message of run.input.messages) fold.add(message);
    for (const stored of logs[i]) fold.apply(stored);
  });
  return fold.messages();
}

export class MessageFold {
  private readonly byId = new Map<string, Message>();

  add(message: Message): void {
    if (!this.byId.has(message.id)) this.byId.set(message.id, structuredClone(message));
  }

  apply({ event }: StoredEvent): void {
    const e = event as Record<string, unknown>;
    switch (event.type) {
      case EventType.TEXT_MESSAGE_START:
        this.add({ id: String(e.messageId), role: 'assistant', content: '' } as AssistantMessage);
        break;
      case EventType.TEXT_MESSAGE_CONTENT:
      case EventType.TEXT_MESSAGE_CHUNK: {
        const id = String(e.messageId ?? '');
        if (!id) break;
        this.add({ id, role: 'assistant', content: '' } as AssistantMessage);
        const message = this.byId.get(id) as { content?: unknown };
        message.content = `${typeof message.content === 'string' ? message.content : ''}${String(e.delta ?? '')}`;
        break;
      }
      case EventType.TOOL_CALL_START: {
        const parentId = String(e.parentMessageId ?? e.toolCallId);
        this.add({ id: parentId, role: 'assistant', toolCalls: [] } as AssistantMessage);
        const parent = this.byId.get(parentId) as AssistantMessage;
        parent.toolCalls = [
          ...(parent.toolCalls ?? []),
          { id: String(e.toolCallId), type: 'function', function: { name: String(e.toolCallName), arguments: '' } },
        ];
        break;
      }
      case EventType.TOOL_CALL_ARGS: {
        for (const message of this.byId.values()) {
          const call = (message as AssistantMessage).toolCalls?.find((c) => c.id === e.toolCallId);
          if (call) call.function.arguments += String(e.delta ?? '');
        }
        break;
      }
      case EventType.TOOL_CALL_RESULT:
        this.add({
          id: String(e.messageId),
          role: 'tool',
          toolCallId: String(e.toolCallId),
          content: String(e.content ?? ''),
        } as ToolMessage);
        break;
    }
  }

  messages(): Message[] {
    return [...this.byId.values()];
  }
}
