import type { RunAgentInput } from '@ag-ui/core';
import { z } from 'zod';
import { RunFailure } from '../core/errors.js';
import type { Agent } from '../core/model.js';
import type { Provider, ProviderContext } from '../core/ports.js';
import { MASK, providerKind } from './definition.js';
import { sseEvents } from './sse-events.js';

export interface AgUiHttpProviderOptions {
  /** Defaults to the global fetch. */
  fetch?: typeof fetch;
}

/** A header field name is an RFC 9110 token (§5.1, §5.6.2). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/**
 * A field value is visible characters, spaces and tabs (RFC 9110 §5.5), as bytes: fetch refuses a
 * character past U+00FF (such as "…"), and CR, LF or NUL would break the message.
 */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
/**
 * Headers of the connection and of the message's framing, which HTTP client sets itself (fetch
 * refuses a request that carries them: undici's UND_ERR_INVALID_ARG): an agent's definition
 * cannot name them.
 */
const CONNECTION_HEADERS = new Set(['connection', 'keep-alive', 'upgrade', 'transfer-encoding', 'expect', 'content-length', 'te', 'trailer', 'proxy-connection']);

/** The `agui-http` kind: a stock AG-UI agent at a URL, with the headers (its credentials) funduq sends it. */
export const aguiHttpKind = providerKind({
  kind: 'agui-http',
  fields: {
    url: z.string().url().refine(isHttpUrl, 'must be an http or https URL'),
    headers: z
      .record(
        z
          .string()
          .regex(HEADER_NAME, 'is not an HTTP header name')
          .refine((name) => !CONNECTION_HEADERS.has(name.toLowerCase()), 'is a header of the connection, which the HTTP client sets itself'),
        z.string().regex(HEADER_VALUE, 'a header value may hold visible characters up to U+00FF, spaces and tabs only (no "…", CR, LF or NUL)'),
      )
      .optional(),
  },
  spec: ({ url, headers }) => ({ kind: 'agui-http', url, ...(headers ? { headers } : {}) }),
  adminView: (spec) => {
    const { url, headers } = spec as { url?: string; headers?: Record<string, string> };
    return {
      ...(url !== undefined ? { url: maskUrl(url) } : {}),
      ...(headers ? { headers: Object.fromEntries(Object.keys(headers).map((name) => [name, MASK])) } : {}),
    };
  },
  create: () => new AgUiHttpProvider({}),
});

/** How much of an error response's body a failure message quotes. */
const BODY_EXCERPT_BYTES = 1024;

/**
 * A stock AG-UI agent over HTTP: POSTs the `RunAgentInput` and relays the SSE stream's events
 * as they arrive (https://docs.ag-ui.com/concepts/events). The agent's headers carry its
 * secrets, so no failure message quotes them, nor the URL's credentials or query.
 */
export class AgUiHttpProvider implements Provider {
  private readonly fetch: typeof fetch;

  constructor(options: AgUiHttpProviderOptions = {}) {
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  async *run(input: RunAgentInput, { agent, signal, heartbeat, headers }: ProviderContext): AsyncIterable<unknown> {
    const endpoint = readEndpoint(agent);
    if (signal.aborted) return;

    const where = `${endpoint.origin}${endpoint.pathname}`;
    const watch = new RequestWatch(signal);
    try {
      const response = await watch.waitFor(
        this.fetch(endpoint, {
          method: 'POST',
          headers: requestHeaders(agent, headers),
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

      for await (const event of sseEvents(bodyChunks(response.body, watch, where, heartbeat), where)) {
        watch.throwIfStopped();
        yield event;
      }
    } catch (error) {
      // A stop (a cancel, a time limit) is the core's, read from its own signal: not the agent's failure.
      if (watch.stopped) return;
      throw error;
    } finally {
      watch.close();
    }
  }
}

/** The response body's chunks; a connection that breaks off fails the run `provider_disconnected`. */
async function* bodyChunks(
  body: ReadableStream<Uint8Array>,
  watch: RequestWatch,
  where: string,
  heartbeat: () => void,
): AsyncGenerator<Uint8Array> {
  const reader = body.getReader();
  for (;;) {
    const { done, value } = await watch.waitFor(
      reader.read(),
      (error) => new RunFailure('provider_disconnected', `${where} broke off the stream: ${describeCause(error)}`),
    );
    if (done) return;
    heartbeat();
    yield value;
  }
}

/**
 * The request's cancel: the run's signal aborts the HTTP request (a cancel, or the relay's time
 * limits, which are the same for every provider kind). Once aborted, every wait on the agent
 * throws an AbortError, which the run reads as the stop it is, not as the agent's failure.
 */
class RequestWatch {
  private readonly controller = new AbortController();
  private readonly onCancel = () => this.controller.abort();

  constructor(private readonly cancel: AbortSignal) {
    cancel.addEventListener('abort', this.onCancel, { once: true });
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get stopped(): boolean {
    return this.cancel.aborted;
  }

  /** Awaits `pending` (a wait on the agent). Once stopped, throws an AbortError; otherwise a rejection becomes `failure`. */
  async waitFor<T>(pending: Promise<T>, failure: (error: unknown) => unknown): Promise<T> {
    const settled = await pending.then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error }),
    );
    this.throwIfStopped();
    if (!settled.ok) throw failure(settled.error);
    return settled.value;
  }

  throwIfStopped(): void {
    if (this.stopped) throw new DOMException('the run was stopped', 'AbortError');
  }

  /** Ends the watch; aborting closes the connection if the stream is still open. */
  close(): void {
    this.cancel.removeEventListener('abort', this.onCancel);
    this.controller.abort();
  }
}

/**
 * The agent's headers, then the call's (what the run's observers add: trace context) under names
 * the agent's definition does not set, so its credentials are never replaced.
 */
function requestHeaders(agent: Agent, call: Readonly<Record<string, string>> = {}): Headers {
  let headers: Headers;
  try {
    const given = (agent.provider.headers ?? {}) as Record<string, string>;
    // A definition stored before the rule (the rule is checked where a definition is written).
    if (Object.keys(given).some((name) => CONNECTION_HEADERS.has(name.toLowerCase()))) throw new TypeError('a header of the connection');
    headers = new Headers(given);
  } catch {
    // Not quoted: the platform's message would name the offending value, a secret.
    throw new RunFailure('provider_not_configured', `agent ${agent.id} has a header that HTTP does not allow`);
  }
  for (const [name, value] of Object.entries(call)) {
    if (!headers.has(name) && !CONNECTION_HEADERS.has(name.toLowerCase())) headers.set(name, value);
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
  if (typeof url !== 'string' || !url) throw new RunFailure('provider_not_configured', `agent ${agent.id} has no provider url`);
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

function isHttpUrl(raw: string): boolean {
  try {
    return /^https?:$/.test(new URL(raw).protocol);
  } catch {
    // Not a URL at all: `.url()` has said so already.
    return true;
  }
}

/** The URL's user info and its query values replaced by `***`: any of them may be a credential. */
function maskUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return MASK;
  }
  if (url.username || url.password) {
    url.username = MASK;
    url.password = '';
  }
  for (const name of new Set(url.searchParams.keys())) url.searchParams.set(name, MASK);
  return url.href;
}
