import type { Interrupt, RunAgentInput, TokenUsage } from '@ag-ui/core';

/** queued → running → completed | failed | cancelled, with cancelling between running and the end. */
export type RunStatus = 'queued' | 'running' | 'cancelling' | 'completed' | 'failed' | 'cancelled';

export const TERMINAL_STATUSES: readonly RunStatus[] = ['completed', 'failed', 'cancelled'];

export function isTerminal(status: RunStatus): boolean {
  return TERMINAL_STATUSES.includes(status);
}

/** Which door a run came through: AG-UI callers send the whole conversation, A2A callers only the new message. */
export type DoorName = 'agui' | 'a2a';

export type AskState = 'open' | 'answered' | 'expired' | 'cancelled';

/**
 * Something a finished run left open: an interrupt of an `interrupt` outcome, or a tool call
 * started with no result. Asks of one run are answered together, so they live on the run's record.
 */
export interface Ask {
  id: string;
  kind: 'interrupt' | 'tool_call';
  state: AskState;
  /** The interrupt as the agent sent it (kind `interrupt`). */
  interrupt?: Interrupt;
  toolCallId?: string;
  toolCallName?: string;
  expiresAt?: string;
  /** The run that answered, cancelled or (for `expired`) nothing. */
  closedByRunId?: string;
}

export interface Run {
  runId: string;
  threadId: string;
  agentId: string;
  tenant: string;
  principal: string;
  door: DoorName;
  status: RunStatus;
  /** Position in the thread's arrival order (1, 2, …), given by the thread's counter. */
  arrival: number;
  /** The run this one answers. */
  parentRunId?: string;
  /** The running run this one asked to join (an interjection). */
  addressedRunId?: string;
  /** The first run of the lineage: the A2A task id. */
  rootRunId: string;
  /** The input as the caller sent it (funduq's own annotations excluded). */
  input: RunAgentInput;
  createdAt: string;
  startedAt?: string;
  endedAt?: string;
  /** How a `completed` run ended, as AG-UI 1.0 names it. */
  outcome?: 'success' | 'interrupt' | 'cancelled';
  /** A stable code for why a run failed or was cancelled. */
  reason?: string;
  /** For a person to read, beside `reason`. */
  message?: string;
  cancelRequested?: boolean;
  asks?: Record<string, Ask>;
  /** The seq of the run's last event, set when the run settles. */
  lastSeq?: number;
  /**
   * The events that close the run's log (seqs lastSeq − n + 1 … lastSeq: the agent's terminal
   * event, or funduq's), held on the record from the run's end until the log has them: a reader
   * takes them from here, and whoever finds them still here stores them.
   */
  closingEvents?: AgUiEventRecord[];
  /** What the run used, set at its end (its usage record is derived from it). */
  usage?: RunUsage;
  /**
   * Events of the agent's stream left out because the stock client would refuse them and they
   * change nothing (a second RUN_STARTED, a message or tool call closed twice): how many, and the first.
   */
  droppedEvents?: { count: number; first: string };
  /**
   * The run holds one of its tenant's places (a limit on the tenant's unsettled runs was set when
   * it was accepted), to give back when it settles.
   */
  tenantPlace?: boolean;
  /** A run of an agent that dials out (the `link` kind): where it is on offer or held. */
  link?: RunLink;
  /**
   * Times its asks were opened again after an answer that was never recorded: each opening arms
   * a timer of its own (a Step Functions execution name is used once).
   */
  asksReopened?: number;
  /** The actor chain as funduq relayed it: the caller's hops and funduq's own (`forwardedProps.funduq.actorChain`). */
  actorChain?: string[];
  /** That chain's head and presenter (Ed25519 keys), as verified at admission: whom its audit record names. */
  actors?: { head: string; presenter: string };
  /** Whose signed cancel this run was asked to stop by (a key), on a thread bound to its head. */
  cancelRequestedBy?: string;
  /** The cancel that changed this run (queued to cancelled, or running to cancelling): who asked, when, by which request (its audit record is made from it). */
  cancelRequest?: { principal: string; credentialId?: string; requestId?: string; at: string };
  /** The request that submitted it, and the credential its caller showed (an id of it): what its audit record names. */
  requestId?: string;
  credentialId?: string;
  /**
   * The thread-queue delivery its dispatch holds (SQS: the message's receipt handle), let go by a
   * repair once the run settled. A run its door relays holds the message a dispatcher received
   * meanwhile, which the settle lets go.
   */
  receipt?: string;
  /**
   * Relayed by the door that admitted it, on its thread's only place (`claimAtDoor`), not by a
   * dispatcher: the holder its door's lease names, written as the run is recorded. A door lease
   * that names another holder is an earlier attempt's, whose door died before recording the run.
   */
  atDoor?: string;
  /**
   * What the run carries from its door to its settle for those who watch its life (trace context:
   * `traceparent`, `tracestate`): opaque to funduq, within `run-context.ts`'s limits, never changed.
   */
  context?: RunContext;
}

