import type { RunAgentInput } from '@ag-ui/core';
import { checkActors, type Actors } from './actors.js';
import { matchAnswer, namedAsks, type AskClosing } from './answers.js';
import type { Core } from './deps.js';
import { ok, refuse, StoreUnavailable, type Result } from './errors.js';
import { expireOpenAsks } from './expire-asks.js';
import { addressedRunIdOf } from './interjection.js';
import { callerIdProblem, threadKey, type Agent, type Ask, type DoorName, type Principal, type Run, type RunContext, type Thread } from './model.js';
import { answerContext, runContextProblem } from './run-context.js';
import { itemBytes, MAX_ITEM_BYTES, RUN_END_ROOM_BYTES, storableProblem } from './storable.js';
import { openAsks } from './outcome.js';
import { callerInput, sameInput } from './run-input.js';
import { admitBudget } from './budgets.js';
import { claimAtDoor, relayAtDoor } from './dispatch-at-door.js';
import type { RunHold } from './lease.js';
import type { Reserved } from './ports.js';
import { admitRun, withdraw } from './tenant-limits.js';
import { isExpired, tenantRule } from './retention/expiry.js';
import { isoNow } from './time.js';

export interface StartRunRequest {
  agentId: string;
  input: RunAgentInput;
  door: DoorName;
  principal: Principal;
  /** The request's actor chain, verified and relayed (set by `startLanded`). */
  actors?: Actors;
  /** The door's id of the request (API Gateway's, or the caller's `X-Request-Id`): its run's audit record names it. */
  requestId?: string;
  /** What the run carries from its door to its settle (`Run.context`), within `run-context.ts`'s limits. */
  context?: RunContext;
}

export interface StartedRun {
  run: Run;
  /** True when the runId named a run that already existed with the same input. */
  attached: boolean;
  /** The run held its thread's only place (no run before it waits or runs), and its door took its lease to relay it (`claimAtDoor`). */
  atDoor?: RunHold;
}

/** What the record says of where a run lands, read once by whoever starts it. */
export interface Place {
  agent: Agent;
  /** The caller's thread, absent when this input opens it. */
  thread?: Thread;
  /** The thread's waiting run (the latest run that settled with asks), when the caller read it. */
  waiting?: Run;
}

/**
 * How an input relates to its thread, decided once before anything is written: it answers every
 * open ask of the waiting run, it joins the thread's running run (an interjection), or it is an
 * ordinary run that waits its turn in the thread queue.
 */
export type Landing =
  /** `closed`: the asks were closed for this run already, by an attempt of the same request that died before recording it. */
  | { kind: 'answer'; waiting: Run; closing: AskClosing; closed?: true }
  | { kind: 'interjection'; target: Run }
  | { kind: 'ordinary' };

/**
 * Accepts one AG-UI input: reads where it lands (agent, thread, waiting run, a run of the same id),
 * classifies it and starts it. The thread is the tenant's: a thread id is unique within a tenant.
 */
export async function startRun(core: Core, request: StartRunRequest): Promise<Result<StartedRun>> {
  const started = await startAgUiRun(core, request);
  if (started.ok && started.value.attached) reportRetry(core, started.value.run, request.context);
  return reportRefusal(core, { ...request, threadId: request.input.threadId, runId: request.input.runId }, started);
}

/** Tells the run's observers a request joined a run already recorded (a retry), with the retry's own context. */
export function reportRetry(core: Core, run: Run, context: RunContext | undefined): void {
  core.life.retried?.(run, context ? { context } : {});
}

/** Tells the run's observers of a refused submission (nothing of it is recorded); the result as it was. */
export function reportRefusal<T>(core: Core, request: Pick<StartRunRequest, 'agentId' | 'door' | 'principal' | 'context'> & { threadId?: string; runId?: string }, result: Result<T>): Result<T> {
  if (result.ok) return result;
  core.life.refused?.({
    code: result.code,
    message: result.message,
    agentId: request.agentId,
    tenant: request.principal.tenant,
    door: request.door,
    ...(request.threadId !== undefined ? { threadId: request.threadId } : {}),
    ...(request.runId !== undefined ? { runId: request.runId } : {}),
    ...(request.context ? { context: request.context } : {}),
  });
  return result;
}

