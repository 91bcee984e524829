import type { RunAgentInput } from '@ag-ui/core';
import type { Agent, AgUiEventRecord, Arrival, AskState, Budget, LinkProvider, MessageClaim, PushConfig, Run, RunLink, RunStatus, Spend, StoredEvent, Tenant, Thread, ThreadRef } from './model.js';
import type { LinkProof, ToProviderFrame } from '../../packages/provider/src/wire.js';
import type { UsageRecord } from './usage.js';

/**
 * The record: threads, runs (with their asks), agents and run_events. Every status change is a
 * single-item conditional write, so of two writers exactly one wins and the loser changes nothing.
 */
export interface TaskIndexQuery {
  agentId: string;
  /** The context (thread) of the tasks. */
  threadId?: string;
  /** An A2A TaskState number. */
  state?: number;
  /** Only tasks whose state was set after this time (an ISO 8601 UTC time as `Date.toISOString` writes it). */
  stateAfter?: string;
  limit: number;
  cursor?: string;
}

export interface RunStore {
  /** A thread is named by its tenant and its id (see `ThreadRef`); a `Run` names its own thread. */
  getThread(thread: ThreadRef): Promise<Thread | undefined>;
  /** Creates the thread unless the tenant has one with that id, its one place held by `holder` (its first run); false when it did. */
  createThread(thread: Thread, holder: string): Promise<boolean>;
  /**
   * Takes the thread's next arrival number and one of its places (a place is held by each run
   * not yet settled: queued or running). With a `limit`, only while fewer than `limit` places are
   * held; undefined when the thread is full (nothing written). A place is held by its run's id
   * (`holder`): a holder that holds one already takes a new number and no second place.
   */
  reserveArrival(thread: ThreadRef, holder: string, limit: number | undefined): Promise<number | undefined>;
  /** Gives back the place `holder` holds, if it holds one: a repeat gives nothing back twice. */
  releasePlace(thread: ThreadRef, holder: string): Promise<void>;
  /** The runs holding the thread's places (a repair gives back those of runs settled or never recorded). */
  placeHolders(thread: ThreadRef): Promise<string[]>;
  /**
   * The request that opened the thread failed before its run was recorded: the thread goes, if
   * nothing else arrived on it since (its only arrival is the opener's, and `holder` holds its
   * place); else the place `holder` holds, if any, goes back.
   */
  abandonThread(thread: ThreadRef, holder: string): Promise<void>;
  /** Recovery: the thread's places are held by these runs (what the run records say), and by no others. */
  setUnsettled(thread: ThreadRef, holders: readonly string[]): Promise<void>;
  setWaitingRun(thread: ThreadRef, runId: string): Promise<void>;

  /**
   * Notes a request before it takes anything (a second note of the same run id, its request again,
   * replaces the first); false, and nothing written, while a sweep holds the first (`claimArrival`).
   */
  noteArrival(arrival: Arrival): Promise<boolean>;
  /**
   * A sweep takes a note it listed, only while it is as listed (the same `at`: no repeat of its
   * request noted since), so it gives back what that request took with no repeat of it under way.
   */
  claimArrival(arrival: Arrival): Promise<boolean>;
  /** The request's run is recorded, or all it took was given back. */
  forgetArrival(runId: string): Promise<void>;
  /** Arrivals noted before `before` (ISO) and not forgotten, oldest first, at most `limit` (a repeat may list some again). */
  listArrivals(before: string, limit: number): Promise<Arrival[]>;

  /**
   * Admits one run of a tenant against its limits, in one conditional write on the tenant's item:
   * a count per `window` (a clock minute) below `runsPerWindow`, and places (one per unsettled run)
   * below `places`. A limit left out is not applied (nor counted). Nothing is written when refused.
   * A place is held by its run's id: a holder that holds one already is admitted on it.
   */
  admitTenantRun(tenant: string, holder: string, limits: TenantLimits): Promise<TenantAdmission>;
  /** Gives back the tenant's place `holder` holds (its run settled, or was refused after admission), if it holds one. */
  releaseTenantPlace(tenant: string, holder: string): Promise<void>;
  /** Recovery: every tenant's places are held by the runs given, none for a tenant not named. */
  setTenantPlaces(places: ReadonlyMap<string, readonly string[]>): Promise<void>;
  /** The tenant's own budget and its spend, if the record has either. */
  getTenant(tenant: string): Promise<Tenant | undefined>;
  /** Sets (or, with undefined, removes) the tenant's own budget; its spend is set to `spend`. */
  putTenantBudget(tenant: string, budget: Budget | undefined, spend: Spend): Promise<void>;
  /**
   * Adds a run's tokens and cost to the tenant's spend of `charge.period`, starting the spend
   * again when the stored one is of an earlier period (one conditional write per round). Returns
   * the spend as written, or undefined when the stored spend is of a later period (the charge's
   * period is over: nothing is written).
   */
  chargeTenant(tenant: string, charge: Pick<Spend, 'period' | 'tokens' | 'cost'>): Promise<Spend | undefined>;
  /** Records that a run took the spend of `period` past the budget, unless a run did already. */
  markBudgetCrossed(tenant: string, period: string, runId: string, at: string): Promise<void>;

