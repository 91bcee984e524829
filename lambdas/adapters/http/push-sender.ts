import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { A2A_CONTENT_TYPE, StreamResponse } from '@a2a-js/sdk';
import type { PushNotification, PushSender } from '../../core/ports.js';

export interface PushSenderSettings {
  /** Tries per notification, the first included. */
  attempts: number;
  /** The wait before the second try; it doubles before each next one (5 tries: 37.5 + 75 + 150 + 300 s ≈ 10 min). */
  firstRetryMs: number;
  /** One try's limit, from connecting to the last byte read. */
  timeoutMs: number;
  /** Of a receiver's answer at most this much is read; the rest is dropped with the connection. */
  maxResponseBytes: number;
  /** `http:` targets are allowed (local mode); otherwise https only. */
  allowHttp: boolean;
  /** Test-only: loopback targets are allowed, for a receiver in the test's own process. */
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

/**
 * Addresses a push target must not resolve to: a caller could otherwise make the gateway call its
 * own network (SSRF). Loopback, private (RFC 1918, ULA), link-local (which holds the cloud
 * metadata service, 169.254.169.254 and fd00:ec2::254), shared, reserved and multicast ranges.
 */
function blockList(allowLoopback: boolean): BlockList {
  const list = new BlockList();
  const v4: [string, number][] = [
    ['0.0.0.0', 8],
    ['10.0.0.0', 8],
    ['100.64.0.0', 10],
    ['169.254.0.0', 16],
    ['172.16.0.0', 12],
    ['192.0.0.0', 24],
    ['192.0.2.0', 24],
    ['192.168.0.0', 16],
    ['198.18.0.0', 15],
    ['198.51.100.0', 24],
    ['203.0.113.0', 24],
    ['224.0.0.0', 4],
    ['240.0.0.0', 4],
  ];
  const v6: [string, number][] = [
    ['::', 128],
    ['64:ff9b:1::', 48],
    ['100::', 64],
    ['2001:db8::', 32],
    ['fc00::', 7],
    ['fe80::', 10],
    ['ff00::', 8],
  ];
  if (!allowLoopback) {
    v4.push(['127.0.0.0', 8]);
    v6.push(['::1', 128]);
  }
  for (const [address, prefix] of v4) list.addSubnet(address, prefix, 'ipv4');
  for (const [address, prefix] of v6) list.addSubnet(address, prefix, 'ipv6');
  return list;
}

/**
 * Push notifications over HTTP(S). Targets are vetted when a config is created and again at each
 * connection: the DNS answer is checked inside the socket's own lookup, so a name that re-resolves
 * to a private address between the two (DNS rebinding) is refused too. No redirects are followed.
 * A failure of the receiver (no answer, timeout, 5xx, 408, 429) is tried again with exponential
 * backoff; any other answer is final.
 */
export class HttpPushSender implements PushSender {
  private readonly settings: PushSenderSettings;
  private readonly blocked: BlockList;

  constructor(settings: Partial<PushSenderSettings> = {}) {
    this.settings = { ...DEFAULT_PUSH_SENDER_SETTINGS, ...settings };
    this.blocked = blockList(this.settings.allowLoopback);
  }

  async vet(url: string): Promise<string | undefined> {
    const target = this.target(url);
    if (typeof target === 'string') return target;
    const host = hostOf(target);
    if (isIP(host)) return this.refusal(host);
    let addresses: LookupAddress[];
    try {
      addresses = await new Promise((resolve, reject) =>
        dnsLookup(host, { all: true }, (error, found) => (error ? reject(error) : resolve(found))),
      );
    } catch {
      return `${host} does not resolve`;
    }
    for (const { address } of addresses) {
      const refused = this.refusal(address);
      if (refused) return refused;
    }
    return undefined;
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

  private refusal(address: string): string | undefined {
    const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    const embedded = embeddedIpv4(address);
    if (this.blocked.check(address, family) || (embedded !== undefined && this.blocked.check(embedded, 'ipv4'))) {
      return `${address} is a private, loopback, link-local or reserved address`;
    }
    return undefined;
  }

  private post({ config, body }: PushNotification): Promise<{ ok: true } | { ok: false; retry: boolean; error: string }> {
    const target = this.target(config.url);
    if (typeof target === 'string') return Promise.resolve({ ok: false, retry: false, error: `${config.url}: ${target}` });
    // An address written out is connected to without a lookup: it is checked here instead.
    if (isIP(hostOf(target))) {
      const refused = this.refusal(hostOf(target));
      if (refused) return Promise.resolve({ ok: false, retry: false, error: refused });
    }
    const payload = JSON.stringify(StreamResponse.toJSON(body as StreamResponse));
    const headers: Record<string, string> = { 'Content-Type': A2A_CONTENT_TYPE, 'Content-Length': String(Buffer.byteLength(payload)) };
    if (config.authentication?.scheme && config.authentication.credentials) {
      headers.Authorization = `${config.authentication.scheme} ${config.authentication.credentials}`;
    }
    if (config.token) headers[TOKEN_HEADER] = config.token;
    const guardedLookup: LookupFunction = (hostname, options, callback) =>
      dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
        if (error) return callback(error, '', 0);
        const list = addresses as LookupAddress[];
        const refused = list.map(({ address }) => this.refusal(address)).find((why) => why !== undefined);
        if (refused) return callback(Object.assign(new Error(refused), { code: 'EPUSHREFUSED' }), '', 0);
        if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
        return callback(null, list[0].address, list[0].family);
      });
    const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise((resolve) => {
      const request = send(target, { method: 'POST', headers, lookup: guardedLookup, timeout: this.settings.timeoutMs });
      const timer = setTimeout(() => request.destroy(new Error(`no answer within ${this.settings.timeoutMs} ms`)), this.settings.timeoutMs);
      const done = (outcome: { ok: true } | { ok: false; retry: boolean; error: string }) => {
        clearTimeout(timer);
        resolve(outcome);
      };
      request.on('timeout', () => request.destroy(new Error(`no answer within ${this.settings.timeoutMs} ms`)));
      request.on('error', (error: Error & { code?: string }) => done({ ok: false, retry: error.code !== 'EPUSHREFUSED', error: error.message }));
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

/** The IPv4 address inside a NAT64 (64:ff9b::/96) address: such a target reaches that IPv4 address. */
function embeddedIpv4(address: string): string | undefined {
  const match = /^64:ff9b::(?:(\d+\.\d+\.\d+\.\d+)|([0-9a-f]{1,4}):([0-9a-f]{1,4}))$/i.exec(address);
  if (!match) return undefined;
  if (match[1]) return match[1];
  const high = parseInt(match[2], 16);
  const low = parseInt(match[3], 16);
  return [high >> 8, high & 255, low >> 8, low & 255].join('.');
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
