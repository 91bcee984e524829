import type { AddressInfo } from 'node:net';
import { HttpAgent, type BaseEvent, type Message, type RunAgentInput } from '@ag-ui/client';
import { serve, type ServerType } from '@hono/node-server';
import { createParser } from 'eventsource-parser';
import { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_TOOL_NAME } from '../../lambdas/providers/demo.js';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { startTestGateway, userMessage } from '../support/gateway.js';

/**
 * A caller shaped like CopilotKit in front of funduq (its own runtime cannot run here: it installs
 * telemetry and a large tree of model SDKs), faithful in the two things that race:
 * - the runtime, like CopilotKit's in-memory agent runner, runs an agent through the stock
 *   HttpAgent, relays each event to its client as it comes, and holds the thread "running" until
 *   the agent's run completes, which for HttpAgent is when funduq's response ends; a run sent for
 *   a thread still running is refused with "Thread already running";
 * - the client, like CopilotKitCore with a frontend tool, answers a RUN_FINISHED whose outcome
 *   names pendingToolCallIds at once, with the tool's result in a follow-up run, while the first
 *   response may still be open.
 */
class CopilotKitLikeRuntime {
  private readonly running = new Set<string>();
  private server: ServerType | undefined;
  url = '';

  constructor(private readonly agentUrl: string) {}

  async start(): Promise<void> {
    const app = new Hono();
    app.post('/agent/run', async (c) => {
      const input = (await c.req.json()) as RunAgentInput;
      if (this.running.has(input.threadId)) return c.json({ error: 'Thread already running' }, 409);
      this.running.add(input.threadId);
      return streamSSE(c, async (sse) => {
        const relayed: Promise<void>[] = [];
        try {
          const agent = new HttpAgent({ url: this.agentUrl, threadId: input.threadId });
          agent.messages = input.messages;
          await agent.runAgent(
            { runId: input.runId, tools: input.tools },
            { onEvent: ({ event }) => void relayed.push(sse.writeSSE({ data: JSON.stringify(event) })) },
          );
        } finally {
          this.running.delete(input.threadId);
          await Promise.all(relayed);
        }
      });
    });
    this.server = await new Promise<ServerType>((resolve) => {
      const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
    });
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/agent/run`;
  }

  close(): void {
    this.server?.close();
  }
}

interface Turn {
  events: BaseEvent[];
  /** The follow-up the client sent the moment RUN_FINISHED named pending tool calls. */
  followUp?: Promise<Turn>;
  refused?: string;
}

/** One run as the client sends it through the runtime, answering pending frontend tool calls at once. */
async function run(runtime: CopilotKitLikeRuntime, threadId: string, messages: Message[]): Promise<Turn> {
  const response = await fetch(runtime.url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ threadId, runId: crypto.randomUUID(), messages, tools: [], context: [], state: {}, forwardedProps: {} }),
  });
  if (!response.ok) return { events: [], refused: ((await response.json()) as { error: string }).error };
  const turn: Turn = { events: [] };
  const calls = new Map<string, { name: string; args: string }>();
  const parser = createParser({
    onEvent: ({ data }) => {
      const event = JSON.parse(data) as BaseEvent & Record<string, any>;
      turn.events.push(event);
      if (event.type === 'TOOL_CALL_START') calls.set(event.toolCallId, { name: event.toolCallName, args: '' });
      if (event.type === 'TOOL_CALL_ARGS') calls.get(event.toolCallId)!.args += event.delta;
      const pending: string[] = event.type === 'RUN_FINISHED' ? (event.outcome?.pendingToolCallIds ?? []) : [];
      if (pending.length > 0) {
        // The frontend tool runs and its result goes back at once: no wait for this response to end.
        const answered: Message[] = [
          ...messages,
          {
            id: crypto.randomUUID(),
            role: 'assistant',
            toolCalls: pending.map((id) => ({ id, type: 'function' as const, function: { name: calls.get(id)!.name, arguments: calls.get(id)!.args } })),
          },
          ...pending.map((id): Message => ({ id: crypto.randomUUID(), role: 'tool', toolCallId: id, content: 'confirmed' })),
        ];
        turn.followUp = run(runtime, threadId, answered);
      }
    },
  });
  const decoder = new TextDecoder();
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) parser.feed(decoder.decode(chunk, { stream: true }));
  return turn;
}

let gateway: LocalGateway;
let runtime: CopilotKitLikeRuntime;

beforeAll(async () => {
  gateway = await startTestGateway();
  runtime = new CopilotKitLikeRuntime(`${gateway.url}/agui/demo`);
  await runtime.start();
});
afterAll(async () => {
  runtime?.close();
  await gateway?.close();
});

describe('a CopilotKit-like caller', () => {
  it('has its frontend-tool follow-up taken every time: the response ends the moment RUN_FINISHED is written', async () => {
    for (let attempt = 1; attempt <= 10; attempt++) {
      const first = await run(runtime, `copilot-${Date.now()}-${attempt}`, [userMessage('/tool')]);
      expect(first.events.at(-1)).toMatchObject({ type: 'RUN_FINISHED', outcome: { pendingToolCallIds: [expect.any(String)] } });
      expect(first.events.find((e) => e.type === 'TOOL_CALL_START')).toMatchObject({ toolCallName: DEMO_TOOL_NAME });
      const followUp = await first.followUp!;
      expect({ attempt, refused: followUp.refused }).toEqual({ attempt, refused: undefined });
      const said = followUp.events.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').map((e) => (e as { delta?: string }).delta).join('');
      expect(said).toBe('tool result: confirmed');
      expect(followUp.events.at(-1)).toMatchObject({ type: 'RUN_FINISHED' });
    }
  });
});
