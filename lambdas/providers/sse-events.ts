import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { RunFailure } from '../core/errors.js';

/** How much of a malformed event a failure message quotes. */
const EVENT_EXCERPT_CHARS = 200;

/**
 * An agent's SSE stream as AG-UI events: each yielded once it is complete, so the caller sees the
 * agent's events while the agent is still running. `where` names the agent in failures.
 */
export async function* sseEvents(chunks: AsyncIterable<Uint8Array>, where: string): AsyncGenerator<unknown> {
  const complete: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (message) => complete.push(message) });
  const decoder = new TextDecoder();
  for await (const chunk of chunks) {
    parser.feed(decoder.decode(chunk, { stream: true }));
    for (const message of complete.splice(0)) yield readEvent(message, where);
  }
  // At the end of the stream an event without its closing blank line is discarded
  // (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation).
  parser.feed(decoder.decode());
  for (const message of complete.splice(0)) yield readEvent(message, where);
}

function readEvent(message: EventSourceMessage, where: string): unknown {
  let event: unknown;
  try {
    event = JSON.parse(message.data);
  } catch {
    throw malformed(where, 'data that is not JSON', message.data);
  }
  if (typeof event !== 'object' || event === null || Array.isArray(event)) {
    throw malformed(where, 'data that is not a JSON object', message.data);
  }
  if (typeof (event as { type?: unknown }).type !== 'string') {
    throw malformed(where, 'an event without a string "type"', message.data);
  }
  return event;
}

function malformed(where: string, what: string, data: string): RunFailure {
  const excerpt = data.length > EVENT_EXCERPT_CHARS ? `${data.slice(0, EVENT_EXCERPT_CHARS)}…` : data;
  return new RunFailure('provider_sent_malformed_event', `${where} sent ${what}: ${excerpt}`);
}
