/**
 * The provider's side of the link: it dials out to funduq over a WebSocket, proves who it is with
 * its Ed25519 key, checks funduq's proof against the key it pinned, and serves the runs funduq
 * offers it with `@ag-ui/client` agents: an `HttpAgent` for an agent on the provider's own
 * network, or any `AbstractAgent` in the same process.
 */
import { randomBytes, randomUUID, type KeyObject } from 'node:crypto';
import { AbstractAgent, transformChunks, verifyEvents } from '@ag-ui/client';
import { EventType, type BaseEvent, type RunAgentInput } from '@ag-ui/core';
import { catchError, throwError, type Subscription } from 'rxjs';
import { WebSocket } from 'ws';
import { normalizePublicKey, privateKeyOf, signText, verifyText } from './ed25519.js';
import {
  LINK_PROOF_HEADER,
  LINK_REFUSAL_HEADER,
  messagesOf,
  proofText,
  readMessage,
  Reassembly,
  ToProviderSchema,
  welcomeText,
  WS_FRAME_BYTES,
  type AgentSkill,
  type FromProviderFrame,
  type ToProviderFrame,
} from './wire.js';

/** An agent served on the link, with what funduq's roster and agent cards say of it. */
export interface LinkedAgent {
  agent: AbstractAgent;
  /** By default the agent's own `description`. */
  description?: string;
  skills?: AgentSkill[];
  /** The agent accepts A2A interjections beside a running run. */
  takesInterjections?: boolean;
  /**
   * Called with each run's own copy of the agent before it runs, with what the offer said of the
   * run: read its context (trace context, say), or set the copy's headers from it.
   */
  prepare?(agent: AbstractAgent, run: OfferedRun): void;
}

/** A run funduq offered, as the provider took it. */
export interface OfferedRun {
  runId: string;
  /** The agent's name, as callers address it. */
  agent: string;
  /** The run's context from its caller's door (`traceparent`, `tracestate`): opaque, possibly empty. */
  context: Readonly<Record<string, string>>;
}

export interface ConnectOptions {
  /** The gateway's link: `ws://127.0.0.1:8787/link` on one machine. */
  url: string;
  /** The id an admin registered this provider under (`PUT /admin/providers/{providerId}`). */
  providerId: string;
  /** This provider's Ed25519 private key: its 32-byte seed (base64url), PEM, or a KeyObject. */
  privateKey: string | Uint8Array | KeyObject;
  /** funduq's public key, pinned: a gateway that cannot prove it holds its private half is not served. */
  funduqPublicKey: string;
  /** The agents served, by the name callers address them by (`/agui/{name}`, `/a2a/{name}/`). */
  agents: Record<string, AbstractAgent | LinkedAgent>;
  /** The runs this process takes at once; an offer beyond them is declined (funduq offers it elsewhere, or later). */
  maxConcurrentRuns?: number;
  /** Told of what goes wrong while the link carries on: a lost link (it reconnects), a frame funduq refused. */
  onError?: (error: Error) => void;
}

/** funduq refused the link (the handshake) or could not prove itself: nothing is retried. */
export class LinkRefused extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(`${code}: ${message}`);
    this.name = 'LinkRefused';
  }
}

export interface ProviderLink {
  /** The agents funduq took on this link. */
  readonly registered: readonly string[];
  /** Settles when the link ends for good: resolves after `close()`, rejects with `LinkRefused` when a reconnect is refused. */
  readonly closed: Promise<void>;
  /** Stops every run this process holds (funduq fails them when the grace window ends) and closes the link. */
  close(): Promise<void>;
}

/**
 * Opens the link: resolves once funduq has proved itself and taken the agents, rejects with
 * `LinkRefused` (or the network's error) when the first attempt fails. From then on the link is
 * kept: a lost one is opened again (backing off up to 5 s) and resumes the runs it held, from the
 * last event funduq stored of each.
 */
export async function connect(options: ConnectOptions): Promise<ProviderLink> {
  const link = new Link(options);
  await link.open();
  return link;
}

/** Of an events frame: a batch is sent once its JSON passes this (a frame of one event may be larger). */
const BATCH_BYTES = 64 * 1024;
const RECONNECT_MS = { first: 250, most: 5_000 };

