import type { Agent, Arrival, AskState, Budget, LegalHold, LinkProvider, MessageClaim, PushConfig, Run, RunLease, RunLink, RunStatus, Spend, StoredEvent, Tenant, Thread, ThreadRef } from '../model.js';
import type { AuditQuery, AuditRecord } from '../audit/record.js';
import type { UsageRecord } from '../usage.js';
import type { TenantRetention } from '../retention/policy.js';

/**
 * The record: threads, runs (with their asks), agents and run_events, as parts reached by name
 * (`store.runs.get(runId)`). Every status change is a single-item conditional write, so of two
 * writers exactly one wins and the loser changes nothing. The rules the parts keep (what a patch
 * may change, when a tenant is admitted, …) are stated once in `core/record/rules.ts`, and
 * `core/record/reference.ts` is the model every store is held to. A new part is an interface here
 * and a module in each store.
 */
export interface RunStore {
  readonly threads: Threads;
  readonly arrivals: ArrivalNotes;
  readonly tenants: TenantCounters;
  readonly usage: UsageRecords;
  readonly runs: RunRecords;
  readonly tasks: TaskIndex;
  readonly events: EventLog;
  readonly agents: AgentRegistry;
  readonly pushConfigs: PushConfigs;
  readonly claims: MessageClaims;
  readonly providers: ProviderRegistry;
  readonly principals: PrincipalKeys;
  readonly leases: RunLeases;
  readonly audit: AuditLog;
  readonly retention: RetentionRecords;
}

/** The parts' names, every one (the compiler checks), for what wraps every call of a store (turns on one machine, tests' counts). */
export const RECORD_PARTS = Object.keys({
  threads: true,
  arrivals: true,
  tenants: true,
  usage: true,
  runs: true,
  tasks: true,
  events: true,
  agents: true,
  pushConfigs: true,
  claims: true,
  providers: true,
  principals: true,
  leases: true,
  audit: true,
  retention: true,
} satisfies Record<keyof RunStore, true>) as (keyof RunStore)[];

/** The store with each of its parts as `wrap` makes it; anything else of the store stays as it is. */
export function mapParts<S extends RunStore>(store: S, wrap: <P extends keyof RunStore>(name: P, part: RunStore[P]) => RunStore[P]): S {
  const parts: Partial<Record<keyof RunStore, unknown>> = {};
  for (const name of RECORD_PARTS) parts[name] = wrap(name, store[name]);
  return Object.assign(Object.create(store) as S, parts);
}

/** A segment of the audit log as stored: its compact JWS (whose payload is `AuditSegment`), its hash, and what the sealer and the export read of it. */
export interface SealedSegment {
  seq: number;
  jws: string;
  /** SHA-256 (hex) of `jws`: what the next segment names. */
  hash: string;
  ids: string[];
  from: string;
  to: string;
}

/**
 * The audit log (core/audit): records written once and never changed, and the segments that seal
 * them. One sealer at a time extends the chain: a segment is written only if its seq is new.
 */
export interface AuditLog {
  /** Writes a record (its id is new: a repeat of the same id changes nothing). */
  append(record: AuditRecord): Promise<void>;
  /** Records matching the query, oldest first, at most `limit`; `cursor` continues a listing. */
  list(query: AuditQuery): Promise<{ records: AuditRecord[]; cursor?: string }>;
  /**
   * The records no segment sealed yet, oldest first, at most `limit`, of those written in
   * [`since`, `until`) (ISO): a store whose listings are read from an index (DynamoDB) need not read the
   * sealed ones of a whole day each time.
   */
  unsealed(limit: number, since: string, until: string): Promise<AuditRecord[]>;
  /** The records of these ids the log holds, in any order. */
  get(ids: readonly string[]): Promise<AuditRecord[]>;
  /** The chain's last segment; may lag one behind where the store lists from an index (a sealer that finds its seq taken reads that one by `segment`). */
  lastSegment(): Promise<SealedSegment | undefined>;
  segment(seq: number): Promise<SealedSegment | undefined>;
  /** Segments from `fromSeq` on, in order, at most `limit`. */
  segments(fromSeq: number, limit: number): Promise<SealedSegment[]>;
  /** Writes the segment unless one with its seq exists; false when one did. */
  putSegment(segment: SealedSegment): Promise<boolean>;
  /** Marks the records sealed by segment `seq` (a repeat, or an id already marked, changes nothing). */
  markSealed(seq: number, ids: readonly string[]): Promise<void>;
  /** Retention: deletes the records of these ids (an id the log does not hold is nothing). */
  delete(ids: readonly string[]): Promise<void>;
  /** Retention: deletes segment `seq`, once its records are gone; the chain then starts at the next. */
  deleteSegment(seq: number): Promise<void>;
}

