import type { RunAgentInput } from '@ag-ui/core';
import type { Agent, AgUiEventRecord, PushConfig, Run, RunContext, StoredEvent } from './model.js';
import type { LinkProof, ToProviderFrame } from '../../packages/provider/src/wire.js';

export type {
  AgentRegistry,
  ArrivalNotes,
  AskChanges,
  AuditLog,
  SealedSegment,
  EventLog,
  MessageClaims,
  PrincipalKeys,
  ProviderRegistry,
  PurgedContent,
  PushConfigs,
  RecordProjections,
  RetentionRecords,
  LeaseAs,
  Reserved,
  RunLeases,
  RunRecords,
  RunStore,
  TaskEntry,
  TaskIndex,
  TaskIndexQuery,
  TenantAdmission,
  TenantCounters,
  TenantLimits,
  Threads,
  ThreadListQuery,
  UsageQuery,
  UsageRecords,
} from './record/port.js';

/**
 * A thread-queue message: its thread's `threadKey`, its run, and the run's context, carried so a
 * consumer has it before it reads the run (the run's record keeps it too).
 */
export interface ThreadMessage {
  threadId: string;
  runId: string;
  context?: RunContext;
}

/**
 * A door function that relays, itself, a run it admitted on an idle thread (AWS: the streaming
 * doors), so the run's first event does not wait on the thread queue's hand-off nor its events on
 * the readers' polls. `keep` keeps the function alive until the work ends (its caller's stream may
 * end first); `deadline` is when the run must have ended (epoch ms): the function's own end less
 * the time to settle.
 */
export interface DoorRelay {
  keep(work: Promise<unknown>): void;
  deadline(): number | undefined;
}

/**
 * The inbound gap: one FIFO per thread. A run's message is delivered only after the thread's
 * previous run settled (its dispatch returned). A message's `threadId` is its thread's
 * `threadKey`, so two tenants' threads of the same id are two FIFOs.
 */
export interface ThreadQueue {
  enqueue(message: ThreadMessage): Promise<void>;
  /**
   * Hands an interjection to a dispatcher at once, beside the thread's running run: it must not
   * wait behind the thread's message group.
   */
  dispatchBeside(message: ThreadMessage): Promise<void>;
  /**
   * Lets go of a settled run's message (its receipt: `RunLink.hold` of a link run handed off, or
   * `Run.receipt`, which a repair lets go when the run's dispatcher died before the queue deleted
   * it): the thread's next run is delivered. A message already gone is no error.
   */
  release(receipt: string): Promise<void>;
  /**
   * Makes a received message visible again at once (its receipt), for a run still queued whose
   * dispatcher died before marking it running: the next receive dispatches it, without waiting for
   * the message's visibility timeout. A message already gone is no error.
   */
  redeliver(receipt: string): Promise<void>;
}

/** The outbound gap's clock: fires `expireAsks(runId)` at the earliest `expiresAt` of a waiting run. */
/**
 * A waiting run's ask timer. `round` is how many times the run's asks were opened again
 * (`Run.asksReopened`, 0 before any): a timer armed after an opening is a new one (on Step
 * Functions an execution name is used once, for 90 days), and a disarm stops the round's.
 * `context` is the run's, carried by a timer that outlives the process (Step Functions' input)
 * and handed back when it fires.
 */
export interface AskTimer {
  arm(runId: string, expiresAt: string, round?: number, context?: RunContext): Promise<void>;
  disarm(runId: string, round?: number): Promise<void>;
}

export type RunChange =
  | { kind: 'events'; runId: string; events: StoredEvent[] }
  | { kind: 'status'; runId: string; run: Run };

/**
 * Wake-ups for readers of a run: published after the store took the write, so a reader that
 * is woken reads what is stored. On AWS the store's streams play this part.
 */
export interface ChangeFeed {
  publish(change: RunChange): void;
  subscribe(runId: string, listener: (change: RunChange) => void): () => void;
}

export interface ProviderContext {
  agent: Agent;
  /** Aborted when the run is cancelled or runs past its time: the provider stops and returns. */
  signal: AbortSignal;
  /** When the run will be stopped (epoch ms), for a provider that can tell its agent. */
  deadline: number;
  /** Says the agent is alive without an event (an SSE comment, any bytes): the idle clock starts again. */
  heartbeat(): void;
  /** Headers the run's observers give this call (`RunLife.providerCall`): a provider that speaks HTTP sends them. */
  headers?: Readonly<Record<string, string>>;
}

/**
 * Where an agent's loop runs. Yields AG-UI events as JSON objects; throws `RunFailure` to end
 * the run with a code of its own. Its time limits are the relay's (`limitedRun`), the same for
 * every kind: a provider only stops when its signal aborts.
 */
export interface Provider {
  run(input: RunAgentInput, context: ProviderContext): AsyncIterable<unknown>;
}

/**
 * The rules a caller's stock client holds a run's stream to (event order: no second RUN_STARTED,
 * no content for a message that is not open, …), for one run at a time: `start()` gives a check
 * that says why an event breaks them, or nothing when it does not.
 */
export interface StreamRules {
  start(): (event: AgUiEventRecord) => string | undefined;
}

/**
 * A provider kind whose agents dial out (`link`): a run is offered over its providers' links
 * (`core/link`) and its events come back as frames, not as a stream the dispatcher reads.
 */
export interface LinkedProvider {
  readonly linked: true;
}

/** An open link of a provider that dialled out: the gateway's own WebSocket on one machine, an API Gateway connection on AWS. */
export interface LinkConnection {
  connectionId: string;
  providerId: string;
  /** The agents it registered on this link. */
  agents: string[];
}

