import { contentToText, EventType, type RunAgentInput } from '@ag-ui/core';
import type { Agent } from '../core/model.js';
import type { Clock, IdSource, Provider, ProviderContext } from '../core/ports.js';
import { providerKind } from './definition.js';

export interface DemoProviderOptions {
  clock: Pick<Clock, 'now'>;
  ids: IdSource;
  /** Pause between the chunks of a text message, so a stream can be watched arriving. None by default. */
  chunkDelayMs?: number;
  /** Pause between the chunks of `/slow N`. */
  slowIntervalMs?: number;
}

/** The `demo` kind: the built-in agent, in-process. Its definitions have no fields of their own. */
export const demoKind = providerKind({
  kind: 'demo',
  fields: {},
  spec: () => ({ kind: 'demo' }),
  adminView: () => ({}),
  create: (runtime) => new DemoProvider({ clock: runtime.clock, ids: runtime.ids, slowIntervalMs: runtime.demoSlowIntervalMs }),
});

/** The demo agent as `npm start` registers it. */
export const DEMO_AGENT: Agent = {
  id: 'demo',
  description: 'The built-in demo agent: echoes text; /ask, /tool, /slow N and /fail show interrupts, tool calls, queueing and failures.',
  provider: { kind: 'demo' },
  takesInterjections: false,
  timeoutSeconds: 900,
  idleTimeoutSeconds: 300,
};

/** The frontend tool `/tool` calls: the caller is expected to answer it with a tool message. */
export const DEMO_TOOL_NAME = 'confirm_action';

const CONFIRMATION_SCHEMA = {
  type: 'object',
  properties: { approved: { type: 'boolean' } },
  required: ['approved'],
};

const DEFAULT_SLOW_CHUNKS = 10;

/** What the demo agent was asked to do, read from the run's input. */
type Request =
  | { kind: 'say'; text: string }
  | { kind: 'ask'; seconds?: number }
  | { kind: 'tool' }
  | { kind: 'slow'; chunks: number }
  | { kind: 'fail' };

/**
 * The built-in `demo` agent: deterministic and in-process, so the gateway can be tried and its
 * gaps exercised without an agent of one's own. It reads the last user message: `/ask [seconds]`
 * leaves an interrupt, `/tool` leaves a frontend tool call, `/slow N` streams slowly, `/fail`
 * fails; anything else is echoed. A run that answers (resume entries, or a tool message last)
 * says what the answer was.
 */
export class DemoProvider implements Provider {
  private readonly clock: Pick<Clock, 'now'>;
  private readonly ids: IdSource;
  private readonly chunkDelayMs: number;
  private readonly slowIntervalMs: number;

  constructor(options: DemoProviderOptions) {
    this.clock = options.clock;
    this.ids = options.ids;
    this.chunkDelayMs = options.chunkDelayMs ?? 0;
    this.slowIntervalMs = options.slowIntervalMs ?? 100;
  }