/** A run's opaque context: names to strings, as its door took them (see `Run.context`). */
export type RunContext = Readonly<Record<string, string>>;

/** What a run used, as its record keeps it from its end. */
export interface RunUsage {
  /** Events in the run's log, closing events included. */
  events: number;
  /** The log's bytes as JSON (UTF-8). */
  bytes: number;
  /** As the agent reported it on its terminal event, one entry per provider and model; absent when it reported none. */
  tokens?: TokenUsage[];
  /** From the agent's prices, when its definition has any. */
  cost?: { amount: number; currency: string };
}

/**
 * A request on its way to recording its run, noted before it takes anything (a tenant's place,
 * a thread's place, the asks it answers) and forgotten once its run is recorded or all it took
 * is given back. One still noted long after `at` is a request whose function died in between:
 * the sweep gives back what it took (`sweepArrivals`).
 */
export interface Arrival {
  runId: string;
  tenant: string;
  threadId: string;
  /** When it was noted (ISO). */
  at: string;
  /** The waiting run whose asks it answers, when it is an answer. */
  answers?: string;
}

/**
 * A link run's place among providers, changed only by a compare-and-set on `rev` (one conditional
 * write), so of two frames or timers that race exactly one moves it.
 */
export interface RunLink {
  /** Bumped by every change. */
  rev: number;
  /** Offers made so far; an offer's verdict names its number, so a late one is known as late. */
  offers: number;
  /** The provider the current offer went to, or that holds the run: the run holds one of its places. */
  providerId?: string;
  /** The provider's link the offer went over, or that the holder carries the run on now. */
  connectionId?: string;
  /** The provider accepted the offer: the run is its own until it ends. */
  accepted?: boolean;
  /** The run was handed over beside its thread's running run (an interjection). */
  beside?: boolean;
  /**
   * How the run ends, known before its log is whole (frames handled out of order): its events
   * through `through`, then `terminal` (the agent's own RUN_FINISHED or RUN_ERROR), or, for a
   * cancel the provider receipted, funduq's cancelled end.
   */
  ending?: { through: number; terminal?: AgUiEventRecord; cancelled?: boolean };
  /**
   * The thread-queue message the run holds while its provider runs it (on AWS: the receipt of the
   * dispatcher's receive, kept invisible), so the thread's next run waits with no function held;
   * its settle lets it go.
   */
  hold?: string;
}

/**
 * An agent provider that dials out to funduq: an Ed25519 key an admin registered, the agents it may
 * serve, and how many runs it takes at once across them.
 */
export interface LinkProvider {
  providerId: string;
  /** Ed25519, the base64url of its 32 raw bytes. */
  publicKey: string;
  agents: string[];
  maxConcurrentRuns: number;
  createdAt: string;
}

/** A legal hold (on a thread or a whole tenant): nothing it covers is deleted until it is lifted (`core/retention`). */
export interface LegalHold {
  /** When it was placed (ISO). */
  at: string;
  /** Who placed it (the admin, through which request: its audit record says). */
  by: string;
  reason?: string;
}

