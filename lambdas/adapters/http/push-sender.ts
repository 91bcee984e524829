import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { A2A_CONTENT_TYPE, StreamResponse } from '@a2a-js/sdk';
import { PUSH_JWT_HEADER, type PushNotification, type PushSender } from '../../core/ports.js';
import { addressRefusal } from './push-addresses.js';
import type { PushKeys } from './push-signing.js';

export interface PushSenderSettings {
  /** Tries per notification, the first included. */
  attempts: number;
  /** The wait before the second try; it doubles before each next one (5 tries: 37.5 + 75 + 150 + 300 s ≈ 10 min). */
  firstRetryMs: number;
  /** One try's limit, from connecting to the last byte read. */
  timeoutMs: number;
  /** Of a receiver's answer at most this much is read; the rest is dropped with the connection. */
  maxResponseBytes: number;
  /** `http:` targets are allowed: for trying push on one machine (`FUNDUQ_PUSH_ALLOW_HTTP`), and tests; otherwise https only. */
  allowHttp: boolean;
  /** Loopback targets are allowed: for trying push on one machine (`FUNDUQ_PUSH_ALLOW_LOOPBACK`), and tests. */
  allowLoopback: boolean;
}

export const DEFAULT_PUSH_SENDER_SETTINGS: PushSenderSettings = {
  attempts: 5,
  firstRetryMs: 37_500,
  timeoutMs: 10_000,
  maxResponseBytes: 64 * 1024,
  allowHttp: false,
  allowLoopback: false,
};

/** The token a receiver checks a notification by (A2A push notifications). */
const TOKEN_HEADER = 'X-A2A-Notification-Token';

/** A name's addresses, as the system resolver gives them (a test gives its own, to play a rebinding DNS). */
export type Resolve = (host: string) => Promise<LookupAddress[]>;

const systemResolve: Resolve = (host) =>
  new Promise((resolve, reject) => dnsLookup(host, { all: true }, (error, found) => (error ? reject(error) : resolve(found))));

/**
 * Push notifications over HTTP(S). Targets are vetted when a config is created and again at each
 * try, and a try connects to the very addresses it vetted (the socket is handed them, it looks
 * nothing up): a name that re-resolves to a private address between the check and the call (DNS
 * rebinding) cannot be reached. No redirects are followed. A failure of the receiver (no answer,
 * timeout, 5xx, 408, 429) is tried again with exponential backoff; any other answer is final.
 */
export class HttpPushSender implements PushSender {
  private readonly settings: PushSenderSettings;

  constructor(
    settings: Partial<PushSenderSettings> = {},
    /** The keys each try is signed with (read when first needed: on AWS they come from a secret). */
    private readonly keys?: () => Promise<PushKeys>,
    private readonly resolve: Resolve = systemResolve,
  ) {
    this.settings = { ...DEFAULT_PUSH_SENDER_SETTINGS, ...settings };
  }

  async vet(url: string): Promise<string | undefined> {
    const target = this.target(url);
    if (typeof target === 'string') return target;
    const addresses = await this.vetted(target);
    return 'refused' in addresses ? addresses.refused : undefined;
  }

  async send(notification: PushNotification): Promise<{ delivered: true } | { delivered: false; attempts: number; error: string }> {
    let error = 'not tried';
    for (let attempt = 1; attempt <= this.settings.attempts; attempt++) {
      const outcome = await this.post(notification);
      if (outcome.ok) return { delivered: true };
      error = outcome.error;
      if (!outcome.retry || attempt === this.settings.attempts) return { delivered: false, attempts: attempt, error };
      await delay(this.settings.firstRetryMs * 2 ** (attempt - 1));
    }
    return { delivered: false, attempts: this.settings.attempts, error };
  }

  private target(url: string): URL | string {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return 'it is not a URL';
    }
    if (parsed.protocol === 'http:' && !this.settings.allowHttp) return 'only https targets are allowed';
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return `${parsed.protocol} is not http or https`;
    return parsed;
  }

  /** The addresses a try may connect to, all of them allowed; or why there are none. */
  private async vetted(target: URL): Promise<LookupAddress[] | { refused: string; retry: boolean }> {
    const host = hostOf(target);
    const family = isIP(host);
    let addresses: LookupAddress[];
    try {
      addresses = family ? [{ address: host, family }] : await this.resolve(host);
    } catch {
      return { refused: `${host} does not resolve`, retry: true };
    }
    if (addresses.length === 0) return { refused: `${host} does not resolve`, retry: true };
    for (const { address } of addresses) {
      const refused = addressRefusal(address, this.settings.allowLoopback);
      if (refused) return { refused, retry: false };
    }
    return addresses;
  }

  private async post({ config, body }: PushNotification): Promise<{ ok: true } | { ok: false; retry: boolean; error: string }> {
    const target = this.target(config.url);
    if (typeof target === 'string') return { ok: false, retry: false, error: `${config.url}: ${target}` };
    const addresses = await this.vetted(target);
    if ('refused' in addresses) return { ok: false, retry: addresses.retry, error: `${config.url}: ${addresses.refused}` };
    const payload = JSON.stringify(StreamResponse.toJSON(body as StreamResponse));
    const headers: Record<string, string> = { 'Content-Type': A2A_CONTENT_TYPE, 'Content-Length': String(Buffer.byteLength(payload)) };
    if (config.authentication?.scheme && config.authentication.credentials) {
      headers.Authorization = `${config.authentication.scheme} ${config.authentication.credentials}`;
    }
    if (config.token) headers[TOKEN_HEADER] = config.token;
    if (this.keys) {
      // Signed at each try, so its iat says when this request was sent.
      const jwt = (await this.keys()).sign({ taskId: config.taskId, audience: config.url, body: payload });
      headers[PUSH_JWT_HEADER] = jwt;
      headers.Authorization ??= `Bearer ${jwt}`;
    }
    // The socket is handed the addresses just vetted instead of a lookup of its own; TLS still names the host (SNI, certificate).
    const vettedLookup: LookupFunction = (_hostname, options, callback) => {
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      return callback(null, addresses[0].address, addresses[0].family);
    };
    const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise((resolve) => {
      const request = send(target, { method: 'POST', headers, lookup: vettedLookup, timeout: this.settings.timeoutMs });
      const timer = setTimeout(() => request.destroy(new Error(`no answer within ${this.settings.timeoutMs} ms`)), this.settings.timeoutMs);
      const done = (outcome: { ok: true } | { ok: false; retry: boolean; error: string }) => {
        clearTimeout(timer);
        resolve(outcome);
      };
      request.on('timeout', () => request.destroy(new Error(`no answer within ${this.settings.timeoutMs} ms`)));
      request.on('error', (error: Error) => done({ ok: false, retry: true, error: error.message }));
      request.on('response', (response: IncomingMessage) => {
        const status = response.statusCode ?? 0;
        let read = 0;
        response.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read > this.settings.maxResponseBytes) response.destroy();
        });
        const settle = () => {
          if (status >= 200 && status < 300) return done({ ok: true });
          const retry = status >= 500 || status === 408 || status === 429;
          done({ ok: false, retry, error: `${config.url} answered HTTP ${status}` });
        };
        response.on('end', settle);
        response.on('close', settle);
        response.on('error', () => settle());
      });
      request.end(payload);
    });
  }
}

/** A URL's host as an address or a name: IPv6 addresses lose the brackets URLs write them in. */
function hostOf(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, '');
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
