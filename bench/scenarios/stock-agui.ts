import { randomUUID } from 'node:crypto';
import { HttpAgent } from '@ag-ui/client';
import { now } from '../support/sse-reader.js';

export interface StockRead {
  /** Request start to first event. */
  firstEventMs: number;
  /** Request start to last event. */
  totalMs: number;
  /** Per event: arrival − the agent's send time (`rawEvent.sentAt`). */
  latencies: number[];
  events: number;
  lastType: string | undefined;
  /** The run's RUN_ERROR, when it failed: its code and message. */
  error?: string;
}

/** One run read with the stock @ag-ui/client (`HttpAgent.runAgent`), every event time-stamped on arrival. */
export async function readWithStockClient(url: string, forwardedProps?: Record<string, unknown>, headers?: Record<string, string>): Promise<StockRead> {
  const agent = new HttpAgent({
    url,
    ...(headers ? { headers } : {}),
    threadId: randomUUID(),
    initialMessages: [{ id: randomUUID(), role: 'user', content: 'go' }],
  });
  const arrivals: number[] = [];
  const latencies: number[] = [];
  let lastType: string | undefined;
  let error: string | undefined;
  const startedAt = now();
  await agent.runAgent(forwardedProps ? { forwardedProps } : {}, {
    onEvent: ({ event }) => {
      const at = now();
      arrivals.push(at);
      lastType = event.type;
      if (event.type === 'RUN_ERROR') error = `${String((event as { code?: unknown }).code)}: ${String((event as { message?: unknown }).message)}`;
      const sentAt = (event.rawEvent as { sentAt?: number } | undefined)?.sentAt;
      if (typeof sentAt === 'number') latencies.push(at - sentAt);
    },
  });
  return {
    firstEventMs: arrivals[0] - startedAt,
    totalMs: arrivals[arrivals.length - 1] - startedAt,
    latencies,
    events: arrivals.length,
    lastType,
    ...(error ? { error } : {}),
  };
}
