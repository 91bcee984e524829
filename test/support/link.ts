import { AbstractAgent } from '@ag-ui/client';
import type { BaseEvent, RunAgentInput } from '@ag-ui/core';
import { Observable } from 'rxjs';
import { randomBytes } from 'node:crypto';
import { createServer, connect as netConnect, type AddressInfo, type Socket } from 'node:net';
import { WebSocket } from 'ws';
import {
  connect,
  generateKeyPair,
  LINK_PROOF_HEADER,
  proofText,
  readMessage,
  Reassembly,
  ToProviderSchema,
  type ConnectOptions,
  type FromProviderFrame,
  type ProviderLink,
  type ToProviderFrame,
} from '../../packages/provider/src/index.js';
import { privateKeyOf, signText } from '../../packages/provider/src/ed25519.js';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';

type Script = (input: RunAgentInput, signal: AbortSignal) => AsyncIterable<Record<string, unknown>>;

/**
 * An agent in the provider's own process (an `@ag-ui/client` AbstractAgent): it has no URL and
 * listens on no port. Its events are what each test writes; it records what it was asked to run,
 * and which runs were stopped (a cancel reaching it).
 */
export class ScriptAgent extends AbstractAgent {
  readonly received: RunAgentInput[];
  readonly aborted: Set<string>;

  constructor(
    private readonly script: Script,
    shared?: { received: RunAgentInput[]; aborted: Set<string> },
  ) {
    super({ description: 'a scripted agent in the provider’s process' });
    this.received = shared?.received ?? [];
    this.aborted = shared?.aborted ?? new Set();
  }

  run(input: RunAgentInput): Observable<BaseEvent> {
    this.received.push(input);
    return new Observable<BaseEvent>((subscriber) => {
      const stop = new AbortController();
      void (async () => {
        try {
          for await (const event of this.script(input, stop.signal)) {
            if (stop.signal.aborted) return;
            subscriber.next(event as unknown as BaseEvent);
          }
          subscriber.complete();
        } catch (error) {
          if (!stop.signal.aborted) subscriber.error(error);
        }
      })();
      return () => {
        if (!stop.signal.aborted) this.aborted.add(input.runId);
        stop.abort();
      };
    });
  }

  override clone(): ScriptAgent {
    return new ScriptAgent(this.script, { received: this.received, aborted: this.aborted });
  }
}

/** The events of a reply, as an agent streams them. */
export async function* reply(input: RunAgentInput, text: string, options: { started?: boolean } = {}): AsyncGenerator<Record<string, unknown>> {
  if (!options.started) yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
  yield { type: 'TEXT_MESSAGE_START', messageId: `m-${input.runId}`, role: 'assistant' };
  yield { type: 'TEXT_MESSAGE_CONTENT', messageId: `m-${input.runId}`, delta: text };
  yield { type: 'TEXT_MESSAGE_END', messageId: `m-${input.runId}` };
  yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId };
}

export function lastUserText(input: RunAgentInput): string {
  const last = [...input.messages].reverse().find((m) => m.role === 'user');
  return typeof last?.content === 'string' ? last.content : '';
}

/** An agent that echoes the last user message. */
export const echoAgent = () => new ScriptAgent((input) => reply(input, `echo: ${lastUserText(input)}`));

export interface TestProvider {
  providerId: string;
  privateKey: string;
  publicKey: string;
  link: ProviderLink;
}

/** Registers a provider with the gateway's admin route, then links it (`@funduq/provider`'s `connect`). */
export async function linkProvider(
  gateway: LocalGateway,
  /** `places`: the registration's maxConcurrentRuns (funduq's count); `maxConcurrentRuns`: the SDK's own. */
  options: { providerId: string; agents: ConnectOptions['agents']; places?: number; may?: string[]; url?: string } & Partial<ConnectOptions>,
): Promise<TestProvider> {
  const { providerId, agents, places, may, url, ...rest } = options;
  const keys = generateKeyPair();
  await registerProvider(gateway, providerId, { publicKey: keys.publicKey, agents: may ?? Object.keys(agents), maxConcurrentRuns: places ?? 10 });
  const link = await connect({ url: url ?? gateway.link.url, providerId, privateKey: keys.privateKey, funduqPublicKey: gateway.link.publicKey, agents, ...rest });
  return { providerId, ...keys, link };
}

