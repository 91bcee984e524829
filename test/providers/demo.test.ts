import type { Message, ResumeEntry, RunAgentInput } from '@ag-ui/core';
import { EventSchema } from '@ag-ui/core/schemas';
import { describe, expect, it } from 'vitest';
import type { Agent } from '../../lambdas/core/model.js';
import type { ProviderContext } from '../../lambdas/core/ports.js';
import { DEMO_TOOL_NAME, DemoProvider } from '../../lambdas/providers/demo.js';

type Event = { type: string } & Record<string, unknown>;

const NOW = Date.parse('2030-01-01T00:00:00.000Z');

const DEMO_AGENT: Agent = {
  id: 'demo',
  description: 'the built-in demo agent',
  provider: { kind: 'demo' },
  takesInterjections: false,
  timeoutSeconds: 60,
  idleTimeoutSeconds: 30,
};

function demo(options: { chunkDelayMs?: number; slowIntervalMs?: number } = {}) {
  let next = 0;
  return new DemoProvider({ clock: { now: () => NOW }, ids: { newId: () => `id-${++next}` }, ...options });
}

function context(signal: AbortSignal = new AbortController().signal): ProviderContext {
  return { agent: DEMO_AGENT, signal, deadline: NOW + 60_000, heartbeat: () => {} };
}

function input(messages: Message[], resume?: ResumeEntry[]): RunAgentInput {
  return { threadId: 'thread-1', runId: 'run-1', messages, tools: [], context: [], ...(resume ? { resume } : {}) };
}

function said(text: string): RunAgentInput {
  return input([{ id: 'u1', role: 'user', content: text }]);
}

async function collect(events: AsyncIterable<unknown>): Promise<Event[]> {
  const collected: Event[] = [];
  for await (const event of events) {
    // The core validates every event with @ag-ui/core's schema; the demo agent must pass it.
    expect(EventSchema.safeParse(event).success, JSON.stringify(event)).toBe(true);
    collected.push(event as Event);
  }
  return collected;
}

function types(events: Event[]): string[] {
  return events.map((event) => event.type);
}

function text(events: Event[]): string {
  return events
    .filter((event) => event.type === 'TEXT_MESSAGE_CONTENT')
    .map((event) => event.delta)
    .join('');
}