/** Frames to providers over their links. */
export interface LinkChannels {
  /** False when the link is gone. */
  send(connectionId: string, frame: ToProviderFrame): Promise<boolean>;
  /** Closes a link, saying why. */
  close(connectionId: string, reason: string): Promise<void>;
}

/**
 * Who is linked, what each link serves, and which runs wait for a provider or are at one: an index
 * of the runs' records (each run's `link` is the truth), in memory on one machine.
 */
export interface LinkRoster {
  /** A provider's new link; the link of that provider it replaces, if any (one link per provider). */
  join(connection: LinkConnection): Promise<LinkConnection | undefined>;
  /** The link that closed, unless it was replaced already. */
  leave(connectionId: string): Promise<LinkConnection | undefined>;
  get(connectionId: string): Promise<LinkConnection | undefined>;
  ofProvider(providerId: string): Promise<LinkConnection | undefined>;
  serve(connectionId: string, agents: string[]): Promise<void>;
  /** The links serving an agent. */
  serving(agentId: string): Promise<LinkConnection[]>;
  /** Runs that found no provider with room, by agent, oldest first. */
  wait(agentId: string, runId: string): Promise<void>;
  unwait(agentId: string, runId: string): Promise<void>;
  waiting(agentId: string): Promise<string[]>;
  /** Runs on offer to a provider or held by it. */
  hold(providerId: string, runId: string): Promise<void>;
  drop(providerId: string, runId: string): Promise<void>;
  held(providerId: string): Promise<string[]>;
}

/** What a link timer does when it fires; each checks the run's record first, so a stale one does nothing. */
export type LinkJob =
  /** An offer went unanswered (or found no provider with room): offer again. */
  | { kind: 'offer'; runId: string; offer: number }
  /** No provider took the run in time: it fails `no_provider_took_it`. */
  | { kind: 'unclaimed'; runId: string }
  /** The run passed its agent's `timeoutSeconds`: `provider_timeout`. */
  | { kind: 'deadline'; runId: string }
  /** Nothing came since `seq` for `idleTimeoutSeconds`: `provider_idle`. */
  | { kind: 'idle'; runId: string; seq: number }
  /** The holder's link closed and it did not come back within the grace window: `provider_left_holding_it`. */
  | { kind: 'grace'; runId: string; connectionId: string }
  /** The run's end is known but its log had a hole (frames handled out of order): look again. */
  | { kind: 'ending'; runId: string };

/** Fires link jobs later: the core's clock on one machine; on AWS, delayed messages to a function. */
export interface LinkTimer {
  schedule(job: LinkJob, afterMs: number): Promise<void>;
}

/**
 * Ed25519: funduq's own key, and checks of providers' signatures, over the texts the wire says each
 * side signs. Keys and signatures are base64url.
 */
export interface LinkKeys {
  /** funduq's public key (its 32 raw bytes), which providers pin. */
  publicKey: string;
  /** Whether the proof's signature is by `publicKey` (the provider's registered key). */
  verifyProof(proof: LinkProof, publicKey: string): boolean;
  /** funduq's signature for its welcome on a link: over the provider's nonce and the link's id. */
  signWelcome(providerId: string, nonce: string, connectionId: string): string;
  /** A provider's key as an admin gave it (base64url of the raw key, or PEM) in the record's form; undefined when it is no Ed25519 public key. */
  normalize(given: string): string | undefined;
}

/**
 * Signed actor chains (who acts for whom) and the signatures of the acts on a thread bound to its
 * head: Ed25519, keys and signatures base64url, with funduq's identity key (the link's) for its hop.
 */
export interface ActorProofs {
  /** funduq's public key: the signer of the hop it appends. */
  publicKey: string;
  /** Every hop's signature and link checked (bounds too): the signers' keys, head first; or what failed, naming the hop and key. */
  read(chain: unknown): { ok: true; signers: string[] } | { ok: false; message: string };
  /** The chain with funduq's hop appended, naming where it dispatches the run. */
  extend(chain: readonly string[], dispatchedTo: { agent: string; provider: string }): string[];
  /** Whether `signature` is `publicKey`'s over the UTF-8 of `text`; a key or signature that does not parse does not verify. */
  verify(publicKey: string, text: string, signature: string): boolean;
  sha256Hex(text: string): string;
  /** A key as an admin gave it (base64url of the raw key, or PEM) in the record's form; undefined when it is no Ed25519 public key. */
  normalize(given: string): string | undefined;
}

export interface Clock {
  now(): number;
  /** Calls `fire` once after `ms`; returns a cancel. The core's only timers, so tests move time by hand. */
  after(ms: number, fire: () => void): () => void;
}

export interface IdSource {
  newId(): string;
}

/** One push notification: the config it goes to and the A2A `StreamResponse` it carries. */
export interface PushNotification {
  config: PushConfig;
  /** An `@a2a-js/sdk` StreamResponse; the sender serialises it for the wire. */
  body: unknown;
}

/** The header every push notification carries the gateway's JWT in (the A2A door's signing extension names it). */
export const PUSH_JWT_HEADER = 'X-Funduq-Notification-JWT';

/**
 * Sends A2A push notifications. `vet` says why a target must not be called (an address that is
 * private, loopback or link-local, a scheme not allowed), or nothing when it may; `send` delivers
 * with its own retries and says how it went.
 */
export interface PushSender {
  vet(url: string): Promise<string | undefined>;
  send(notification: PushNotification): Promise<{ delivered: true } | { delivered: false; attempts: number; error: string }>;
}