export interface Thread {
  threadId: string;
  agentId: string;
  tenant: string;
  createdAt: string;
  /**
   * Places held by the thread's runs not yet settled (queued or running): held on the thread so
   * the queue limit is one conditional write.
   */
  unsettled: number;
  /** The thread's arrival counter. */
  arrivals: number;
  /** The latest run that settled with asks; its record says whether they are still open. */
  waitingRunId?: string;
  /**
   * The head of the actor chain its first run carried (an Ed25519 key, base64url): the thread is
   * bound to it for good. Absent, the thread is open.
   */
  head?: string;
  /** When a run last settled on it (ISO; absent: when it was made): its retention is counted from then (`core/retention`). */
  lastActivityAt?: string;
  /** A legal hold on the thread: its content is kept, whatever its retention, until the hold is lifted. */
  hold?: LegalHold;
}

/**
 * What names a thread. A thread id is the caller's choice (AG-UI honours it), so it is unique only
 * within its tenant: two tenants' "t1" are two threads. A `Run` names its thread this way too.
 */
export type ThreadRef = Pick<Thread, 'tenant' | 'threadId'>;

/**
 * One string for a thread across tenants, for store keys and thread-queue message groups: the
 * tenant with its "%" and "/" escaped (so the first "/" ends it), a "/", then the thread id.
 */
export function threadKey(thread: ThreadRef): string {
  return `${thread.tenant.replaceAll('%', '%25').replaceAll('/', '%2F')}/${thread.threadId}`;
}

/**
 * Ids a caller chooses (AG-UI thread and run ids, A2A message and push config ids) are 1 to 256
 * characters: they become parts of store keys, which DynamoDB holds to 2 KB (1 KB for sort keys).
 */
export const MAX_CALLER_ID_LENGTH = 256;

/** A UTF-16 surrogate with no partner: in `u` mode a pair is one code point, so only a lone one matches. */
const LONE_SURROGATE = /\p{Surrogate}/u;

/**
 * Why a caller's id cannot be taken, or nothing when it can. An id with a lone surrogate has no
 * UTF-8 form: a store keeps it as U+FFFD, so "\uD800" and "\uD801" would be one key.
 */
export function callerIdProblem(name: string, id: string): string | undefined {
  if (id.length < 1 || id.length > MAX_CALLER_ID_LENGTH) return `${name} must be 1 to ${MAX_CALLER_ID_LENGTH} characters`;
  return LONE_SURROGATE.test(id) ? `${name} must be well-formed Unicode (it holds a lone surrogate)` : undefined;
}

/** One AG-UI event of a run, as stored: `seq` is 1, 2, … per run. */
export interface StoredEvent {
  runId: string;
  seq: number;
  event: AgUiEventRecord;
  /**
   * The event as JSON, when the store already wrote or read it so: framing reuses it instead of
   * serialising the event again (the relay's hot path).
   */
  json?: string;
}

/** An AG-UI event as JSON; unknown event types are kept untouched. */
export type AgUiEventRecord = { type: string } & Record<string, unknown>;

/**
 * How an agent is reached: a provider kind and that kind's own fields (`agui-http`: a URL and
 * headers; `lambda`: a function). Each provider reads and checks its own fields; the core only
 * picks the provider by `kind`.
 */
export type AgentProviderSpec = { kind: string } & Record<string, unknown>;

/** What an agent can do, in A2A's `AgentSkill` words (for its agent card and the roster). */
export interface AgentSkill {
  id: string;
  name: string;
  description: string;
  tags: string[];
  examples?: string[];
}

/** What an agent id may be: it is a path segment of every door (`/agui/{agentId}`, `/a2a/{agentId}`). */
export const AGENT_ID = /^[A-Za-z0-9_-]{1,128}$/;
export const AGENT_ID_RULE = 'must be 1 to 128 letters, digits, "_" or "-"';

/** A `disabled` agent takes no new runs; runs already accepted still run (drain, then delete). */
export type AgentStatus = 'enabled' | 'disabled';