/**
 * Dispatchers' leases on the runs they relay (`RunLease`). The lease is the fence between a
 * dispatcher and a sweep: a renewal takes only a lease still held, and a sweep ends a lapsed
 * lease (only while it is as listed) before it fails the run, so of the two exactly one goes on.
 */
/** A place taken on a thread: its arrival number, and whether it is the thread's only place (no run before it waits or runs). */
export interface Reserved {
  arrival: number;
  /** False for a holder that held its place already (a repeat after a crash): whether it was alone then is not known. */
  alone: boolean;
}

/** What a lease must still be for a write that names it to apply. */
export interface LeaseAs {
  until?: number;
  receipt?: string;
}

export interface RunLeases {
  /**
   * Takes the run's lease: a dispatcher's takes over the lease of the one before (a redelivery's),
   * but never a door's (`door`: the door that admitted the run relays it); a door's is taken only
   * when no lease is held. False when nothing was taken.
   */
  take(lease: RunLease): Promise<boolean>;
  /**
   * Moves the lease's end to `until`, only while the lease is held, and with `receipt`, held by
   * that delivery's dispatch (not taken over by a later one); false when it was ended or is another's.
   */
  renew(runId: string, until: number, receipt?: string): Promise<boolean>;
  /** The run's lease as it is now (a consistent read), or undefined when none is held. */
  get(runId: string): Promise<RunLease | undefined>;
  /** Leases that end before `before` (epoch ms), the earliest first, at most `limit`. */
  lapsed(before: number, limit: number): Promise<RunLease[]>;
  /**
   * Ends the run's lease, only while it is as `as` says: its end `until` (not renewed since it was
   * listed), its delivery `receipt` (not taken over by a later one). False when nothing was ended.
   */
  end(runId: string, as?: LeaseAs): Promise<boolean>;
}

/** A thread is named by its tenant and its id (see `ThreadRef`); a `Run` names its own thread. */
export interface Threads {
  get(thread: ThreadRef): Promise<Thread | undefined>;
  /** Creates the thread unless the tenant has one with that id, its one place held by `holder` (its first run); false when it did. */
  create(thread: Thread, holder: string): Promise<boolean>;
  /**
   * Takes the thread's next arrival number and one of its places (a place is held by each run
   * not yet settled: queued or running). With a `limit`, only while fewer than `limit` places are
   * held; undefined when the thread is full (nothing written). A place is held by its run's id
   * (`holder`): a holder that holds one already takes a new number and no second place.
   */
  reserveArrival(thread: ThreadRef, holder: string, limit: number | undefined): Promise<Reserved | undefined>;
  /**
   * Gives back the place `holder` holds, if it holds one: a repeat gives nothing back twice. With
   * `at` (a run settled), the thread's last activity moves to then (retention counts from it).
   */
  releasePlace(thread: ThreadRef, holder: string, at?: string): Promise<void>;
  /** The runs holding the thread's places (a repair gives back those of runs settled or never recorded). */
  placeHolders(thread: ThreadRef): Promise<string[]>;
  /**
   * The request that opened the thread failed before its run was recorded: the thread goes, if
   * nothing else arrived on it since (its only arrival is the opener's, and `holder` holds its
   * place); else the place `holder` holds, if any, goes back.
   */
  abandon(thread: ThreadRef, holder: string): Promise<void>;
  /** Recovery: the thread's places are held by these runs (what the run records say), and by no others. */
  setPlaces(thread: ThreadRef, holders: readonly string[]): Promise<void>;
  setWaitingRun(thread: ThreadRef, runId: string): Promise<void>;
  /**
   * Threads by last activity, latest first (what an operator looks at), filtered; a page at a time.
   * `active`: a run of it holds a place (queued or running); `idle`: none does.
   */
  list(query: ThreadListQuery): Promise<{ threads: Thread[]; cursor?: string }>;
}

export interface ThreadListQuery {
  tenant?: string;
  agentId?: string;
  state?: 'active' | 'idle';
  limit: number;
  cursor?: string;
}

/** What a thread's deletion took. */
export interface PurgedContent {
  runs: number;
  events: number;
}

/**
 * Retention (core/retention): each tenant's own policy and legal hold, threads' holds, and the
 * deletion of what retention ended. A thread's last activity (`Thread.lastActivityAt`) is written
 * by the write that gives back a settled run's place (`Threads.releasePlace`, given its time): a
 * run that arrived holds a place until it settles, and a thread with a place held never expires.
 */
