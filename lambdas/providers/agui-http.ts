import type { RunAgentInput } from '@ag-ui/core';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { RunFailure } from '../core/errors.js';
import type { Agent } from '../core/model.js';
import type { Clock, Provider, ProviderContext } from '../core/ports.js';

export interface AgUiHttpProviderOptions {
  /** Defaults to the global fetch. */
  fetch?: typeof fetch;
  clock: Clock;
}

/** How much of an error response's body a failure message quotes. */
const BODY_EXCERPT_BYTES = 1024;
/** How much of a malformed event a failure message quotes. */
const EVENT_EXCERPT_CHARS = 200;

/**
 * A stock AG-UI agent over HTTP: POSTs the `RunAgentInput` and relays the SSE stream's events
 * as they arrive (https://docs.ag-ui.com/concepts/events). The agent's headers carry its
 * secrets, so no failure message quotes them, nor the URL's credentials or query.
 */
export class AgUiHttpProvider implements Provider {
  private readonly fetch: typeof fetch;

  constructor(options: AgUiHttpProviderOptions) {
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  async *run(input: RunAgentInput, { agent, signal }: ProviderContext): AsyncIterable<unknown> {
    const endpoint = readEndpoint(agent);
    if (signal.aborted) return;

    const where = `${endpoint.origin}${endpoint.pathname}`;
    const watch = new RequestWatch(agent, signal);
    try {
      const response = await watch.waitFor(
        this.fetch(endpoint, {
          method: 'POST',
          headers: requestHeaders(agent),
          body: JSON.stringify(input),
          signal: watch.signal,
        }),
        (error) => new RunFailure('provider_unreachable', `could not reach ${where}: ${describeCause(error)}`),
      );

      if (!response.ok) {
        const excerpt = await readExcerpt(response, watch);
        throw new RunFailure(
          `provider_http_${response.status}`,
          `${where} answered HTTP ${response.status}${excerpt ? `: ${excerpt}` : ''}`,
        );
      }
      const contentType = response.headers.get('content-type') ?? '';
      if (!/^text\/event-stream\b/i.test(contentType.trim())) {
        await response.body?.cancel();
        throw new RunFailure(
          'provider_not_agui',
          `${where} answered ${contentType || 'without a content type'}, not text/event-stream`,
        );
      }
      if (!response.body) return;

      yield* relayEvents(response.body, watch, where);
    } catch (error) {
      // A cancel is a request the run honours, not a failure: the core reads its own signal.
      if (watch.stopped === 'cancelled') return;
      throw error;
    } finally {
      watch.close();
    }
  }
}

/**
 * Reads the SSE stream chunk by chunk and yields each event once it is complete, so the caller
 * sees the agent's events while the agent is still running.
 */
async function* relayEvents(
  body: ReadableStream<Uint8Array>,
  watch: RequestWatch,
  where: string,
): AsyncGenerator<unknown> {
  const complete: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (message) => complete.push(message) });
  const decoder = new TextDecoder();
  const reader = body.getReader();
  for (;;) {
    const { done, value } = await watch.waitFor(
      reader.read(),
      (error) => new RunFailure('provider_disconnected', `${where} broke off the stream: ${describeCause(error)}`),
    );
    // At the end of the stream an event without its closing blank line is discarded
    // (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation).
    parser.feed(done ? decoder.decode() : decoder.decode(value, { stream: true }));
    for (const message of complete.splice(0)) {
      watch.throwIfStopped();
      yield readEvent(message, where);
    }
    if (done) return;
  }
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

type Stop = 'cancelled' | 'idle' | 'timeout';

/**
 * The request's two clocks and its cancel: the whole run is bounded by `timeoutSeconds`, and
 * every wait for the agent's next bytes by `idleTimeoutSeconds`. The idle clock runs only while
 * the provider waits for the agent, not while its caller is busy with an event already relayed.
 * Each of the three aborts the HTTP request; `stopped` says which came first.
 */
class RequestWatch {
  private reason: Stop | undefined;
  private readonly controller = new AbortController();
  private readonly runTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly idleMs: number | undefined;
  private readonly onCancel = () => this.stop('cancelled');