async function startAgUiRun(core: Core, request: StartRunRequest): Promise<Result<StartedRun>> {
  const { store } = core;
  const input = callerInput(request.input);
  const badId = callerIdProblem('threadId', input.threadId) ?? callerIdProblem('runId', input.runId);
  if (badId) return refuse('invalid_input', badId);
  const ref = { tenant: request.principal.tenant, threadId: input.threadId };
  // Independent reads, in parallel: they are most of the time to a run's first event.
  const [agent, existing, thread, rule] = await Promise.all([store.agents.get(request.agentId), store.runs.get(input.runId), store.threads.get(ref), tenantRule(core, ref.tenant)]);
  if (!agent) return refuse('agent_not_found', `no agent named "${request.agentId}"`);
  core.recentAgents.remember(agent);
  let waiting = thread?.waitingRunId ? await store.runs.get(thread.waitingRunId) : undefined;
  // A thread retention ended is gone for its readers and on its way out: nothing joins it.
  if (thread && (await isExpired(core, thread, rule, waiting))) {
    return refuse('thread_expired', `thread "${thread.threadId}" was last active ${thread.lastActivityAt ?? thread.createdAt} and its retention has ended: its content is being deleted; send the message on a new thread (another threadId)`);
  }
  if (existing) return attach(existing, request, input);
  if (thread && (input.resume ?? []).length > 0 && openAsks(waiting).length === 0) {
    // An answer sent the moment its interrupt arrived may come before its run is the thread's
    // waiting run (that write follows the run's end, which the caller read): the thread's latest
    // run with open asks is the one it answers.
    waiting = (await latestWaiting(store, thread)) ?? waiting;
  }
  const place: Place = { agent, ...(thread ? { thread } : {}), ...(waiting ? { waiting } : {}) };
  const landing = await classify(core, request.principal, input, place);
  if (!landing.ok) return landing;
  return startLanded(core, { ...request, input }, place, landing.value);
}

/** How many of a thread's latest runs an answer that came early reads again by key. */
const RECENT_RUNS = 3;

/**
 * The thread's latest run that ended with open asks. The thread's runs are listed from an index,
 * which on DynamoDB may lag a write by a moment (a global secondary index is eventually
 * consistent): a run that has just ended can be listed as it was before. So the latest runs are
 * read again by key, where a read is consistent, besides the one the listing names.
 */
async function latestWaiting(store: Core['store'], thread: Thread): Promise<Run | undefined> {
  const listed = await store.runs.listOfThread(thread);
  const named = listed.findLast((run) => run.status === 'completed' && openAsks(run).length > 0);
  const candidates = new Set([...listed.slice(-RECENT_RUNS).reverse(), ...(named ? [named] : [])].map((run) => run.runId));
  for (const runId of candidates) {
    const run = await store.runs.get(runId);
    if (run?.status === 'completed' && openAsks(run).length > 0) return run;
  }
  return undefined;
}

/**
 * Where an input lands, from what the caller read of the record. Refusals that need no write come
 * here, so a refused request leaves nothing behind (not even a thread).
 */