export async function registerProvider(gateway: { url: string }, providerId: string, body: Record<string, unknown>): Promise<Response> {
  const response = await fetch(`${gateway.url}/admin/providers/${providerId}`, {
    method: 'PUT',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`PUT /admin/providers/${providerId}: ${response.status} ${await response.text()}`);
  return response;
}

/**
 * A provider spoken by hand over the wire (no SDK): for what the SDK never does, such as leaving an
 * offer unanswered or refusing one. It records every frame funduq sent it.
 */
export async function rawProvider(
  gateway: LocalGateway,
  providerId: string,
  privateKey: string,
  agents: string[],
  answer: (frame: ToProviderFrame, send: (frame: FromProviderFrame) => void) => void = () => {},
): Promise<{ frames: ToProviderFrame[]; close(): void }> {
  const frames: ToProviderFrame[] = [];
  const socket = new WebSocket(gateway.link.url, { headers: { [LINK_PROOF_HEADER]: proofHeader(providerId, privateKey, gateway.link.publicKey) } });
  const send = (frame: FromProviderFrame) => socket.send(JSON.stringify(frame));
  const reassembly = new Reassembly();
  await new Promise<void>((resolve, reject) => {
    socket.on('error', reject);
    socket.on('message', (data) => {
      const read = readMessage(data.toString(), ToProviderSchema, reassembly);
      if (!read || 'problem' in read) return;
      frames.push(read.frame);
      if (read.frame.type === 'welcome') send({ v: 1, type: 'register', agents: agents.map((name) => ({ name, description: `${name}, by hand` })) });
      else if (read.frame.type === 'registered') resolve();
      else answer(read.frame, send);
    });
  });
  return { frames, close: () => socket.terminate() };
}

/** A proof header as the SDK makes one, for handshakes made by hand. */
export function proofHeader(providerId: string, privateKey: string, gatewayKey: string, overrides: { nonce?: string; time?: number } = {}): string {
  const proof = { v: 1 as const, providerId, nonce: overrides.nonce ?? randomBytes(18).toString('base64url'), time: overrides.time ?? Date.now(), gatewayKey, signature: '' };
  proof.signature = signText(privateKeyOf(privateKey), proofText(proof));
  return Buffer.from(JSON.stringify(proof)).toString('base64url');
}

/** Opens a WebSocket to the link with this header: the refusal's status and code, or 101. */
export function handshake(url: string, header: string | undefined): Promise<{ status: number; code?: string; message?: string }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, header === undefined ? {} : { headers: { [LINK_PROOF_HEADER]: header } });
    socket.on('open', () => {
      socket.terminate();
      resolve({ status: 101 });
    });
    socket.on('unexpected-response', (_request, response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => (body += chunk.toString()));
      response.on('end', () => {
        const error = (JSON.parse(body) as { error: { code: string; message: string } }).error;
        resolve({ status: response.statusCode ?? 0, code: error.code, message: error.message });
      });
    });
    socket.on('error', (error) => {
      if (!String(error.message).includes('Unexpected server response')) reject(error);
    });
  });
}

/**
 * A TCP relay between a provider and the gateway, standing in for the network: `cut()` breaks every
 * connection through it as a network failure would, `refuse()` turns new ones away until `admit()`.
 */
export async function startRelay(target: string): Promise<{ url: string; connections: number; cut(): void; refuse(): void; admit(): void; close(): Promise<void> }> {
  const { hostname, port, pathname } = new URL(target.replace(/^ws/, 'http'));
  const sockets = new Set<Socket>();
  let refusing = false;
  const relay = {
    url: '',
    connections: 0,
    cut: () => {
      for (const socket of sockets) socket.destroy();
      sockets.clear();
    },
    refuse: () => (refusing = true),
    admit: () => (refusing = false),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        relay.cut();
      }),
  };
  const server = createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    relay.connections += 1;
    const upstream = netConnect(Number(port), hostname);
    sockets.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    const drop = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  relay.url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}${pathname}`;
  return relay;
}