/** A run this provider holds, with every event it produced (sent again after a reconnect, from where funduq's log ends). */
interface HeldRun {
  runId: string;
  events: { seq: number; event: BaseEvent }[];
  /** The highest seq sent on the current link. */
  sentThrough: number;
  /** The agent's terminal event was produced: nothing more comes. */
  finished: boolean;
  stop?: () => void;
}

class Link implements ProviderLink {
  registered: string[] = [];
  readonly closed: Promise<void>;
  private settleClosed!: { resolve: () => void; reject: (error: Error) => void };
  private readonly privateKey: KeyObject;
  private readonly funduqKey: string;
  private socket: WebSocket | undefined;
  private readonly runs = new Map<string, HeldRun>();
  private closing = false;
  private flushing = false;
  private heartbeat: NodeJS.Timeout | undefined;
  private heardAt = 0;
  private reassembly = new Reassembly();

  constructor(private readonly options: ConnectOptions) {
    this.privateKey = privateKeyOf(options.privateKey);
    const pinned = normalizePublicKey(options.funduqPublicKey);
    if (!pinned) throw new TypeError('funduqPublicKey must be an Ed25519 public key (base64url of its 32 bytes, or PEM)');
    this.funduqKey = pinned;
    this.closed = new Promise((resolve, reject) => (this.settleClosed = { resolve, reject }));
    // Awaited by whoever wants to know; a refusal nobody awaits does not bring the process down.
    this.closed.catch(() => undefined);
  }

  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.heartbeat);
    for (const run of this.runs.values()) run.stop?.();
    this.runs.clear();
    const socket = this.socket;
    if (socket && socket.readyState !== WebSocket.CLOSED) {
      await new Promise<void>((resolve) => {
        socket.once('close', () => resolve());
        socket.close(1000, 'the provider closed its link');
      });
    }
    this.settleClosed.resolve();
  }

  /** One attempt: the handshake, funduq's proof checked, the agents registered and the held runs resumed. */
  open(): Promise<void> {
    const nonce = randomBytes(24).toString('base64url');
    const proof = { v: 1 as const, providerId: this.options.providerId, nonce, time: Date.now(), gatewayKey: this.funduqKey, signature: '' };
    proof.signature = signText(this.privateKey, proofText(proof));
    const socket = new WebSocket(this.options.url, { headers: { [LINK_PROOF_HEADER]: Buffer.from(JSON.stringify(proof)).toString('base64url') } });
    this.reassembly = new Reassembly();
    return new Promise<void>((resolve, reject) => {
      let welcomed = false;
      /** This attempt is over: it opened the link (`opened`) or failed. */
      let settled = false;
      let opened = false;
      const fail = (error: Error) => {
        if (settled) return;
        settled = true;
        socket.terminate();
        reject(error);
      };
      socket.on('unexpected-response', (_request, response) => {
        let body = '';
        response.on('data', (chunk: Buffer) => (body += chunk.toString()));
        response.on('end', () => {
          const code = String(response.headers[LINK_REFUSAL_HEADER] ?? `http_${response.statusCode}`);
          let message = body;
          try {
            message = (JSON.parse(body) as { error?: { message?: string } }).error?.message ?? body;
          } catch {
            // Not funduq's JSON: the body as it came.
          }
          fail(new LinkRefused(code, message));
        });
      });
      socket.on('error', (error) => fail(error));
      // Said first: API Gateway lets funduq speak only once the connection is open, so on AWS its welcome answers this.
      socket.on('open', () => socket.send(JSON.stringify({ v: 1, type: 'hello' })));
      socket.on('message', (data) => {
        this.heardAt = Date.now();
        const read = readMessage(data.toString(), ToProviderSchema, this.reassembly);
        if (!read) return;
        if ('problem' in read) return this.options.onError?.(new Error(`funduq sent a frame this provider cannot read: ${read.problem}`));
        const frame = read.frame;
        if (!welcomed) {
          if (frame.type !== 'welcome' || !verifyText(this.funduqKey, welcomeText(this.options.providerId, nonce, frame.connectionId), frame.signature)) {
            fail(new LinkRefused('funduq_key_mismatch', 'the gateway did not prove it holds the key this provider pinned (funduqPublicKey)'));
            return;
          }
          welcomed = true;
          this.socket = socket;
          this.keepAlive(frame.heartbeatSeconds * 1000);
          this.send({ v: 1, type: 'register', agents: this.cards() });
          this.send({ v: 1, type: 'resume', runs: [...this.runs.keys()] });
          return;
        }
        if (frame.type === 'registered' && !opened) {
          settled = opened = true;
          this.registered = frame.agents;
          for (const { name, reason } of frame.refused) this.options.onError?.(new Error(`funduq did not take the agent "${name}": ${reason}`));
          resolve();
        }
        this.handle(frame);
      });
      socket.on('close', () => {
        if (this.socket === socket) this.socket = undefined;
        if (!settled) fail(new Error('the link closed before funduq took its agents'));
        // Only a link that was open is opened again; a failed attempt is its caller's to retry.
        else if (opened && !this.closing) void this.reopen();
      });
    });
  }

  private async reopen(): Promise<void> {
    clearInterval(this.heartbeat);
    this.options.onError?.(new Error('the link to funduq was lost; reconnecting'));
    for (let wait = RECONNECT_MS.first; !this.closing; wait = Math.min(wait * 2, RECONNECT_MS.most)) {
      await new Promise((resolve) => setTimeout(resolve, wait));
      if (this.closing) return;
      try {
        await this.open();
        return;
      } catch (error) {
        if (error instanceof LinkRefused) {
          this.closing = true;
          for (const run of this.runs.values()) run.stop?.();
          this.settleClosed.reject(error);
          return;
        }
      }
    }
  }

  /** Says it is alive every heartbeat; a gateway silent for three is taken as gone (the link is opened again). */
  private keepAlive(everyMs: number): void {
    clearInterval(this.heartbeat);
    this.heartbeat = setInterval(() => {
      if (Date.now() - this.heardAt > 3 * everyMs) this.socket?.terminate();
      else this.send({ v: 1, type: 'heartbeat' });
    }, everyMs);
    this.heartbeat.unref();
  }

  private cards() {
    return Object.entries(this.options.agents).map(([name, given]) => {
      const linked: LinkedAgent = given instanceof AbstractAgent ? { agent: given } : given;
      return {
        name,
        description: linked.description ?? (linked.agent.description || name),
        ...(linked.skills ? { skills: linked.skills } : {}),
        ...(linked.takesInterjections !== undefined ? { takesInterjections: linked.takesInterjections } : {}),
      };
    });
  }

  private handle(frame: ToProviderFrame): void {
    switch (frame.type) {
      case 'run':
        return this.offered(frame);
      case 'cancel':
        return this.cancelled(frame.runId, frame.reason);
      case 'settled':
        this.runs.delete(frame.runId);
        return;
      case 'resumed':
        for (const { runId, lastSeq } of frame.runs) {
          const run = this.runs.get(runId);
          if (!run) continue;
          run.events = run.events.filter((stored) => stored.seq > lastSeq);
          run.sentThrough = lastSeq;
        }
        for (const runId of frame.gone) {
          this.runs.get(runId)?.stop?.();
          this.runs.delete(runId);
        }
        this.flushSoon();
        return;
      case 'error':
        this.options.onError?.(new Error(`funduq refused a frame${frame.runId ? ` of run ${frame.runId}` : ''}: ${frame.code}: ${frame.message}`));
        return;
    }
  }

  private offered(frame: Extract<ToProviderFrame, { type: 'run' }>): void {
    const given = this.options.agents[frame.agent];
    if (!given) {
      this.send({ v: 1, type: 'refuse', runId: frame.runId, offer: frame.offer, reason: `this provider serves no agent "${frame.agent}"` });
      return;
    }
    const busy = [...this.runs.values()].filter((run) => !run.finished).length;
    if (this.runs.has(frame.runId) || busy >= (this.options.maxConcurrentRuns ?? Infinity)) {
      this.send({ v: 1, type: 'decline', runId: frame.runId, offer: frame.offer, reason: 'full' });
      return;
    }
    this.send({ v: 1, type: 'accept', runId: frame.runId, offer: frame.offer });
    const offered: OfferedRun = { runId: frame.runId, agent: frame.agent, context: frame.context ?? {} };
    this.start(offered, given instanceof AbstractAgent ? { agent: given } : given, frame.input);
  }

  /** Runs the agent as its stock client would (its chunks made whole, its stream verified), numbering each event. */
  private start(offered: OfferedRun, given: LinkedAgent, input: RunAgentInput): void {
    const { runId } = offered;
    const run: HeldRun = { runId, events: [], sentThrough: 0, finished: false };
    this.runs.set(runId, run);
    let seq = 0;
    const emit = (event: BaseEvent) => {
      if (run.finished || this.runs.get(runId) !== run) return;
      run.events.push({ seq: ++seq, event });
      if (event.type === EventType.RUN_FINISHED || event.type === EventType.RUN_ERROR) {
        run.finished = true;
        subscription?.unsubscribe();
      }
      this.flushSoon();
    };
    const agent = given.agent.clone() as AbstractAgent;
    let subscription: Subscription | undefined;
    run.stop = () => {
      run.finished = true;
      subscription?.unsubscribe();
      agent.abortRun();
    };
    const failed = (error: unknown, agentFailed: boolean) => {
      const message = error instanceof Error ? error.message : String(error);
      emit({ type: EventType.RUN_ERROR, code: agentFailed ? 'provider_failed' : 'provider_sent_malformed_event', message } as BaseEvent);
    };
    try {
      given.prepare?.(agent, offered);
      subscription = agent
        .run(input)
        .pipe(
          transformChunks(false),
          catchError((error: unknown) => throwError(() => new AgentFailure(error))),
          verifyEvents(false),
        )
        .subscribe({
          next: emit,
          error: (error: unknown) => (error instanceof AgentFailure ? failed(error.cause, true) : failed(error, false)),
          complete: () =>
            emit({ type: EventType.RUN_ERROR, code: 'provider_stream_ended_without_finishing', message: 'the agent ended its stream without RUN_FINISHED or RUN_ERROR' } as BaseEvent),
        });
    } catch (error) {
      // An agent whose run() throws before it returns its stream.
      failed(error, true);
    }
  }

  private cancelled(runId: string, reason: string): void {
    const run = this.runs.get(runId);
    if (!run) return;
    const wasRunning = !run.finished;
    run.stop?.();
    this.runs.delete(runId);
    // The receipt says the agent stopped after these events; an offer taken back needs none.
    if (wasRunning && reason !== 'offer_withdrawn') {
      this.flush(run);
      this.send({ v: 1, type: 'cancelled', runId, lastSeq: run.events.at(-1)?.seq ?? run.sentThrough });
    }
  }

  /** Events of one moment go in one frame: a fast agent's burst in few frames, a slow one's event at once. */
  private flushSoon(): void {
    if (this.flushing) return;
    this.flushing = true;
    setImmediate(() => {
      this.flushing = false;
      for (const run of this.runs.values()) this.flush(run);
    });
  }

  private flush(run: HeldRun): void {
    if (!this.socket) return;
    let batch: { seq: number; event: BaseEvent }[] = [];
    let bytes = 0;
    for (const stored of run.events) {
      if (stored.seq <= run.sentThrough) continue;
      batch.push(stored);
      bytes += JSON.stringify(stored.event).length;
      if (bytes >= BATCH_BYTES) {
        this.sendEvents(run, batch);
        batch = [];
        bytes = 0;
      }
    }
    if (batch.length > 0) this.sendEvents(run, batch);
  }

  private sendEvents(run: HeldRun, events: { seq: number; event: BaseEvent }[]): void {
    if (this.send({ v: 1, type: 'events', runId: run.runId, events })) run.sentThrough = events.at(-1)!.seq;
  }

  /** False when there is no link now (what was not sent goes after the next resume). */
  private send(frame: FromProviderFrame): boolean {
    const socket = this.socket;
    if (!socket || socket.readyState !== WebSocket.OPEN) return false;
    for (const message of messagesOf(frame, randomUUID)) {
      const bytes = Buffer.from(message, 'utf8');
      // API Gateway takes a WebSocket frame of at most 32 KB: a larger message goes in fragments.
      for (let at = 0; at < bytes.length || at === 0; at += WS_FRAME_BYTES) {
        socket.send(bytes.subarray(at, at + WS_FRAME_BYTES), { binary: false, fin: at + WS_FRAME_BYTES >= bytes.length });
        if (bytes.length === 0) break;
      }
    }
    return true;
  }
}

/** An error of the agent itself (not of its stream's order), told apart from the verifier's. */
class AgentFailure extends Error {
  constructor(override readonly cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause));
  }
}