export interface RetentionRecords {
  get(tenant: string): Promise<TenantRetention | undefined>;
  /**
   * Sets (or, undefined, removes) one field of the tenant's entry, `policy` or `hold`, leaving the
   * other as it is: one write each, so an admin's policy and a hold placed at once both stand.
   */
  set<F extends 'policy' | 'hold'>(tenant: string, field: F, value: TenantRetention[F]): Promise<void>;
  /** Every tenant with a policy or a hold of its own. */
  list(): Promise<TenantRetention[]>;
  /** Places (or, undefined, lifts) a thread's hold: the thread as written, undefined when there is no such thread. */
  holdThread(thread: ThreadRef, hold: LegalHold | undefined): Promise<Thread | undefined>;
  /** Threads last active before `before` (ISO), oldest first, at most `limit`; `cursor` continues a listing. */
  idleThreads(before: string, limit: number, cursor?: string): Promise<{ threads: Thread[]; cursor?: string }>;
  /**
   * Deletes a thread and what it holds: its runs (their inputs, task entries, push configs) and
   * their events, while the thread is as `thread` says (no run arrived since, none holds a place,
   * no hold). `audit` makes the deletion's record from what goes: written in the deletion's
   * transaction where the store has one, else before the first delete, once however often a
   * deletion cut short is done again (a repeat finishes what the first left). Undefined, and
   * nothing deleted, when the thread changed.
   */
  purgeThread(thread: Thread, audit: (content: PurgedContent) => AuditRecord): Promise<PurgedContent | undefined>;
}

/** Requests noted before they take anything, so a sweep can give back what a dead one took (`Arrival`). */
export interface ArrivalNotes {
  /**
   * Notes a request before it takes anything (a second note of the same run id, its request again,
   * replaces the first); false, and nothing written, while a sweep holds the first (`claim`).
   */
  note(arrival: Arrival): Promise<boolean>;
  /**
   * A sweep takes a note it listed, only while it is as listed (the same `at`: no repeat of its
   * request noted since), so it gives back what that request took with no repeat of it under way.
   */
  claim(arrival: Arrival): Promise<boolean>;
  /** The request's run is recorded, or all it took was given back. */
  forget(runId: string): Promise<void>;
  /** Arrivals noted before `before` (ISO) and not forgotten, oldest first, at most `limit` (a repeat may list some again). */
  list(before: string, limit: number): Promise<Arrival[]>;
}

/** A tenant's counters against its limits (runs per window, places), its budget and its spend. */
export interface TenantCounters {
  /**
   * Admits one run of a tenant against its limits, in one conditional write on the tenant's item:
   * a count per `window` (a clock minute) below `runsPerWindow`, and places (one per unsettled run)
   * below `places`. A limit left out is not applied (nor counted). Nothing is written when refused.
   * A place is held by its run's id: a holder that holds one already is admitted on it.
   */
  admit(tenant: string, holder: string, limits: TenantLimits): Promise<TenantAdmission>;
  /** Gives back the tenant's place `holder` holds (its run settled, or was refused after admission), if it holds one. */
  releasePlace(tenant: string, holder: string): Promise<void>;
  /** Recovery: every tenant's places are held by the runs given, none for a tenant not named. */
  setPlaces(places: ReadonlyMap<string, readonly string[]>): Promise<void>;
  /** The tenant's own budget and its spend, if the record has either. */
  get(tenant: string): Promise<Tenant | undefined>;
  /** Sets (or, with undefined, removes) the tenant's own budget; its spend is set to `spend`. */
  putBudget(tenant: string, budget: Budget | undefined, spend: Spend): Promise<void>;
  /**
   * Adds a run's tokens and cost to the tenant's spend of `charge.period`, starting the spend
   * again when the stored one is of an earlier period (one conditional write per round). Returns
   * the spend as written, or undefined when the stored spend is of a later period (the charge's
   * period is over: nothing is written).
   */
  charge(tenant: string, charge: Pick<Spend, 'period' | 'tokens' | 'cost'>): Promise<Spend | undefined>;
  /** Records that a run took the spend of `period` past the budget, unless a run did already. */
  markBudgetCrossed(tenant: string, period: string, runId: string, at: string): Promise<void>;
}

export interface UsageRecords {
  /** Writes a settled run's usage record unless its run id has one; false when it had. */
  put(record: UsageRecord): Promise<boolean>;
  /**
   * Usage records that ended in [from, to) (ISO times), at most `limit`, of one tenant (oldest
   * first) or, without one, of every tenant (month by month); `cursor` continues a listing.
   */
  list(query: UsageQuery): Promise<{ records: UsageRecord[]; cursor?: string }>;
  /** Retention: deletes the usage records of these runs (one with none is nothing). */
  delete(runIds: readonly string[]): Promise<void>;
}