export async function classify(core: Core, principal: Principal, input: RunAgentInput, place: Place): Promise<Result<Landing>> {
  const { agent, thread, waiting } = place;
  if (agent.status === 'disabled') return refuse('agent_disabled', `agent "${agent.id}" is disabled: it takes no new runs`);
  if (thread && thread.agentId !== agent.id) {
    return refuse('thread_agent_mismatch', `thread "${input.threadId}" belongs to agent "${thread.agentId}"`);
  }
  const open = openAsks(waiting);
  const resumes = (input.resume ?? []).length > 0;
  const named = waiting ? namedAsks(input, Object.values(waiting.asks ?? {})) : [];
  if (resumes && waiting && named.length > 0 && named.every((ask) => ask.closedByRunId === input.runId)) {
    // This request came before, closed the asks for its run and died before recording it (the
    // run does not exist, or it would have been attached): it goes on as the answer it was.
    return ok({ kind: 'answer', waiting, closing: {}, closed: true });
  }
  if (resumes && open.length === 0) {
    if (named.some((ask) => ask.state === 'expired')) return refuseExpired(named);
    return refuse('no_open_ask', 'the thread has no open ask for this resume to answer');
  }
  if (waiting && open.length > 0) {
    const lapsed = await refuseLapsed(core, waiting, open, resumes || named.length > 0);
    if (lapsed) return lapsed;
    const match = matchAnswer(input, open, input.runId);
    if (match.kind === 'answer') return ok({ kind: 'answer', waiting, closing: match.closing });
  }
  const addressed = agent.takesInterjections ? addressedRunIdOf(input) : undefined;
  if (addressed !== undefined && thread) {
    // The running run of this thread: another tenant's run of a thread with the same id is not it.
    const target = await core.store.runs.getOf(principal.tenant, addressed);
    if (target && target.threadId === input.threadId && target.status === 'running') {
      return ok({ kind: 'interjection', target });
    }
  }
  // A message addressed to a run that has settled (or to none this agent can join) is an ordinary next run.
  return ok({ kind: 'ordinary' });
}

/**
 * An answer to every open ask of a waiting run, unless one of them has lapsed: then the asks are
 * expired now (their timer may not have fired yet) and the answer is refused.
 */
export async function classifyAnswer(core: Core, place: Place & { waiting: Run }, answeringRunId: string): Promise<Result<Landing>> {
  const { agent, waiting } = place;
  if (agent.status === 'disabled') return refuse('agent_disabled', `agent "${agent.id}" is disabled: it takes no new runs`);
  const open = openAsks(waiting);
  const lapsed = await refuseLapsed(core, waiting, open, true);
  if (lapsed) return lapsed;
  const closing: AskClosing = {};
  for (const ask of open) closing[ask.id] = { state: 'answered', closedByRunId: answeringRunId };
  return ok({ kind: 'answer', waiting, closing });
}

async function refuseLapsed(core: Core, waiting: Run, open: readonly Ask[], answering: boolean) {
  const now = core.clock.now();
  const lapsed = open.filter((ask) => ask.expiresAt !== undefined && Date.parse(ask.expiresAt) <= now);
  if (lapsed.length === 0 || !answering) return undefined;
  await expireOpenAsks(core, waiting);
  return refuseExpired(lapsed);
}

/**
 * The one refusal of an answer that came too late, wherever it is found so (an ask expired
 * already, or lapsed and expired now): it says when, and that nothing waits for the answer.
 */
export function refuseExpired(asks: readonly Ask[], task?: string) {
  const when = asks.map((ask) => ask.expiresAt).find((at) => at !== undefined);
  return refuse('interrupt_expired', `${task ? `task "${task}" waits no more: ` : ''}the interrupt this input answers expired${when ? ` at ${when}` : ''}`);
}

/**
 * Starts a classified input: its tenant's limits first (one conditional write), then the thread
 * (opened on first use), then the landing's own writes. A run admitted and then refused gives its
 * tenant's place back.
 */
