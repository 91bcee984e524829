import type { RunContext } from './model.js';
import { ANSWERS_CONTEXT, TRACEPARENT } from './traces.js';
import { utf8Bytes } from './storable.js';

/**
 * A run's context rides on its record, its thread-queue message, its ask timer's input and its
 * link offer, each with a size limit of its own (an SQS message 256 KB, a Step Functions input
 * 256 KB, an API Gateway WebSocket frame 128 KB): kept small, it fits in all of them beside the
 * rest. W3C trace context, the first use, needs two entries of at most 55 and 512 characters.
 */
export const MAX_CONTEXT_ENTRIES = 16;
export const MAX_CONTEXT_BYTES = 4 * 1024;
/** Names as HTTP header names are written (lowercase tokens), so a door can carry headers as they come. */
const NAME = /^[a-z0-9][a-z0-9_.-]{0,63}$/;
/** Values as header values: visible ASCII and inner spaces, nothing a header, a log line or a frame would need escaped. */
const VALUE = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;

/** Why `context` cannot be a run's context, or undefined when it can. */
export function runContextProblem(context: unknown): string | undefined {
  if (typeof context !== 'object' || context === null || Array.isArray(context)) return 'context must be an object of names to strings';
  const entries = Object.entries(context);
  if (entries.length > MAX_CONTEXT_ENTRIES) return `context has ${entries.length} entries; a run carries at most ${MAX_CONTEXT_ENTRIES}`;
  let bytes = 0;
  for (const [name, value] of entries) {
    if (!NAME.test(name)) return `context name "${name.slice(0, 64)}" is not a lowercase token of at most 64 characters (a-z, 0-9, _ . -)`;
    if (typeof value !== 'string' || !VALUE.test(value)) return `context "${name}" must be a string of visible ASCII characters`;
    bytes += utf8Bytes(name) + utf8Bytes(value);
  }
  if (bytes > MAX_CONTEXT_BYTES) return `context takes ${bytes} bytes; a run carries at most ${MAX_CONTEXT_BYTES}`;
  return undefined;
}

/** The headers a door carries into its runs' context, when the caller sent them (W3C Trace Context). */
export const CONTEXT_HEADERS = ['traceparent', 'tracestate'] as const;

/**
 * A door's context from its request's headers: the ones it carries, each kept only when the
 * context stays within its limits with it (a trace header that is too long is dropped, as W3C
 * Trace Context lets a receiver do, rather than the request refused). Undefined when none is kept.
 */
export function contextOfHeaders(header: (name: string) => string | undefined | null): RunContext | undefined {
  const context: Record<string, string> = {};
  for (const name of CONTEXT_HEADERS) {
    const value = header(name)?.trim();
    if (!value) continue;
    context[name] = value;
    if (runContextProblem(context) !== undefined) delete context[name];
  }
  return Object.keys(context).length > 0 ? context : undefined;
}

/**
 * An answer run's context: the caller's, with the asking run's `traceparent` under
 * `funduq-answers` (so the answer's trace links to the asking one from the record alone), kept
 * only when the context stays within its limits with it. The caller's own entry of that name, if
 * any, gives way to it, and goes when the asking run carries no trace.
 */
export function answerContext(context: RunContext | undefined, asking: { context?: RunContext }): RunContext | undefined {
  const { [ANSWERS_CONTEXT]: _given, ...own } = context ?? {};
  const traceparent = asking.context?.[TRACEPARENT];
  if (traceparent !== undefined) {
    const withLink = { ...own, [ANSWERS_CONTEXT]: traceparent };
    if (runContextProblem(withLink) === undefined) return withLink;
  }
  return Object.keys(own).length > 0 ? own : undefined;
}

/** W3C Trace Context's `traceparent`: version, trace id, parent id, flags (a later version may add fields after them). */
const TRACEPARENT_FORM = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-|$)/;

/**
 * The trace a run is in: the trace id of the `traceparent` its context carries, or undefined when
 * it carries none that W3C Trace Context would take (version ff, an all-zero id).
 */
export function traceIdOf(context: RunContext | undefined): string | undefined {
  const match = TRACEPARENT_FORM.exec(context?.[TRACEPARENT] ?? '');
  if (!match || match[1] === 'ff' || /^0+$/.test(match[2]!) || /^0+$/.test(match[3]!)) return undefined;
  return match[2];
}

/** `{ traceId }` of a run that carries a trace, else nothing: how the record's views name a run's trace. */
export function traceOf(run: { context?: RunContext }): { traceId?: string } {
  const traceId = traceIdOf(run.context);
  return traceId !== undefined ? { traceId } : {};
}