/** Changes of a run's asks: each named ask's new state, and the run that closed it. */
export type AskChanges = Record<string, { state: Exclude<AskState, 'open'>; closedByRunId?: string }>;

/**
 * Runs, with their asks. Each write of a run also writes its task's entry in the task index, as
 * the store's `taskEntry` (given at its construction) computes it from the run as written: in the
 * same transaction where the store has them, else right after (see `TaskIndex.reindex`).
 */
export interface RunRecords {
  /** Creates the run unless one with that id exists; false when it did. */
  create(run: Run): Promise<boolean>;
  get(runId: string): Promise<Run | undefined>;
  /**
   * The run, if it is the tenant's. Another tenant's run is left unread (only its key is looked
   * at), so naming one costs what naming an unknown id costs: its existence does not show.
   */
  getOf(tenant: string, runId: string): Promise<Run | undefined>;
  /** The thread's runs in arrival order. */
  listOfThread(thread: ThreadRef): Promise<Run[]>;
  /** Every run in a status (recovery on one machine; a scan). */
  listByStatus(status: RunStatus): Promise<Run[]>;
  /** The same, a page at a time (recovery, whose runs may be many and large): at most `limit` runs, and a cursor while more may follow. */
  pageByStatus(status: RunStatus, page: { limit: number; cursor?: string }): Promise<{ runs: Run[]; cursor?: string }>;
  /**
   * Applies `patch` (which sets `status`) only while the run's status is one of `from`; a patch of
   * a field that names or places the run (`RUN_IDENTITY`) is a TypeError. Returns the run as
   * written, or undefined when the condition failed.
   */
  transition(runId: string, from: readonly RunStatus[], patch: Partial<Run> & { status: RunStatus }): Promise<Run | undefined>;
  /**
   * Moves the named asks from `open` to their new states in one conditional write: every named
   * ask must still be `open`. Returns the run as written, or undefined when any was not open.
   */
  closeAsks(runId: string, changes: AskChanges): Promise<Run | undefined>;
  /**
   * Opens the named asks again, in one conditional write, only while each is still closed by the
   * run named in `changes` (an answer whose run could not be recorded), and counts the opening
   * (`asksReopened`). Undefined when any was not.
   */
  reopenAsks(runId: string, changes: AskChanges): Promise<Run | undefined>;
  /** The settled run's closing events are all in its log: its record need not hold them any more. */
  forgetClosingEvents(runId: string): Promise<void>;
  /**
   * Sets a link run's `link` only while `linkMayMove` says so (the run is running or cancelling and
   * its link's `rev` is `expectedRev`; undefined: it has none yet). The run as written, or
   * undefined when either failed.
   */
  updateLink(runId: string, expectedRev: number | undefined, link: RunLink): Promise<Run | undefined>;
}

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

/**
 * A task's entry in the index (A2A ListTasks), as one run of its lineage says it: core computes it
 * (`taskEntryOf`, from the tail run's record) and the store keeps the latest, so a listing
 * filtered by state reads the index, never the tasks' records.
 */
export type TaskEntry = {
  /** The task: its root run's id. */
  taskId: string;
  tenant: string;
  agentId: string;
  threadId: string;
  /** The run's arrival on its thread: an entry is moved only by the run that arrived latest of its lineage (the tail). */
  tailArrival: number;
  /** The task's A2A state number. */
  state: number;
  /** When that state was set (ISO). */
  stateAt: string;
} & (
  /** The root's entry makes the task's, with the root's creation time (the listing's order). */
  | { root: true; createdAt: string }
  /** A later run of the lineage only moves it. */
  | { root: false }
);

/** What a store is given to compute beside each run it writes. */
export interface RecordProjections {
  taskEntry(run: Run): TaskEntry;
  /**
   * The audit records a run's write implies (`core/audit/acts.ts`: its submission when created, the
   * cancel a patch records), written with the run: in the same transaction where the store has
   * one, else right after (a repair of the run's change writes them again; their ids make a second
   * write nothing).
   */
  auditOf?(run: Run, change: 'created' | Partial<Run>): AuditRecord[];
}