  /** Writes a settled run's usage record unless its run id has one; false when it had. */
  putUsageRecord(record: UsageRecord): Promise<boolean>;
  /**
   * Usage records that ended in [from, to) (ISO times), at most `limit`, of one tenant (oldest
   * first) or, without one, of every tenant (month by month); `cursor` continues a listing.
   */
  listUsage(query: UsageQuery): Promise<{ records: UsageRecord[]; cursor?: string }>;

  /** Creates the run unless one with that id exists; false when it did. */
  createRun(run: Run): Promise<boolean>;
  getRun(runId: string): Promise<Run | undefined>;
  /**
   * The run, if it is the tenant's. Another tenant's run is left unread (only its key is looked
   * at), so naming one costs what naming an unknown id costs: its existence does not show.
   */
  getRunOf(tenant: string, runId: string): Promise<Run | undefined>;
  /** The thread's runs in arrival order. */
  listThreadRuns(thread: ThreadRef): Promise<Run[]>;
  /** Every run in a status (recovery on one machine; a scan). */
  listRunsByStatus(status: RunStatus): Promise<Run[]>;
  /** The same, a page at a time (recovery, whose runs may be many and large): at most `limit` runs, and a cursor while more may follow. */
  pageRunsByStatus(status: RunStatus, page: { limit: number; cursor?: string }): Promise<{ runs: Run[]; cursor?: string }>;
  /**
   * A page of a tenant's A2A tasks (root runs) at one agent, newest first, from the task index
   * (each task's state and its time as its tail run's last write left them, see
   * `core/a2a/task-state.ts`), narrowed by context, state and state time. At most `limit` roots,
   * and a cursor while more may follow: a page may hold fewer than asked, even none, and go on.
   * A cursor the store did not issue for this tenant is a RangeError.
   */
  listTasks(tenant: string, query: TaskIndexQuery): Promise<{ runs: Run[]; cursor?: string }>;
  /**
   * Writes the index entry of the run's task from the run as given, unless a run of its lineage
   * that arrived later wrote it: again, for a writer that died between a run's write and its
   * entry's (a store that writes the two in one transaction has nothing to do).
   */
  reindexTask(run: Run): Promise<void>;
  /**
   * Applies `patch` (which sets `status`) only while the run's status is one of `from`.
   * Returns the run as written, or undefined when the condition failed.
   */
  transitionRun(runId: string, from: readonly RunStatus[], patch: Partial<Run> & { status: RunStatus }): Promise<Run | undefined>;
  /**
   * Moves the named asks from `open` to their new states in one conditional write: every named
   * ask must still be `open`. Returns the run as written, or undefined when any was not open.
   */
  closeAsks(runId: string, changes: Record<string, { state: Exclude<AskState, 'open'>; closedByRunId?: string }>): Promise<Run | undefined>;
  /**
   * Opens the named asks again, in one conditional write, only while each is still closed by the
   * run named in `changes` (an answer whose run could not be recorded), and counts the opening
   * (`asksReopened`). Undefined when any was not.
   */
  reopenAsks(runId: string, changes: Record<string, { state: Exclude<AskState, 'open'>; closedByRunId?: string }>): Promise<Run | undefined>;

  /**
   * Stores a run's events, numbered by its holder (the dispatcher that marked it running, or the
   * cancel that ended it queued): their seqs are new for the run. Events of one call may become
   * visible in any order; readers wait out a gap until it fills.
   */
  appendEvents(events: StoredEvent[]): Promise<void>;
  /**
   * Stores each event at its seq unless that seq of the run is stored already: the first write of
   * a seq wins. For events numbered by a producer elsewhere (a provider that dials out, whose
   * frames may arrive twice and in any order) and for closing events written by someone other
   * than the run's holder. Returns the seqs that were taken (not written).
   */
  appendNew(events: StoredEvent[]): Promise<number[]>;
  /** The settled run's closing events are all in its log: its record need not hold them any more. */
  forgetClosingEvents(runId: string): Promise<void>;
  /** Events with seq > afterSeq, in order, at most `limit`. */
  readEvents(runId: string, afterSeq: number, limit?: number): Promise<StoredEvent[]>;
  lastSeq(runId: string): Promise<number>;

