import type { RunAgentInput } from '@ag-ui/core';
import type { Agent, AskState, MessageClaim, PushConfig, Run, RunStatus, StoredEvent, Thread, ThreadRef } from './model.js';

/**
 * The record: threads, runs (with their asks), agents and run_events. Every status change is a
 * single-item conditional write, so of two writers exactly one wins and the loser changes nothing.
 */
export interface RunStore {
  /** A thread is named by its tenant and its id (see `ThreadRef`); a `Run` names its own thread. */
  getThread(thread: ThreadRef): Promise<Thread | undefined>;
  /** Creates the thread unless the tenant has one with that id; false when it did. */
  createThread(thread: Thread): Promise<boolean>;
  /**
   * Takes the thread's next arrival number and one of its places (a place is held by each run
   * not yet settled: queued or running). With a `limit`, only while fewer than `limit` places are
   * held; undefined when the thread is full (nothing written).
   */
  reserveArrival(thread: ThreadRef, limit: number | undefined): Promise<number | undefined>;
  /** Gives back a place (its run settled); never below zero. */
  releasePlace(thread: ThreadRef): Promise<void>;
  /** Recovery: sets the places held to what the run records say. */
  setUnsettled(thread: ThreadRef, unsettled: number): Promise<void>;
  setWaitingRun(thread: ThreadRef, runId: string): Promise<void>;

  /**
   * Admits one run of a tenant against its limits, in one conditional write on the tenant's item:
   * a count per `window` (a clock minute) below `runsPerWindow`, and places (one per unsettled run)
   * below `places`. A limit left out is not applied (nor counted). Nothing is written when refused.
   */
  admitTenantRun(tenant: string, limits: TenantLimits): Promise<TenantAdmission>;
  /** Gives back one of the tenant's places (its run settled, or was refused after admission); never below zero. */
  releaseTenantPlace(tenant: string): Promise<void>;
  /** Recovery: sets every tenant's places to the count given, 0 for a tenant not named. */
  setTenantPlaces(places: ReadonlyMap<string, number>): Promise<void>;

  /** Creates the run unless one with that id exists; false when it did. */
  createRun(run: Run): Promise<boolean>;
  getRun(runId: string): Promise<Run | undefined>;
  /** The thread's runs in arrival order. */
  listThreadRuns(thread: ThreadRef): Promise<Run[]>;
  /** Every run in a status (recovery on one machine; a scan). */
  listRunsByStatus(status: RunStatus): Promise<Run[]>;
  /** A page of root runs (task ids) of a tenant, newest first. */
  listRootRuns(tenant: string, page: { limit: number; cursor?: string }): Promise<{ runs: Run[]; cursor?: string }>;
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

  /** Appends events; their seqs are new for the run (one writer per run: its dispatcher). */
  appendEvents(events: StoredEvent[]): Promise<void>;
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
}

export interface TenantLimits {
  /** The clock minute (epoch ms / 60 000) the run arrives in. */
  window: number;
  runsPerWindow?: number;
  places?: number;
}

export type TenantAdmission = 'admitted' | 'rate_limited' | 'places_full';

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
}

/** The outbound gap's clock: fires `expireAsks(runId)` at the earliest `expiresAt` of a waiting run. */
export interface AskTimer {
  arm(runId: string, expiresAt: string): Promise<void>;
  disarm(runId: string): Promise<void>;
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
}

/**
 * Where an agent's loop runs. Yields AG-UI events as JSON objects; throws `RunFailure` to end
 * the run with a code of its own.
 */
export interface Provider {
  run(input: RunAgentInput, context: ProviderContext): AsyncIterable<unknown>;
}

export interface Clock {
  now(): number;
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
