import { HttpAgent, type Message } from '@ag-ui/client';
import { createParser } from 'eventsource-parser';
import { startLocalGateway, type LocalGateway, type LocalSettings } from '../../lambdas/runtimes/local.js';
import { TEST_STORE } from './stores.js';

/** The local gateway on a free loopback port, on the store under test (see `TEST_STORE`), data in memory unless a dataDir is given. */
export function startTestGateway(settings: Partial<LocalSettings> = {}): Promise<LocalGateway> {
  return startLocalGateway({
    host: '127.0.0.1',
    port: 0,
    threadQueueLimit: 8,
    heartbeatMs: 15_000,
    demoSlowIntervalMs: 20,
    store: TEST_STORE,
    ...settings,
  });
}

/** A stock AG-UI client for one thread of an agent behind the gateway. */
export function aguiAgent(gateway: { url: string }, threadId: string, agentId = 'demo'): HttpAgent {
  return new HttpAgent({ url: `${gateway.url}/agui/${agentId}`, threadId });
}

let counter = 0;
export function userMessage(content: string): Message {
  counter += 1;
  return { id: `user-${Date.now()}-${counter}`, role: 'user', content };
}

/** The assistant's text in a client's messages. */
export function assistantText(messages: readonly Message[]): string[] {
  return messages.filter((m) => m.role === 'assistant' && typeof m.content === 'string').map((m) => m.content as string);
}

export interface SseEvent {
  id?: string;
  data: Record<string, unknown>;
}

/** Reads a whole SSE response (the replay route has no stock client: AG-UI defines no replay). */
export async function readSse(response: Response): Promise<{ events: SseEvent[]; comments: string[] }> {
  const events: SseEvent[] = [];
  const comments: string[] = [];
  const parser = createParser({
    onEvent: (event) => events.push({ id: event.id, data: JSON.parse(event.data) as Record<string, unknown> }),
    onComment: (comment) => comments.push(comment),
  });
  const decoder = new TextDecoder();
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) parser.feed(decoder.decode(chunk, { stream: true }));
  return { events, comments };
}

/** Reads the first `count` events of an SSE response and leaves the rest unread (the connection stays open). */
export async function readFirstSse(response: Response, count: number): Promise<SseEvent[]> {
  return readSseUntil(response, (_, index) => index + 1 >= count);
}

/** The events of an SSE response up to the first `until` accepts, read the moment it arrives (the stream is left open). */
export async function readSseUntil(response: Response, until: (event: SseEvent, index: number) => boolean): Promise<SseEvent[]> {
  const events: SseEvent[] = [];
  let found = false;
  const parser = createParser({
    onEvent: (event) => {
      if (found) return;
      const parsed = { id: event.id, data: JSON.parse(event.data) as Record<string, unknown> };
      events.push(parsed);
      found = until(parsed, events.length - 1);
    },
  });
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  while (!found) {
    const { value, done } = await reader.read();
    if (done) break;
    parser.feed(decoder.decode(value, { stream: true }));
  }
  return events;
}