  constructor(
    private readonly agent: Agent,
    private readonly cancel: AbortSignal,
  ) {
    cancel.addEventListener('abort', this.onCancel, { once: true });
    const runMs = toMs(agent.timeoutSeconds);
    if (runMs !== undefined) this.runTimer = setTimeout(() => this.stop('timeout'), runMs);
    this.idleMs = toMs(agent.idleTimeoutSeconds);
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** What stopped the request first, if anything did. */
  get stopped(): Stop | undefined {
    return this.reason;
  }

  /**
   * Awaits `pending` (a wait on the agent) with the idle clock running. Once the request was
   * stopped, throws why (even if `pending` won the race); otherwise a rejection becomes `failure`.
   */
  async waitFor<T>(pending: Promise<T>, failure: (error: unknown) => unknown): Promise<T> {
    const idleTimer = this.idleMs === undefined ? undefined : setTimeout(() => this.stop('idle'), this.idleMs);
    const settled = await pending.then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error }),
    );
    clearTimeout(idleTimer);
    this.throwIfStopped();
    if (!settled.ok) throw failure(settled.error);
    return settled.value;
  }

  /** Throws why the request was stopped, if it was. */
  throwIfStopped(): void {
    switch (this.stopped) {
      case 'cancelled':
        throw new DOMException('the run was cancelled', 'AbortError');
      case 'idle':
        throw new RunFailure('provider_idle', `the agent sent nothing for ${this.agent.idleTimeoutSeconds} s`);
      case 'timeout':
        throw new RunFailure('provider_timeout', `the run passed its limit of ${this.agent.timeoutSeconds} s`);
    }
  }

  /** Ends the watch; aborting closes the connection if the stream is still open. */
  close(): void {
    clearTimeout(this.runTimer);
    this.cancel.removeEventListener('abort', this.onCancel);
    this.controller.abort();
  }

  private stop(reason: Stop): void {
    if (this.reason) return;
    this.reason = reason;
    this.controller.abort();
  }
}

function toMs(seconds: number): number | undefined {
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : undefined;
}

function requestHeaders(agent: Agent): Headers {
  let headers: Headers;
  try {
    headers = new Headers(agent.provider.headers);
  } catch {
    // Not quoted: the platform's message would name the offending value, a secret.
    throw new RunFailure('provider_not_configured', `agent ${agent.id} has a header that HTTP does not allow`);
  }
  // The protocol's own headers win over the agent's: funduq speaks AG-UI over SSE, nothing else.
  headers.set('accept', 'text/event-stream');
  headers.set('content-type', 'application/json');
  return headers;
}

/** At most `BODY_EXCERPT_BYTES` of an error response's body, read without waiting for the rest. */
async function readExcerpt(response: Response, watch: RequestWatch): Promise<string> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const bytes = new Uint8Array(BODY_EXCERPT_BYTES);
  let length = 0;
  try {
    while (length < BODY_EXCERPT_BYTES) {
      const { done, value } = await watch.waitFor(reader.read(), (error) => error);
      if (done) break;
      const take = Math.min(value.length, BODY_EXCERPT_BYTES - length);
      bytes.set(value.subarray(0, take), length);
      length += take;
    }
  } catch {
    // The status is the failure; a body that breaks off only shortens the excerpt.
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return new TextDecoder().decode(bytes.subarray(0, length)).trim();
}

function readEndpoint(agent: Agent): URL {
  const url = agent.provider.url;
  if (!url) throw new RunFailure('provider_not_configured', `agent ${agent.id} has no provider url`);
  try {
    return new URL(url);
  } catch {
    // Not quoted: a URL may carry a token in its query.
    throw new RunFailure('provider_not_configured', `agent ${agent.id} has a provider url that is not a URL`);
  }
}

/** Node's fetch rejects with "fetch failed"; the reason (ECONNREFUSED, ENOTFOUND, …) is its cause. */
function describeCause(error: unknown): string {
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
  if (cause instanceof Error) {
    const code = (cause as { code?: unknown }).code;
    return typeof code === 'string' && !cause.message.includes(code) ? `${code} ${cause.message}` : cause.message;
  }
  return String(cause);
}
