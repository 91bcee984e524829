import type { StoredEvent } from '../core/model.js';

export interface SseOptions {
  /** A comment line at least this often keeps proxies (API Gateway drops a stream idle for 5 min) from closing it. */
  heartbeatMs: number;
  /** End the stream cleanly before a platform cap (Lambda: 15 min); the caller resumes with Last-Event-ID. */
  maxDurationMs?: number;
  /** Told when a reader that fell behind is ended (for the gateway's log). */
  onReaderBehind?: () => void;
}

const encoder = new TextEncoder();

/** How much of a source's frames are joined ahead of the reader: enough for a burst's batch, not a run's history. */
const JOINED_BYTES = 256 * 1024;

/**
 * Frames a run's events as SSE, one AG-UI event per SSE event with `id: <seq>`. The stream's
 * reader disconnecting stops the reading, never the run.
 */
export function sseStream(
  follow: (signal: AbortSignal) => AsyncIterable<StoredEvent>,
  options: SseOptions,
): ReadableStream<Uint8Array> {
  return eventStream((signal) => framedByTurn(follow(signal), eventFrame), (frames) => frames, options);
}

function eventFrame(stored: StoredEvent): string {
  return `id: ${stored.seq}\ndata: ${stored.json ?? JSON.stringify(stored.event)}\n\n`;
}

/**
 * The frames of what `source` yields within one turn of the event loop, joined: a run's events
 * come from the store in batches, and written one frame at a time, a burst would cost a chunk of
 * the body, a socket write and a TCP segment per event. A source that yields one item a turn (a
 * paced agent) still has each written as it comes, an immediate later. No more than `JOINED_BYTES`
 * (or one frame, if larger) is framed ahead of what was taken: the source is read only as fast as
 * the stream's reader takes.
 */
export async function* framedByTurn<T>(source: AsyncIterable<T>, frame: (item: T) => string): AsyncGenerator<string> {
  const iterator = source[Symbol.asyncIterator]();
  let frames = '';
  let room: (() => void) | undefined;
  let stopped = false;
  let ended = false;
  let failure: { error: unknown } | undefined;
  let wake: (() => void) | undefined;
  let turnEnd: ReturnType<typeof setImmediate> | undefined;
  const rouse = () => {
    turnEnd = undefined;
    wake?.();
    wake = undefined;
  };
  const pump = async () => {
    try {
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
        frames += frame(next.value);
        turnEnd ??= setImmediate(rouse);
        if (frames.length >= JOINED_BYTES) await new Promise<void>((resolve) => (room = resolve));
        if (stopped) {
          await iterator.return?.();
          break;
        }
      }
    } catch (error) {
      failure = { error };
    } finally {
      ended = true;
      clearImmediate(turnEnd);
      rouse();
    }
  };
  void pump();
  try {
    for (;;) {
      // Until the source ends, frames go out when their turn has ended.
      if (!ended && (frames === '' || turnEnd !== undefined)) {
        await new Promise<void>((resolve) => (wake = resolve));
        continue;
      }
      if (frames !== '') {
        const joined = frames;
        frames = '';
        room?.();
        room = undefined;
        yield joined;
        continue;
      }
      if (failure) throw failure.error;
      return;
    }
  } finally {
    // Taken no further (the stream ended early): a pump waiting for room lets the source go.
    stopped = true;
    room?.();
  }
}

/**
 * The first write of every stream, at once. Lambda response streaming sends the HTTP status and
 * headers only with the first write (the prelude goes out before it), so a run waiting in its
 * thread queue would otherwise answer nothing, not even 200, until its first heartbeat.
 */
export const SSE_OPENING = ': open\n\n';

/**
 * An SSE body from an async source: an opening comment at once, each item framed by `frame`, a
 * heartbeat comment while the source is quiet, a clean end at `maxDurationMs`. The source is read
 * only when the reader has taken what came before (the body is pulled: under @hono/node-server,
 * as the socket drains), so a reader that does not read costs one chunk, not the run. A reader that
 * has taken nothing for a whole heartbeat interval while something waited has fallen behind (or
 * is gone: under hono/aws-lambda's streamHandle, a write that failed ends the copy to the
 * response stream without cancelling this body): the stream is ended with a comment saying so,
 * and the caller resumes with Last-Event-ID. An error the source throws goes out as `onError`'s
 * frame when given, else fails the body.
 */
export function eventStream<T>(
  produce: (signal: AbortSignal) => AsyncIterable<T>,
  frame: (item: T) => string,
  options: SseOptions & { onError?: (error: unknown) => string },
): ReadableStream<Uint8Array> {
  const stop = new AbortController();
  let heartbeat: ReturnType<typeof setInterval> | undefined;
  let deadline: ReturnType<typeof setTimeout> | undefined;
  let iterator: AsyncIterator<T> | undefined;
  const end = () => {
    clearInterval(heartbeat);
    clearTimeout(deadline);
    stop.abort();
  };
  // Chunks handed to the reader's queue, and how many it had been handed by the last heartbeat.
  let enqueued = 0;
  let enqueuedAtLastBeat = 0;
  const enqueue = (controller: ReadableStreamDefaultController<Uint8Array>, text: string) => {
    enqueued += 1;
    controller.enqueue(encoder.encode(text));
  };
  const close = (controller: ReadableStreamDefaultController<Uint8Array>) => {
    try {
      controller.close();
    } catch {
      // Already closed or errored.
    }
  };
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        iterator = produce(stop.signal)[Symbol.asyncIterator]();
        enqueue(controller, SSE_OPENING);
        heartbeat = setInterval(() => {
          // desiredSize is 1 less each chunk still queued (a count strategy, high-water mark 1).
          const unread = 1 - (controller.desiredSize ?? 1);
          if (enqueued - unread < enqueuedAtLastBeat) {
            // What was there a whole interval ago (the last heartbeat at least) is still untaken.
            end();
            try {
              enqueue(controller, `: this reader fell behind: nothing was taken for ${options.heartbeatMs} ms while events waited; the stream ends here, resume with Last-Event-ID set to the last id received\n\n`);
            } catch {
              // Already closed or errored.
            }
            close(controller);
            void iterator?.return?.();
            options.onReaderBehind?.();
            return;
          }
          try {
            enqueue(controller, ': heartbeat\n\n');
          } catch {
            end();
          }
          enqueuedAtLastBeat = enqueued;
        }, options.heartbeatMs);
        if (options.maxDurationMs !== undefined) deadline = setTimeout(() => stop.abort(), options.maxDurationMs);
      },
      async pull(controller) {
        try {
          const next = await iterator!.next();
          // Stopped meanwhile (the reader fell behind, or the time is up): what came is not sent.
          if (stop.signal.aborted && !next.done) {
            close(controller);
            void iterator!.return?.();
            return;
          }
          if (next.done) {
            end();
            close(controller);
            return;
          }
          enqueue(controller, frame(next.value));
        } catch (error) {
          end();
          if (options.onError) {
            try {
              enqueue(controller, options.onError(error));
            } catch {
              // A reader that went away already closed the stream.
            }
            close(controller);
          } else {
            try {
              controller.error(error);
            } catch {
              // Already closed.
            }
          }
        }
      },
      cancel() {
        end();
        void iterator?.return?.();
      },
    },
    { highWaterMark: 1 },
  );
}

export const SSE_HEADERS = {
  'Content-Type': 'text/event-stream',
  'Cache-Control': 'no-cache',
  Connection: 'keep-alive',
  'X-Accel-Buffering': 'no',
} as const;
