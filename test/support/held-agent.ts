import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RunAgentInput } from '@ag-ui/client';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';

/**
 * A stock AG-UI agent on loopback that holds every run after RUN_STARTED until the test lets go:
 * runs stay `running` exactly as long as a test needs. It records the runs in the order it saw
 * them, what each received, and which were closed on it (a cancel).
 */
export interface HeldAgent {
  url: string;
  /** The inputs in the order the agent received them. */
  received: RunAgentInput[];
  /** The request headers of each, in the same order. */
  headers: Record<string, string>[];
  /** Run ids whose request was closed before the agent finished (the gateway asked it to stop). */
  closed: Set<string>;
  /** Lets every run that waits, and every later one, finish. */
  release(): void;
  close(): Promise<void>;
}

export async function startHeldAgent(): Promise<HeldAgent> {
  const received: RunAgentInput[] = [];
  const headers: Record<string, string>[] = [];
  const closed = new Set<string>();
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const app = new Hono();
  app.post('*', async (c) => {
    const input = (await c.req.json()) as RunAgentInput;
    received.push(input);
    headers.push(c.req.header());
    return streamSSE(c, async (stream) => {
      const send = (event: Record<string, unknown>) => stream.writeSSE({ data: JSON.stringify(event) });
      await send({ type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId });
      const aborted = new Promise<void>((resolve) => stream.onAbort(resolve));
      await Promise.race([released, aborted]);
      if (stream.aborted) {
        closed.add(input.runId);
        return;
      }
      const messageId = `m-${input.runId}`;
      await send({ type: 'TEXT_MESSAGE_START', messageId, role: 'assistant' });
      await send({ type: 'TEXT_MESSAGE_CONTENT', messageId, delta: `done: ${input.runId}` });
      await send({ type: 'TEXT_MESSAGE_END', messageId });
      await send({ type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId });
    });
  });
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s as Server));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/agent`,
    received,
    headers,
    closed,
    release,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