export async function startLanded(core: Core, given: StartRunRequest, place: Place, landing: Landing): Promise<Result<StartedRun>> {
  // Who acts for whom, checked before anything is written: a refused chain or proof leaves nothing behind.
  const actors = await checkActors(core, {
    principal: given.principal,
    forwardedProps: given.input.forwardedProps,
    agent: place.agent,
    ...(place.thread ? { thread: place.thread } : {}),
    ...(landing.kind === 'answer' && !landing.closed ? { answers: landing.waiting } : {}),
  });
  if (!actors.ok) return actors;
  const asked: StartRunRequest = actors.value ? { ...given, actors: actors.value } : given;
  // Nothing is written before the run is known to be storable whole.
  const problem = storableProblem(asked.input, 'RunAgentInput') ?? (asked.context !== undefined ? runContextProblem(asked.context) : undefined);
  if (problem) return refuse('invalid_input', problem);
  const request = landing.kind === 'answer' ? answering(asked, landing.waiting) : asked;
  const bytes = runItemBytes(draftRun(core, request, 0, lineageOf(request.input, landing)));
  if (bytes > MAX_RUN_BYTES) {
    return refuse(
      'payload_too_large',
      `the run would take ${Math.ceil(bytes / 1024)} KB of the record, which keeps at most ${MAX_RUN_BYTES / 1024} KB per run (its input whole, room for its end): send a smaller input`,
    );
  }
  const budget = await admitBudget({ ...core, defaultBudget: core.settings.tenantBudget }, request.principal.tenant);
  if (!budget.ok) return budget;
  // Noted before anything is taken, forgotten once the run is recorded or all is given back: a
  // request whose function dies in between is found by the sweep (`sweepArrivals`). A request
  // that threw keeps its note: what it gave back on the way out may not all have gone.
  const runId = request.input.runId;
  const noted = await core.store.arrivals.note({
    runId,
    tenant: request.principal.tenant,
    threadId: request.input.threadId,
    at: isoNow(core),
    ...(landing.kind === 'answer' ? { answers: landing.waiting.runId } : {}),
  });
  if (!noted) {
    throw new StoreUnavailable(`an earlier attempt of run "${runId}" died and what it took is being given back: send the request again`);
  }
  const admission = await admitRun(core, request.principal.tenant, runId);
  if (!admission.ok) {
    await core.store.arrivals.forget(runId);
    return admission;
  }
  const admitted: AdmittedRequest = { ...request, tenantPlace: admission.value.place };
  let started: Result<StartedRun>;
  try {
    started = await land(core, admitted, place, landing);
  } catch (error) {
    // A request that fails after its first write gives back what it took (see `land`).
    await withdraw(core, admission.value);
    throw error;
  }
  if (!started.ok) await withdraw(core, admission.value);
  // Not waited for: the caller's stream starts at once (a note left behind is the sweep's, which
  // finds its run recorded and only deletes it).
  void core.store.arrivals.forget(runId).catch(() => undefined);
  if (started.ok && started.value.atDoor) relayAtDoor(core, started.value.run, started.value.atDoor);
  return started;
}

/** An answer's request, its context naming the asking run's trace (`answerContext`). */
function answering(request: StartRunRequest, waiting: Run): StartRunRequest {
  const { context: _given, ...rest } = request;
  const context = answerContext(request.context, waiting);
  return context ? { ...rest, context } : rest;
}

/** The record keeps a run's item within DynamoDB's 400 KB, with room left for its end. */
const MAX_RUN_BYTES = MAX_ITEM_BYTES - RUN_END_ROOM_BYTES;

type Lineage = { parentRunId?: string; rootRunId: string; addressedRunId?: string };

function lineageOf(input: RunAgentInput, landing: Landing): Lineage {
  switch (landing.kind) {
    case 'answer':
      return { parentRunId: landing.waiting.runId, rootRunId: landing.waiting.rootRunId };
    case 'interjection':
      return { rootRunId: input.runId, addressedRunId: landing.target.runId };
    case 'ordinary':
      return { rootRunId: input.runId };
  }
}

/** A run's item as the record will hold it: the run, its keys and its copies for the indexes. */
function runItemBytes(run: Run): number {
  return itemBytes({ ...run, pk: `run#${run.runId}`, sk: 'run', threadKey: threadKey(run), tenantKey: run.tenant });
}