  putAgent(agent: Agent): Promise<void>;
  getAgent(agentId: string): Promise<Agent | undefined>;
  listAgents(): Promise<Agent[]>;
  deleteAgent(agentId: string): Promise<void>;

  /** Creates or replaces a task's push config (same task and config id). */
  putPushConfig(config: PushConfig): Promise<void>;
  getPushConfig(taskId: string, configId: string): Promise<PushConfig | undefined>;
  listPushConfigs(taskId: string): Promise<PushConfig[]>;
  /** False when there was no such config. */
  deletePushConfig(taskId: string, configId: string): Promise<boolean>;
  /** Records on an existing config the notification that could not be delivered; a deleted config stays deleted. */
  recordPushFailure(taskId: string, configId: string, deadLetter: NonNullable<PushConfig['deadLetter']>): Promise<void>;

  /**
   * Takes `claim.key` for `claim` unless a claim on that key is still live at `nowSeconds`
   * (one conditional write). Returns the live claim: `claim` itself when it was taken.
   */
  claimMessage(claim: MessageClaim, nowSeconds: number): Promise<MessageClaim>;
  /** Gives the key back, only while it is still held by `claim.runId`. */
  releaseMessage(claim: MessageClaim): Promise<void>;

  /** Creates or replaces a link provider's registration, keeping the places its runs hold; true when it was new. */
  putProvider(provider: LinkProvider): Promise<boolean>;
  /** The registration, with `places`: how many of its places runs hold now. */
  getProvider(providerId: string): Promise<(LinkProvider & { places: number }) | undefined>;
  listProviders(): Promise<(LinkProvider & { places: number })[]>;
  /** False when there was none. */
  deleteProvider(providerId: string): Promise<boolean>;
  /**
   * Takes one of a provider's places (a run on offer to it or held by it holds one, across all its
   * agents) only while fewer than `limit` are held: one conditional write. False when full (or gone).
   */
  takeProviderPlace(providerId: string, limit: number): Promise<boolean>;
  /** Gives back one of a provider's places; never below zero. */
  releaseProviderPlace(providerId: string): Promise<void>;
  /** Recovery on one machine: no run is on offer or held after a restart, so every provider holds none. */
  resetProviderPlaces(): Promise<void>;
  /**
   * Sets a link run's `link` only while the run is running or cancelling and its link's `rev` is
   * `expectedRev` (undefined: it has none yet). The run as written, or undefined when either failed.
   */
  updateRunLink(runId: string, expectedRev: number | undefined, link: RunLink): Promise<Run | undefined>;
}

export interface TenantLimits {
  /** The clock minute (epoch ms / 60 000) the run arrives in. */
  window: number;
  runsPerWindow?: number;
  places?: number;
}

export type TenantAdmission = 'admitted' | 'rate_limited' | 'places_full';

export interface UsageQuery {
  tenant?: string;
  from: string;
  to: string;
  limit: number;
  cursor?: string;
}

/** Where usage records also go as they are written (CloudWatch metrics on AWS). */
export interface UsageMeter {
  record(record: UsageRecord): void;
}

/**
 * The inbound gap: one FIFO per thread. A run's message is delivered only after the thread's
 * previous run settled (its dispatch returned). A message's `threadId` is its thread's
 * `threadKey`, so two tenants' threads of the same id are two FIFOs.
 */
export interface ThreadQueue {
  enqueue(message: { threadId: string; runId: string }): Promise<void>;
  /**
   * Hands an interjection to a dispatcher at once, beside the thread's running run: it must not
   * wait behind the thread's message group.
   */
  dispatchBeside(message: { threadId: string; runId: string }): Promise<void>;
  /**
   * Lets go of a settled run's message (its receipt: `RunLink.hold` of a link run handed off, or
   * `Run.receipt`, which a repair lets go when the run's dispatcher died before the queue deleted
   * it): the thread's next run is delivered. A message already gone is no error.
   */
  release(receipt: string): Promise<void>;
}

/** The outbound gap's clock: fires `expireAsks(runId)` at the earliest `expiresAt` of a waiting run. */
/**
 * A waiting run's ask timer. `round` is how many times the run's asks were opened again
 * (`Run.asksReopened`, 0 before any): a timer armed after an opening is a new one (on Step
 * Functions an execution name is used once, for 90 days), and a disarm stops the round's.
 */
export interface AskTimer {
  arm(runId: string, expiresAt: string, round?: number): Promise<void>;
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

/**
 * Sends A2A push notifications. `vet` says why a target must not be called (an address that is
 * private, loopback or link-local, a scheme not allowed), or nothing when it may; `send` delivers
 * with its own retries and says how it went.
 */
export interface PushSender {
  vet(url: string): Promise<string | undefined>;
  send(notification: PushNotification): Promise<{ delivered: true } | { delivered: false; attempts: number; error: string }>;
}
