import type { Context, MiddlewareHandler } from 'hono';
import { errorResponse } from './http-errors.js';
import { endingWith } from './body-end.js';

/** How much the gateway takes in at once: requests with a body, and the bytes they declare. */
export interface AdmissionLimits {
  requests: number;
  bytes: number;
  /**
   * How long a request that finds no room waits for one, its body unread (TCP holds it back on the
   * caller's side), before it is refused. 0: refused at once. Refusing at once, a burst of large
   * requests was read only to be thrown away: 250 bodies of 340 KB drained at once held the event
   * loop for 150 ms.
   */
  waitMs?: number;
  /**
   * Waits until the process may begin a request's work (undefined: at once): a body is read, then
   * parsed and acted on in its turn, so a hundred bodies that arrive together are not all parsed
   * in one unbroken stretch of the event loop (a health check waited behind 170 ms of JSON.parse).
   */
  turn?: () => Promise<void> | undefined;
}

/** What a refused caller is told to wait: a place frees when a response ends, usually within a second. */
const RETRY_AFTER_SECONDS = 1;

/**
 * Admission on one process: a request with a body holds a place and its declared size (its
 * Content-Length, or the body cap when it declares none, as a chunked one does) until its response
 * has ended, a stream's included (the run it started holds its input meanwhile). One that would go
 * over either limit waits for room, first come first in, for at most `waitMs` with its body
 * unread, then is refused `503 gateway_busy`; so memory is bounded by the limits and not by how
 * many callers arrive at once (at most `requests` wait). One request is always admitted when none
 * is in flight, whatever its size. Reads without a body are not counted: their cost is bounded by
 * the streams' backpressure (see sse.ts).
 */
export function admission(limits: AdmissionLimits, bodyCap: number): MiddlewareHandler {
  let requests = 0;
  let bytes = 0;
  const waiting: { size: number; admit: () => void }[] = [];
  const fits = (size: number) => requests === 0 || (requests + 1 <= limits.requests && bytes + size <= limits.bytes);
  const take = (size: number) => {
    requests += 1;
    bytes += size;
  };
  const admitWaiting = () => {
    while (waiting.length > 0 && fits(waiting[0].size)) {
      const next = waiting.shift()!;
      take(next.size);
      next.admit();
    }
  };
  /** True once the request holds its place; false when it is to be refused. */
  const place = (size: number): boolean | Promise<boolean> => {
    if (waiting.length === 0 && fits(size)) {
      take(size);
      return true;
    }
    if (!limits.waitMs || waiting.length >= limits.requests) return false;
    return new Promise<boolean>((resolve) => {
      const entry = {
        size,
        admit: () => {
          clearTimeout(timer);
          resolve(true);
        },
      };
      const timer = setTimeout(() => {
        waiting.splice(waiting.indexOf(entry), 1);
        resolve(false);
        // It may have held back smaller ones behind it that fit.
        admitWaiting();
      }, limits.waitMs);
      waiting.push(entry);
    });
  };
  return async (c, next) => {
    if (c.req.method === 'GET' || c.req.method === 'HEAD' || c.req.method === 'OPTIONS') return next();
    const declared = Number(c.req.header('Content-Length'));
    const size = Number.isFinite(declared) && declared >= 0 ? Math.min(declared, bodyCap) : bodyCap;
    if (!(await place(size))) return busy(c);
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      requests -= 1;
      bytes -= size;
      admitWaiting();
    };
    try {
      await next();
    } catch (error) {
      release();
      throw error;
    }
    const body = c.res.body;
    if (!body) return release();
    c.res = new Response(endingWith(body, release), c.res);
  };
}

function busy(c: Context): Response {
  // The unread body is still on the socket: the connection cannot be reused.
  c.header('Connection', 'close');
  c.header('Retry-After', String(RETRY_AFTER_SECONDS));
  return errorResponse(c, 'gateway_busy', 'the gateway is taking in as much as it can hold: retry after the Retry-After seconds');
}

/** Reads a request's body, then lets the request go on when its turn comes (see `AdmissionLimits.turn`). */
export function inTurn(turn: () => Promise<void> | undefined): MiddlewareHandler {
  return async (c, next) => {
    if (c.req.method !== 'GET' && c.req.method !== 'HEAD' && c.req.method !== 'OPTIONS') {
      // Kept by the request: the door's own read of it (c.req.json(), c.req.text()) takes it from there.
      await c.req.text();
      await turn();
    }
    return next();
  };
}