/** Prices of an agent, per run, per running second and per 1,000 tokens of a model (or of `*`, any other). */
export interface Prices {
  /** An ISO 4217 code: every amount of these prices is in it. */
  currency: string;
  perRun?: number;
  perRunningSecond?: number;
  /** Per 1,000 tokens, by model name; `*` for a model not named. */
  perThousandTokens?: Record<string, TokenPrices>;
}

export interface TokenPrices {
  input?: number;
  output?: number;
  /** Input tokens read from a cache (part of the input, AG-UI 1.0); without it they cost as input. */
  cachedInput?: number;
  /** Output tokens spent reasoning (part of the output); without it they cost as output. */
  reasoning?: number;
}

export interface Agent {
  id: string;
  description: string;
  provider: AgentProviderSpec;
  takesInterjections: boolean;
  timeoutSeconds: number;
  idleTimeoutSeconds: number;
  skills?: AgentSkill[];
  /** Absent means `enabled`. */
  status?: AgentStatus;
  /** What a run of this agent costs; absent, its runs have no cost. */
  prices?: Prices;
  /** The serving provider's Ed25519 key (agents reached by URL or Lambda): it may write to, answer and cancel on threads bound to another head. */
  publicKey?: string;
}

/** A tenant's spending limit for a UTC day or month: tokens (every token the agents report), a cost, or both. */
export interface Budget {
  period: 'day' | 'month';
  tokens?: number;
  cost?: { amount: number; currency: string };
}

/** What a tenant has spent in one period (`2026-12` or `2026-12-01`), as charged by its runs' ends. */
export interface Spend {
  period: string;
  tokens: number;
  /** In the budget's currency; runs priced in another are not counted here. */
  cost: number;
  /** When a run's end took the spend past the budget, and which run. */
  crossedAt?: string;
  crossedByRunId?: string;
}

/** What the record keeps of a tenant beside its limits' counters: its own budget, and its spend. */
export interface Tenant {
  tenant: string;
  budget?: Budget;
  spend?: Spend;
}

export interface Principal {
  id: string;
  tenant: string;
  /** Which credential it showed (an id derived from it, never the credential): what its audit records name. */
  credentialId?: string;
}

export const ANONYMOUS: Principal = { id: 'anonymous', tenant: 'anonymous' };

/**
 * Where a task's updates are pushed (an A2A push notification config), kept durably per task.
 * The task is a root run id; `deadLetter` records the last notification no try could deliver.
 */
export interface PushConfig {
  taskId: string;
  configId: string;
  tenant: string;
  url: string;
  token?: string;
  authentication?: { scheme: string; credentials?: string };
  createdAt: string;
  deadLetter?: { at: string; error: string; attempts: number; notification: unknown };
}

/**
 * A dispatcher's hold on the run it relays: renewed while it relays, so a run whose dispatcher's
 * environment died (its lease lapsed) is failed `dispatch_lost` by the sweep within the lapse and a
 * sweep's period, not at its message's visibility timeout. An item of its own, a few hundred bytes:
 * a renewal costs one write unit whatever the run's input weighs.
 */
export interface RunLease {
  runId: string;
  /** Epoch ms: the lease has lapsed after this. */
  until: number;
  /**
   * The thread-queue delivery the dispatch came in (an SQS receipt handle), let go when the lease
   * lapses; a door's lease names its holder here instead (`door:<id>`), so its renewals and its end
   * touch only its own.
   */
  receipt?: string;
  /** Held by the door that admitted the run, which relays it itself (its thread was idle): no dispatcher takes it over. */
  door?: true;
}

/**
 * A caller's message id taken within a scope (tenant, agent, context), so that a repeat within
 * the claim's life returns the run the first one started instead of starting another.
 */
export interface MessageClaim {
  key: string;
  runId: string;
  threadId: string;
  /** Epoch seconds: DynamoDB's TTL unit. The claim is void after it even before TTL removes it. */
  expiresAt: number;
}
