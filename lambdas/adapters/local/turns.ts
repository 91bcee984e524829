import type { RunStore } from '../../core/ports.js';
import { mapParts } from '../../core/record/port.js';

/** How long a chain of work may run before it lets the event loop turn. */
const SLICE_MS = 1;
/** How long the chains that waited may run in one turn of the loop, all of them together. */
const TURN_MS = 3;

/** When the current slice of work began; cleared when the loop turns, set anew when a chain that waited goes on. */
let sliceStart: number | undefined;
/** When this turn's first waiting chain went on; cleared at the next turn. */
let turnStart: number | undefined;
/** The chains that wait for a turn, first come first resumed. */
const waiting: (() => void)[] = [];

/** Whether the work of this slice has run long enough that the next step should wait its turn. */
function sliceSpent(): boolean {
  const at = performance.now();
  if (sliceStart === undefined) {
    sliceStart = at;
    setImmediate(() => (sliceStart = undefined));
    return false;
  }
  return at - sliceStart > SLICE_MS;
}

/**
 * The rest of a chain, a turn later, in a slice of its own: the chains that waited go on one
 * after another, with the sockets read between two turns (a health check answered, another
 * tenant's event relayed). Sharing one slice, the first chain of a turn would spend it and every
 * later one wait again, for as long as the first had work. A turn gives them `TURN_MS` in all, so
 * 300 requests waiting at once do not hold the loop for 300 slices; each waiting chain adds one
 * go to the turn, and each go sends on the chain that has waited longest, so a chain the last
 * turn had no time for goes before those that went on in it.
 */
function nextTurn(): Promise<void> {
  return new Promise<void>((resolve) => {
    waiting.push(resolve);
    setImmediate(go);
  });
}

function go(): void {
  const at = performance.now();
  if (turnStart === undefined) {
    turnStart = at;
    // Queued now, it runs at the start of the next turn, before the goes this one queues.
    setImmediate(() => (turnStart = undefined));
  }
  if (at - turnStart > TURN_MS) {
    setImmediate(go);
    return;
  }
  sliceStart = at;
  waiting.shift()!();
}

/** Waits a turn when the current slice is spent: for work about to begin (a request body to parse). */
export function takeTurn(): Promise<void> | undefined {
  return sliceSpent() ? nextTurn() : undefined;
}

/**
 * `store` with its calls made in slices of the event loop. better-sqlite3 answers synchronously
 * behind an async face, so a chain of store calls (a request's checks and writes, a run relayed
 * from an in-process agent) would otherwise run as one unbroken task of microtasks: no socket is
 * read until it ends, and a health check or another tenant's paced stream waits behind every such
 * chain that is ready. A call made after `SLICE_MS` of such a chain waits a turn first; a call
 * made early in a slice (a burst's group commit) costs nothing more.
 */
export function takingTurns<S extends RunStore>(store: S): S {
  return mapParts(store, (name, part) =>
    new Proxy(part, {
      get(target, key, receiver) {
        const value = Reflect.get(target, key, receiver);
        if (typeof value !== 'function') return value;
        const call = (args: unknown[]) => (value as (...a: unknown[]) => unknown).apply(target, args);
        if (GOES_ON.has(`${name}.${String(key)}`)) return (...args: unknown[]) => call(args);
        return (...args: unknown[]) => (sliceSpent() ? nextTurn().then(() => call(args)) : call(args));
      },
    }),
  );
}

/**
 * Calls that finish a step a chain has begun, made without waiting: a run is created right after
 * its arrival number is taken, and handed to its thread's queue right after that, so a thread's
 * queue holds its runs in the order of their numbers (the order its listing shows). A chain that
 * waited in between could be overtaken by one that took a later number.
 */
const GOES_ON = new Set<string>(['runs.create']);