describe('DemoProvider', () => {
  it('echoes any text as an assistant message streamed in several chunks', async () => {
    const events = await collect(demo().run(said('hello there, world'), context()));

    expect(types(events)).toEqual([
      'RUN_STARTED',
      'TEXT_MESSAGE_START',
      'TEXT_MESSAGE_CONTENT',
      'TEXT_MESSAGE_CONTENT',
      'TEXT_MESSAGE_CONTENT',
      'TEXT_MESSAGE_CONTENT',
      'TEXT_MESSAGE_END',
      'RUN_FINISHED',
    ]);
    expect(text(events)).toBe('echo: hello there, world');
    expect(events[0]).toMatchObject({ threadId: 'thread-1', runId: 'run-1' });
    expect(events[1]).toMatchObject({ role: 'assistant', messageId: 'id-1' });
    expect(events.at(-1)).toMatchObject({ threadId: 'thread-1', runId: 'run-1' });
  });

  it('stamps every event with the injected clock', async () => {
    const events = await collect(demo().run(said('hi'), context()));

    expect(events.map((event) => event.timestamp)).toEqual(events.map(() => NOW));
  });

  it('reads the last user message, joining its text parts', async () => {
    const run = input([
      { id: 'u1', role: 'user', content: 'first' },
      { id: 'a1', role: 'assistant', content: 'echo: first' },
      {
        id: 'u2',
        role: 'user',
        content: [
          { type: 'text', text: 'second ' },
          { type: 'image', source: { type: 'url', value: 'https://example.com/cat.png' } },
          { type: 'text', text: 'message' },
        ],
      },
    ]);

    expect(text(await collect(demo().run(run, context())))).toBe('echo: second message');
  });

  it('ends an /ask run with a confirmation interrupt that does not expire', async () => {
    const events = await collect(demo().run(said('/ask'), context()));

    expect(types(events)).toEqual([
      'RUN_STARTED',
      'TEXT_MESSAGE_START',
      ...events.filter((event) => event.type === 'TEXT_MESSAGE_CONTENT').map(() => 'TEXT_MESSAGE_CONTENT'),
      'TEXT_MESSAGE_END',
      'RUN_FINISHED',
    ]);
    expect(text(events).length).toBeGreaterThan(0);
    expect(events.at(-1)?.outcome).toEqual({
      type: 'interrupt',
      interrupts: [
        {
          id: 'id-2',
          reason: 'confirmation',
          message: 'Confirm?',
          responseSchema: { type: 'object', properties: { approved: { type: 'boolean' } }, required: ['approved'] },
        },
      ],
    });
  });

  it('gives an /ask interrupt an expiresAt that many seconds after the clock reads', async () => {
    const events = await collect(demo().run(said('/ask 90'), context()));

    const outcome = events.at(-1)?.outcome as { interrupts: { expiresAt?: string }[] };
    expect(outcome.interrupts[0].expiresAt).toBe('2030-01-01T00:01:30.000Z');
  });

  it('answers a resumed run with the payload of the first resolved entry', async () => {
    const run = input(
      [{ id: 'u1', role: 'user', content: '/ask' }],
      [
        { interruptId: 'i0', status: 'cancelled' },
        { interruptId: 'i1', status: 'resolved', payload: { approved: true } },
        { interruptId: 'i2', status: 'resolved', payload: { approved: false } },
      ],
    );

    const events = await collect(demo().run(run, context()));

    expect(types(events).at(0)).toBe('RUN_STARTED');
    expect(text(events)).toBe('answer: {"approved":true}');
    expect(events.at(-1)).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'success' } });
  });

  it('says the answer was cancelled when every resume entry was cancelled', async () => {
    const run = input([{ id: 'u1', role: 'user', content: '/ask' }], [{ interruptId: 'i1', status: 'cancelled' }]);

    const events = await collect(demo().run(run, context()));

    expect(text(events)).toBe('answer: cancelled');
    expect(events.at(-1)).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'success' } });
  });

  it('leaves a /tool call to a frontend tool open, with no result', async () => {
    const events = await collect(demo().run(said('/tool'), context()));

    expect(types(events)).toEqual(['RUN_STARTED', 'TOOL_CALL_START', 'TOOL_CALL_ARGS', 'TOOL_CALL_END', 'RUN_FINISHED']);
    expect(events[1]).toMatchObject({ toolCallId: 'id-1', toolCallName: DEMO_TOOL_NAME });
    expect(JSON.parse(String(events[2].delta))).toEqual(expect.any(Object));
    expect(events.at(-1)?.outcome).toEqual({ type: 'success', pendingToolCallIds: ['id-1'] });
  });

  it('says the tool result when the last message answers the tool call', async () => {
    const run = input([
      { id: 'u1', role: 'user', content: '/tool' },
      {
        id: 'a1',
        role: 'assistant',
        toolCalls: [{ id: 'id-1', type: 'function', function: { name: DEMO_TOOL_NAME, arguments: '{}' } }],
      },
      { id: 't1', role: 'tool', toolCallId: 'id-1', content: 'approved' },
    ]);

    const events = await collect(demo().run(run, context()));

    expect(text(events)).toBe('tool result: approved');
    expect(events.at(-1)).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'success' } });
  });

  it('streams /slow N as N chunks and finishes', async () => {
    const events = await collect(demo({ slowIntervalMs: 1 }).run(said('/slow 4'), context()));

    expect(types(events)).toEqual([
      'RUN_STARTED',
      'TEXT_MESSAGE_START',
      'TEXT_MESSAGE_CONTENT',
      'TEXT_MESSAGE_CONTENT',
      'TEXT_MESSAGE_CONTENT',
      'TEXT_MESSAGE_CONTENT',
      'TEXT_MESSAGE_END',
      'RUN_FINISHED',
    ]);
  });

  it('stops /slow at once when the signal aborts, without RUN_FINISHED', async () => {
    const cancel = new AbortController();
    const run = demo({ slowIntervalMs: 60_000 }).run(said('/slow 5'), context(cancel.signal))[Symbol.asyncIterator]();
    const seen: string[] = [];
    for (;;) {
      const { value } = await run.next();
      seen.push((value as Event).type);
      if ((value as Event).type === 'TEXT_MESSAGE_CONTENT') break;
    }

    const waiting = run.next();
    const abortedAt = performance.now();
    cancel.abort();
    const after = await waiting;

    expect(after.done).toBe(true);
    expect(performance.now() - abortedAt).toBeLessThan(1_000);
    expect(seen).toEqual(['RUN_STARTED', 'TEXT_MESSAGE_START', 'TEXT_MESSAGE_CONTENT']);
  });

  it('stops between the chunks of a message when the signal aborts', async () => {
    const cancel = new AbortController();
    const run = demo({ chunkDelayMs: 60_000 }).run(said('one two three'), context(cancel.signal))[Symbol.asyncIterator]();
    await run.next();
    await run.next();
    const first = await run.next();
    expect((first.value as Event).type).toBe('TEXT_MESSAGE_CONTENT');

    const waiting = run.next();
    cancel.abort();

    expect((await waiting).done).toBe(true);
  });

  it('ends a /fail run with RUN_ERROR demo_failure', async () => {
    const events = await collect(demo().run(said('/fail'), context()));

    expect(types(events)).toEqual(['RUN_STARTED', 'RUN_ERROR']);
    expect(events[1]).toMatchObject({ code: 'demo_failure', message: expect.any(String) });
  });

  it('yields nothing when the run is cancelled before it starts', async () => {
    const cancel = new AbortController();
    cancel.abort();

    expect(await collect(demo().run(said('hello'), context(cancel.signal)))).toEqual([]);
  });
});