/** The A2A tasks (root runs) as the index lists them; its entries are written with the runs (see `RunRecords`). */
export interface TaskIndex {
  /**
   * A page of a tenant's A2A tasks (root runs) at one agent, newest first, from the task index
   * (each task's state and its time as its tail run's last write left them), narrowed by context,
   * state and state time. At most `limit` roots (a positive integer, see `checkPageLimit`), and a
   * cursor while more may follow: a page may hold fewer than asked, even none, and go on. A
   * cursor the store did not issue for this tenant is a RangeError.
   */
  list(tenant: string, query: TaskIndexQuery): Promise<{ runs: Run[]; cursor?: string }>;
  /**
   * Writes `entry` (a run's, as `taskEntry` computes it) unless a run of its lineage that arrived
   * later wrote the task's: again, for a writer that died between a run's write and its entry's (a
   * store that writes the two in one transaction has nothing to do).
   */
  reindex(entry: TaskEntry): Promise<void>;
}

export interface EventLog {
  /**
   * Stores a run's events, numbered by its holder (the dispatcher that marked it running, or the
   * cancel that ended it queued): their seqs are new for the run. Events of one call may become
   * visible in any order; readers wait out a gap until it fills.
   */
  append(events: StoredEvent[]): Promise<void>;
  /**
   * Stores each event at its seq unless that seq of the run is stored already: the first write of
   * a seq wins. For events numbered by a producer elsewhere (a provider that dials out, whose
   * frames may arrive twice and in any order) and for closing events written by someone other
   * than the run's holder. Returns the seqs that were taken (not written).
   */
  appendNew(events: StoredEvent[]): Promise<number[]>;
  /** Events with seq > afterSeq, in order, at most `limit`. */
  read(runId: string, afterSeq: number, limit?: number): Promise<StoredEvent[]>;
  lastSeq(runId: string): Promise<number>;
}

export interface AgentRegistry {
  put(agent: Agent): Promise<void>;
  get(agentId: string): Promise<Agent | undefined>;
  list(): Promise<Agent[]>;
  delete(agentId: string): Promise<void>;
}

export interface PushConfigs {
  /** Creates or replaces a task's push config (same task and config id). */
  put(config: PushConfig): Promise<void>;
  get(taskId: string, configId: string): Promise<PushConfig | undefined>;
  list(taskId: string): Promise<PushConfig[]>;
  /** False when there was no such config. */
  delete(taskId: string, configId: string): Promise<boolean>;
  /** Records on an existing config the notification that could not be delivered; a deleted config stays deleted. */
  recordFailure(taskId: string, configId: string, deadLetter: NonNullable<PushConfig['deadLetter']>): Promise<void>;
}

export interface MessageClaims {
  /**
   * Takes `claim.key` for `claim` unless a claim on that key is still live at `nowSeconds` (one
   * conditional write; an expired claim is free, see `claimIsFree`). Returns the live claim:
   * `claim` itself when it was taken.
   */
  take(claim: MessageClaim, nowSeconds: number): Promise<MessageClaim>;
  /** Gives the key back, only while it is still held by `claim.runId`. */
  release(claim: MessageClaim): Promise<void>;
}

/** Link providers' registrations, and the places their runs hold. */
export interface ProviderRegistry {
  /**
   * Creates or replaces a link provider's registration, keeping its first `createdAt` and the
   * places its runs hold (`registrationOf`); true when it was new.
   */
  put(provider: LinkProvider): Promise<boolean>;
  /** The registration, with `places`: how many of its places runs hold now. */
  get(providerId: string): Promise<(LinkProvider & { places: number }) | undefined>;
  list(): Promise<(LinkProvider & { places: number })[]>;
  /** False when there was none. */
  delete(providerId: string): Promise<boolean>;
  /**
   * Takes one of a provider's places (a run on offer to it or held by it holds one, across all its
   * agents) only while fewer than `limit` are held: one conditional write. False when full (or gone).
   */
  takePlace(providerId: string, limit: number): Promise<boolean>;
  /** Gives back one of a provider's places; never below zero. */
  releasePlace(providerId: string): Promise<void>;
  /** Recovery on one machine: no run is on offer or held after a restart, so every provider holds none. */
  resetPlaces(): Promise<void>;
}

/**
 * The Ed25519 keys an admin registered for a principal of a tenant (base64url of 32 bytes): an actor
 * chain it presents must end with a hop signed by one of them.
 */
export interface PrincipalKeys {
  get(tenant: string, principal: string): Promise<string[] | undefined>;
  /** Creates or replaces the principal's keys; true when it had none. */
  put(tenant: string, principal: string, publicKeys: readonly string[]): Promise<boolean>;
  /** False when there were none. */
  delete(tenant: string, principal: string): Promise<boolean>;
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
