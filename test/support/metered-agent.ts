import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RunAgentInput } from '@ag-ui/core';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';

/** The token usage the metered agent reports for every run. */
export const USAGE = [{ provider: 'openai', model: 'm1', inputTokens: 100, outputTokens: 20, totalTokens: 120 }];

export interface MeteredAgent {
  url: string;
  close(): Promise<void>;
}

/** A stock AG-UI agent on loopback that reports its token usage on RUN_FINISHED (or on RUN_ERROR, asked to `fail`). */
export async function startMeteredAgent(): Promise<MeteredAgent> {
  const app = new Hono().post('/', async (c) => {
    const input = (await c.req.json()) as RunAgentInput;
    const said = String(input.messages.findLast((m) => m.role === 'user')?.content ?? '');
    return streamSSE(c, async (stream) => {
      const send = (event: Record<string, unknown>) => stream.writeSSE({ data: JSON.stringify(event) });
      await send({ type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId });
      await send({ type: 'TEXT_MESSAGE_START', messageId: `m-${input.runId}`, role: 'assistant' });
      await send({ type: 'TEXT_MESSAGE_CONTENT', messageId: `m-${input.runId}`, delta: 'counted' });
      await send({ type: 'TEXT_MESSAGE_END', messageId: `m-${input.runId}` });
      if (said === 'fail') await send({ type: 'RUN_ERROR', message: 'no', code: 'refused', usage: USAGE });
      else await send({ type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId, usage: USAGE });
    });
  });
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s as Server));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