function draftRun(core: Core, request: StartRunRequest & { tenantPlace?: boolean }, arrival: number, lineage: Lineage): Run {
  const { input } = request;
  const run: Run = {
    runId: input.runId,
    threadId: input.threadId,
    agentId: request.agentId,
    tenant: request.principal.tenant,
    principal: request.principal.id,
    door: request.door,
    status: 'queued',
    arrival,
    rootRunId: lineage.rootRunId,
    input,
    createdAt: isoNow(core),
  };
  if (lineage.parentRunId !== undefined) run.parentRunId = lineage.parentRunId;
  if (lineage.addressedRunId !== undefined) run.addressedRunId = lineage.addressedRunId;
  if (request.tenantPlace) run.tenantPlace = true;
  if (request.actors) {
    run.actorChain = request.actors.relayed;
    run.actors = { head: request.actors.head, presenter: request.actors.presenter };
  }
  if (request.context) run.context = request.context;
  if (request.requestId) run.requestId = request.requestId;
  if (request.principal.credentialId) run.credentialId = request.principal.credentialId;
  return run;
}

/** A request past its tenant's limits; its run records whether it holds one of the tenant's places. */
interface AdmittedRequest extends StartRunRequest {
  tenantPlace: boolean;
}

/**
 * The landing's writes: the thread opened (or a place on it reserved), the asks it answers closed,
 * the run recorded and queued. A write that throws (the store failing) undoes what came before it:
 * the opened thread is abandoned, the place given back, the closed asks opened again, so a request
 * that failed leaves nothing taken.
 */
async function land(core: Core, request: AdmittedRequest, place: Place, landing: Landing): Promise<Result<StartedRun>> {
  const { input } = request;
  const undo: (() => Promise<unknown>)[] = [];
  try {
    const thread: Result<Thread & { opened?: true }> = place.thread ? ok(place.thread) : await openThread(core, request);
    if (!thread.ok) return thread;
    // A thread this request created holds its first run's place already: nothing waits or runs on it.
    if (thread.value.opened) {
      undo.push(() => core.store.threads.abandon(thread.value, input.runId));
      return await accept(core, request, place.agent, { arrival: thread.value.arrivals, alone: true }, { rootRunId: input.runId });
    }
    switch (landing.kind) {
      case 'answer': {
        if (!landing.closed) {
          // The one conditional write that makes exactly one of concurrent answers the answer.
          const closed = await core.ledger.closeAsks(landing.waiting.runId, landing.closing);
          if (!closed) return refuseAnswer(core, landing.waiting);
          undo.push(() => core.ledger.reopenAsks(landing.waiting.runId, landing.closing));
          core.life.answered?.(closed, { runId: input.runId, askIds: Object.keys(landing.closing) });
        }
        const reserved = await core.store.threads.reserveArrival(landing.waiting, input.runId, undefined);
        undo.push(() => core.store.threads.releasePlace(landing.waiting, input.runId));
        return await accept(core, request, place.agent, reserved ?? { arrival: 0, alone: false }, lineageOf(input, landing));
      }
      case 'interjection': {
        // Dispatched at once beside the running run it names: it takes a place but does not wait for one.
        const reserved = await core.store.threads.reserveArrival(landing.target, input.runId, undefined);
        undo.push(() => core.store.threads.releasePlace(landing.target, input.runId));
        // Never alone: it joins the run it names, outside the thread's order.
        return await accept(core, request, place.agent, { arrival: reserved?.arrival ?? 0, alone: false }, lineageOf(input, landing));
      }
      case 'ordinary': {
        // Places count runs not yet settled, so a thread holds one running run plus `threadQueueLimit` queued.
        const limit = core.settings.threadQueueLimit;
        const reserved = await core.store.threads.reserveArrival(thread.value, input.runId, limit + 1);
        if (reserved === undefined) {
          return refuse('thread_queue_full', `thread "${thread.value.threadId}" already has ${limit} runs waiting`);
        }
        undo.push(() => core.store.threads.releasePlace(thread.value, input.runId));
        return await accept(core, request, place.agent, reserved, lineageOf(input, landing));
      }
    }
  } catch (error) {
    // A run that was recorded holds what it took (it may only have missed its queue message,
    // which the record says it needs); one that was not gives all of it back.
    const recorded = await core.store.runs.get(input.runId).catch(() => undefined);
    if (!recorded) for (const step of undo.reverse()) await step().catch(() => undefined);
    throw error;
  }
}

