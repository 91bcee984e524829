import type { StoredEvent } from '../core/model.js';

export interface SseOptions {
  /** A comment line at least this often keeps proxies (API Gateway drops a stream idle for 5 min) from closing it. */
  heartbeatMs: number;
  /** End the stream cleanly before a platform cap (Lambda: 15 min); the caller resumes with Last-Event-ID. */
  maxDurationMs?: number;
}

const encoder = new TextEncoder();

/**
 * Frames a run's events as SSE, one AG-UI event per SSE event with `id: <seq>`. The stream's
 * reader disconnecting stops the reading, never the run.
 */
export function sseStream(
  follow: (signal: AbortSignal) => AsyncIterable<StoredEvent>,
  options: SseOptions,
): ReadableStream<Uint8Array> {
  return eventStream(follow, (stored) => `id: ${stored.seq}\ndata: ${stored.json ?? JSON.stringify(stored.event)}\n\n`, options);
}

/**
 * An SSE body from an async source: each item framed by `frame`, a heartbeat comment while the
 * source is quiet, a clean end at `maxDurationMs`. A reader that goes away aborts the source's
 * signal; an error the source throws goes out as `onError`'s frame when given, else fails the body.
 */
export function eventStream<T>(
  produce: (signal: AbortSignal) => AsyncIterable<T>,
  frame: (item: T) => string,
  options: SseOptions & { onError?: (error: unknown) => string },
): ReadableStream<Uint8Array> {
  const stop = new AbortController();
  let heartbeat: ReturnType<typeof setInterval> | undefined;
  let deadline: ReturnType<typeof setTimeout> | undefined;
  const clear = () => {
    clearInterval(heartbeat);
    clearTimeout(deadline);
  };
  return new ReadableStream<Uint8Array>({
    start(controller) {
      heartbeat = setInterval(() => {
        try {
          controller.enqueue(encoder.encode(': heartbeat\n\n'));
        } catch {
          clear();
        }
      }, options.heartbeatMs);
      if (options.maxDurationMs !== undefined) deadline = setTimeout(() => stop.abort(), options.maxDurationMs);
      void (async () => {
        try {
          for await (const item of produce(stop.signal)) {
            if (stop.signal.aborted) break;
            controller.enqueue(encoder.encode(frame(item)));
          }
          controller.close();
        } catch (error) {
          // A reader that went away already closed the stream; anything else ends it with an error.
          if (stop.signal.aborted) return;
          if (options.onError) {
            controller.enqueue(encoder.encode(options.onError(error)));
            controller.close();
          } else {
            controller.error(error);
          }
        } finally {
          clear();
        }
      })();
    },
    cancel() {
      clear();
      stop.abort();
    },
  });
}

export const SSE_HEADERS = {
  'Content-Type': 'text/event-stream',
  'Cache-Control': 'no-cache',
  Connection: 'keep-alive',
  'X-Accel-Buffering': 'no',
} as const;