  async *run(input: RunAgentInput, { signal }: ProviderContext): AsyncIterable<unknown> {
    const { threadId, runId } = input;
    if (signal.aborted) return;
    yield this.event(EventType.RUN_STARTED, { threadId, runId });

    const request = readRequest(input);
    switch (request.kind) {
      case 'say':
        yield* this.say(request.text, signal);
        if (signal.aborted) return;
        yield this.event(EventType.RUN_FINISHED, { threadId, runId, outcome: { type: 'success' } });
        return;

      case 'ask': {
        yield* this.say('I need your confirmation.', signal);
        if (signal.aborted) return;
        const interrupt = {
          id: this.ids.newId(),
          reason: 'confirmation',
          message: 'Confirm?',
          responseSchema: CONFIRMATION_SCHEMA,
          ...(request.seconds === undefined
            ? {}
            : { expiresAt: new Date(this.clock.now() + request.seconds * 1000).toISOString() }),
        };
        yield this.event(EventType.RUN_FINISHED, {
          threadId,
          runId,
          outcome: { type: 'interrupt', interrupts: [interrupt] },
        });
        return;
      }

      case 'tool': {
        const toolCallId = this.ids.newId();
        yield this.event(EventType.TOOL_CALL_START, { toolCallId, toolCallName: DEMO_TOOL_NAME });
        yield this.event(EventType.TOOL_CALL_ARGS, {
          toolCallId,
          delta: JSON.stringify({ action: 'continue the demo' }),
        });
        yield this.event(EventType.TOOL_CALL_END, { toolCallId });
        // No TOOL_CALL_RESULT: the call is left for the caller to answer in the next input.
        yield this.event(EventType.RUN_FINISHED, {
          threadId,
          runId,
          outcome: { type: 'success', pendingToolCallIds: [toolCallId] },
        });
        return;
      }

      case 'slow': {
        const messageId = this.ids.newId();
        yield this.event(EventType.TEXT_MESSAGE_START, { messageId, role: 'assistant' });
        for (let chunk = 1; chunk <= request.chunks; chunk++) {
          if (chunk > 1) await pause(this.slowIntervalMs, signal);
          if (signal.aborted) return;
          yield this.event(EventType.TEXT_MESSAGE_CONTENT, { messageId, delta: `${chunk} ` });
        }
        yield this.event(EventType.TEXT_MESSAGE_END, { messageId });
        yield this.event(EventType.RUN_FINISHED, { threadId, runId, outcome: { type: 'success' } });
        return;
      }

      case 'fail':
        yield this.event(EventType.RUN_ERROR, { message: 'The demo agent failed, as asked.', code: 'demo_failure' });
        return;
    }
  }

  /** One assistant text message, in word-sized chunks. Stops part-way when the signal aborts. */
  private async *say(text: string, signal: AbortSignal): AsyncGenerator<unknown> {
    const messageId = this.ids.newId();
    yield this.event(EventType.TEXT_MESSAGE_START, { messageId, role: 'assistant' });
    const chunks = text.match(/\S+\s*/g) ?? [text];
    for (const [index, delta] of chunks.entries()) {
      if (index > 0 && this.chunkDelayMs > 0) await pause(this.chunkDelayMs, signal);
      if (signal.aborted) return;
      yield this.event(EventType.TEXT_MESSAGE_CONTENT, { messageId, delta });
    }
    yield this.event(EventType.TEXT_MESSAGE_END, { messageId });
  }

  private event(type: EventType, fields: Record<string, unknown>): Record<string, unknown> {
    // AG-UI timestamps are integers (milliseconds since the epoch).
    return { type, timestamp: Math.floor(this.clock.now()), ...fields };
  }
}

function readRequest(input: RunAgentInput): Request {
  if (input.resume && input.resume.length > 0) {
    const resolved = input.resume.find((entry) => entry.status === 'resolved');
    const answer = resolved ? JSON.stringify(resolved.payload ?? null) : 'cancelled';
    return { kind: 'say', text: `answer: ${answer}` };
  }

  const last = input.messages.at(-1);
  if (last?.role === 'tool') return { kind: 'say', text: `tool result: ${contentToText(last.content)}` };

  const userMessage = input.messages.findLast((message) => message.role === 'user');
  const text = userMessage?.role === 'user' ? contentToText(userMessage.content) : '';
  return readCommand(text);
}

function readCommand(text: string): Request {
  const command = text.trim();
  const ask = /^\/ask(?:\s+(\d+(?:\.\d+)?))?$/.exec(command);
  if (ask) return ask[1] === undefined ? { kind: 'ask' } : { kind: 'ask', seconds: Number(ask[1]) };
  if (command === '/tool') return { kind: 'tool' };
  const slow = /^\/slow(?:\s+(\d+))?$/.exec(command);
  if (slow) return { kind: 'slow', chunks: slow[1] === undefined ? DEFAULT_SLOW_CHUNKS : Number(slow[1]) };
  if (command === '/fail') return { kind: 'fail' };
  return { kind: 'say', text: `echo: ${text}` };
}

/** Waits `ms`, or less when the signal aborts first (the caller checks the signal). */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve();
      return;
    }
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