function attach(existing: Run, request: StartRunRequest, input: RunAgentInput): Result<StartedRun> {
  if (existing.agentId !== request.agentId || existing.tenant !== request.principal.tenant) {
    return refuse('run_id_conflict', `runId "${input.runId}" is taken`);
  }
  if (existing.threadId !== input.threadId || !sameInput(existing.input, input)) {
    return refuse('run_id_conflict', `runId "${input.runId}" was already used with a different input`);
  }
  return ok({ run: existing, attached: true });
}

/**
 * A thread the tenant does not have yet: created on first use, bound to the agent, and holding
 * the place and arrival number of the run that opened it (one write instead of two on the way
 * to a new conversation's first event). `opened` says this request created it.
 */
async function openThread(core: Core, request: StartRunRequest): Promise<Result<Thread & { opened?: true }>> {
  const threadId = request.input.threadId;
  const fresh: Thread = {
    threadId,
    agentId: request.agentId,
    tenant: request.principal.tenant,
    createdAt: isoNow(core),
    unsettled: 1,
    arrivals: 1,
  };
  // A thread born with a verified chain is bound to its head for good; one born without stays open.
  if (request.actors) fresh.head = request.actors.head;
  if (await core.store.threads.create(fresh, request.input.runId)) return ok({ ...fresh, opened: true });
  // Two first messages may race to create the thread; the loser reads the winner's and queues behind it.
  const thread = await core.store.threads.get(fresh);
  if (!thread) return refuse('thread_not_found', `thread "${threadId}" could not be opened`);
  if (thread.agentId !== request.agentId) {
    return refuse('thread_agent_mismatch', `thread "${threadId}" belongs to agent "${thread.agentId}"`);
  }
  if (thread.head !== undefined && thread.head !== request.actors?.head) {
    return refuse('thread_membership_required', `thread "${threadId}" was opened meanwhile, bound to the head ${thread.head}: present a chain whose hop 0 is signed by it`);
  }
  return ok(thread);
}

/** An answer that lost: the asks were answered by another, or expired, meanwhile. */
async function refuseAnswer(core: Core, waiting: Run): Promise<Result<StartedRun>> {
  const now = await core.store.runs.get(waiting.runId);
  const expired = Object.values(now?.asks ?? {}).filter((ask) => ask.state === 'expired');
  if (expired.length > 0) return refuseExpired(expired);
  return refuse('no_open_ask', 'the asks this input answers were already answered or closed');
}

async function accept(core: Core, request: AdmittedRequest, agent: Agent, reserved: Reserved, lineage: Lineage): Promise<Result<StartedRun>> {
  const { input } = request;
  const drafted = draftRun(core, request, reserved.arrival, lineage);
  // Taken before the run is queued, so no dispatcher that receives its message runs it beside the door.
  const atDoor = reserved.alone ? await claimAtDoor(core, input.runId, agent) : undefined;
  const run: Run = atDoor?.receipt !== undefined ? { ...drafted, atDoor: atDoor.receipt } : drafted;
  let queued: boolean;
  try {
    queued = await core.ledger.queue(run);
  } catch (error) {
    await atDoor?.end().catch(() => undefined);
    throw error;
  }
  if (!queued) {
    await atDoor?.end();
    // The same runId raced in and holds the place this request took (a place is its run id's):
    // nothing to give back; answer as a repeat would.
    const existing = await core.store.runs.get(input.runId);
    return existing ? attach(existing, request, input) : refuse('run_id_conflict', `runId "${input.runId}" is taken`);
  }
  return ok({ run, attached: false, ...(atDoor ? { atDoor } : {}) });
}
