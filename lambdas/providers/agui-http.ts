import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { RunAgentInput } from '@ag-ui/core';
import { z } from 'zod';
import { RunFailure } from '../core/errors.js';
import type { Agent } from '../core/model.js';
import type { Provider, ProviderContext } from '../core/ports.js';
import { MASK, providerKind } from './definition.js';
import { sseEvents } from './sse-events.js';

/** A header field name is an RFC 9110 token (§5.1, §5.6.2). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/**
 * A field value is visible characters, spaces and tabs (RFC 9110 §5.5), as bytes: HTTP clients
 * refuse a character past U+00FF (such as "…"), and CR, LF or NUL would break the message.
 */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
/**
 * Headers of the connection and of the message's framing, which the HTTP client sets itself (a
 * request that carries its own would break the connection's framing): an agent's definition
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
  create: () => new AgUiHttpProvider(),
});

/** How much of an error response's body a failure message quotes. */
const BODY_EXCERPT_BYTES = 1024;

/**
 * Connections kept open between runs, one pool per scheme: a run's request to its agent costs no
 * handshake. Node's own client rather than fetch: a relayed event is a chunk of an agent's
 * response, and reading it from the socket's stream costs a third of what fetch's web streams
 * cost per chunk and per request (docs/benchmarks.md, the relay's profile).
 */
const POOLS = { 'http:': new HttpAgent({ keepAlive: true }), 'https:': new HttpsAgent({ keepAlive: true }) };

/**
 * A stock AG-UI agent over HTTP: POSTs the `RunAgentInput` and relays the SSE stream's events
 * as they arrive (https://docs.ag-ui.com/concepts/events). The agent's headers carry its
 * secrets, so no failure message quotes them, nor the URL's credentials or query.
 */
export class AgUiHttpProvider implements Provider {
  async *run(input: RunAgentInput, { agent, signal, heartbeat, headers }: ProviderContext): AsyncIterable<unknown> {
    const endpoint = readEndpoint(agent);
    if (signal.aborted) return;

    const where = `${endpoint.origin}${endpoint.pathname}`;
    const watch = new RequestWatch(signal);
    try {
      const response = await watch.waitFor(post(endpoint, requestHeaders(agent, headers), JSON.stringify(input), watch.signal), (error) =>
        new RunFailure('provider_unreachable', `could not reach ${where}: ${describeCause(error)}`),
      );
      const status = response.statusCode ?? 0;
      if (status < 200 || status > 299) {
        const excerpt = await readExcerpt(response);
        throw new RunFailure(`provider_http_${status}`, `${where} answered HTTP ${status}${excerpt ? `: ${excerpt}` : ''}`);
      }
      const contentType = response.headers['content-type'] ?? '';
      if (!/^text\/event-stream\b/i.test(contentType.trim())) {
        response.destroy();
        throw new RunFailure('provider_not_agui', `${where} answered ${contentType || 'without a content type'}, not text/event-stream`);
      }

      watch.response = response;
      for await (const event of sseEvents(bodyChunks(response, watch, where, heartbeat), where)) {
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

/** The POST, resolved with the response once its head arrived; rejected when the request fails before. */
function post(url: URL, headers: Headers, body: string, signal: AbortSignal): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const fields: Record<string, string> = {};
    headers.forEach((value, name) => (fields[name] = value));
    fields['content-length'] = String(Buffer.byteLength(body));
    const request = send(url, { method: 'POST', headers: fields, agent: POOLS[url.protocol as keyof typeof POOLS], signal }, resolve);
    // Kept for the request's life: an error after the response began (the stream broken off, a stop) is the body's to report.
    request.on('error', reject);
    request.end(body);
  });
}

/** The response body's chunks; a connection that breaks off fails the run `provider_disconnected`. */
async function* bodyChunks(response: IncomingMessage, watch: RequestWatch, where: string, heartbeat: () => void): AsyncGenerator<Uint8Array> {
  try {
    for await (const chunk of response) {
      heartbeat();
      yield chunk as Uint8Array;
    }
  } catch (error) {
    watch.throwIfStopped();
    throw new RunFailure('provider_disconnected', `${where} broke off the stream: ${describeCause(error)}`);
  }
  // A response cut short without an error of its own (its connection closed before the end).
  watch.throwIfStopped();
  if (!response.complete) throw new RunFailure('provider_disconnected', `${where} broke off the stream: the connection closed before the response ended`);
}

/**
 * The request's cancel: the run's signal aborts the HTTP request (a cancel, or the relay's time
 * limits, which are the same for every provider kind). Once aborted, every wait on the agent
 * throws an AbortError, which the run reads as the stop it is, not as the agent's failure.
 */
class RequestWatch {
  private readonly controller = new AbortController();
  private readonly onCancel = () => this.stop();
  /** The agent's response, once its head arrived. */
  response: IncomingMessage | undefined;

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

  /** Ends the watch: a response received whole is drained (its connection goes back to the pool), any other has its connection closed. */
  close(): void {
    this.cancel.removeEventListener('abort', this.onCancel);
    this.stop();
  }

  private stop(): void {
    // A whole response's connection may be the pool's already: aborting the request then would close it under another.
    if (this.response?.complete) this.response.resume();
    else this.controller.abort();
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
async function readExcerpt(response: IncomingMessage): Promise<string> {
  const bytes = new Uint8Array(BODY_EXCERPT_BYTES);
  let length = 0;
  try {
    for await (const chunk of response) {
      const value = chunk as Uint8Array;
      const take = Math.min(value.length, BODY_EXCERPT_BYTES - length);
      bytes.set(value.subarray(0, take), length);
      length += take;
      if (length >= BODY_EXCERPT_BYTES) break;
    }
  } catch {
    // The status is the failure; a body that breaks off only shortens the excerpt.
  } finally {
    response.destroy();
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

/** The reason a request failed (ECONNREFUSED, ENOTFOUND, …): the error's code with its message, or its cause's when it has one. */
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
