import type { RunAgentInput } from '@ag-ui/core';
import { matchAnswer, namedAsks, type AskClosing } from './answers.js';
import { isoNow, type CoreDeps } from './deps.js';
import { ok, refuse, type Result } from './errors.js';
import { callerIdProblem, threadKey, type Agent, type DoorName, type Principal, type Run, type Thread } from './model.js';
import { openAsks } from './outcome.js';
import { callerInput, sameInput } from './run-input.js';
import { expireOpenAsks } from './expire-asks.js';
import { addressedRunIdOf } from './interjection.js';
import { admitRun, withdraw } from './tenant-limits.js';

export interface StartRunRequest {
  agentId: string;
  input: RunAgentInput;
  door: DoorName;
  principal: Principal;
}

export interface StartedRun {
  run: Run;
  /** True when the runId named a run that already existed with the same input. */
  attached: boolean;
}

/**
 * Accepts one input for a thread: either it answers every open ask of the thread's waiting run
 * (a new run whose parent is the asking run, never refused by the queue limit), or it is an
 * ordinary run that waits its turn in the thread queue. The thread is the tenant's: a thread id is
 * unique within a tenant. Its tenant's limits are checked after the refusals that write nothing and
 * before the first write; a run admitted and then refused gives its tenant's place back.
 */
export async function startRun(deps: CoreDeps, request: StartRunRequest): Promise<Result<StartedRun>> {
  const { store } = deps;
  const input = callerInput(request.input);
  const badId = callerIdProblem('threadId', input.threadId) ?? callerIdProblem('runId', input.runId);
  if (badId) return refuse('invalid_input', badId);
  const ref = { tenant: request.principal.tenant, threadId: input.threadId };
  // Three independent reads, in parallel: they are most of the time to a run's first event.
  const [agent, existing, thread] = await Promise.all([
    store.getAgent(request.agentId),
    store.getRun(input.runId),
    store.getThread(ref),
  ]);
  if (!agent) return refuse('agent_not_found', `no agent named "${request.agentId}"`);
  deps.recentAgents?.remember(agent);
  if (existing) return attach(existing, request, input);
  if (agent.status === 'disabled') return refuse('agent_disabled', `agent "${request.agentId}" is disabled: it takes no new runs`);

  if (thread && thread.agentId !== request.agentId) {
    return refuse('thread_agent_mismatch', `thread "${input.threadId}" belongs to agent "${thread.agentId}"`);
  }
  const waiting = thread?.waitingRunId ? await store.getRun(thread.waitingRunId) : undefined;
  const open = openAsks(waiting);
  const named = waiting ? namedAsks(input, Object.values(waiting.asks ?? {})) : [];
  const resumes = (input.resume ?? []).length > 0;

  // Refusals that need no write come first, so a refused request leaves nothing behind (not even a thread).
  if (resumes && open.length === 0) {
    if (named.some((ask) => ask.state === 'expired')) {
      return refuse('interrupt_expired', 'the interrupt this input answers has expired');
    }
    return refuse('no_open_ask', 'the thread has no open ask for this resume to answer');
  }
  if (waiting && open.length > 0) {
    const now = deps.clock.now();
    const lapsed = open.filter((ask) => ask.expiresAt !== undefined && Date.parse(ask.expiresAt) <= now);
    if (lapsed.length > 0 && (resumes || named.length > 0)) {
      await expireOpenAsks(deps, waiting);
      return refuse('interrupt_expired', `the interrupt expired at ${lapsed[0].expiresAt}`);
    }
  }

  const admission = await admitRun(deps, request.principal.tenant);
  if (!admission.ok) return admission;
  const admitted: AdmittedRequest = { ...request, tenantPlace: admission.value.place };
  const started = await startAdmitted(deps, admitted, input, agent, thread, waiting);
  if (!started.ok || started.value.attached) await withdraw(deps, admission.value);
  return started;
}

/** A request past its tenant's limits; its run records whether it holds one of the tenant's places. */
interface AdmittedRequest extends StartRunRequest {
  tenantPlace: boolean;
}

async function startAdmitted(
  deps: CoreDeps,
  request: AdmittedRequest,
  input: RunAgentInput,
  agent: Agent,
  found: Thread | undefined,
  waiting: Run | undefined,
): Promise<Result<StartedRun>> {
  const { store } = deps;
  const thread: Result<Thread & { opened?: true }> = found ? ok(found) : await openThread(deps, request, input.threadId);
  if (!thread.ok) return thread;
  // A thread this request created holds its first run's place already: nothing waits or runs on it.
  if (thread.value.opened) return accept(deps, request, input, thread.value.arrivals, { rootRunId: input.runId });
  const open = openAsks(waiting);
  if (waiting && open.length > 0) {
    const match = matchAnswer(input, open, input.runId);
    if (match.kind === 'answer') return answer(deps, request, input, waiting, match.closing);
  }
  const addressed = agent.takesInterjections ? addressedRunIdOf(input) : undefined;
  if (addressed !== undefined) {
    const target = await store.getRun(addressed);
    // The running run of this thread: another tenant's run of a thread with the same id is not it.
    if (target?.tenant === request.principal.tenant && target.threadId === input.threadId && target.status === 'running') {
      return interject(deps, request, input, target);
    }
  }
  // A message addressed to a run that has settled (or to none this agent can join) is an ordinary next run.
  return enqueueOrdinary(deps, request, input, thread.value);
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
async function openThread(
  deps: CoreDeps,
  request: StartRunRequest,
  threadId: string,
): Promise<Result<Thread & { opened?: true }>> {
  const { store } = deps;
  const fresh: Thread = {
    threadId,
    agentId: request.agentId,
    tenant: request.principal.tenant,
    createdAt: isoNow(deps),
    unsettled: 1,
    arrivals: 1,
  };
  if (await store.createThread(fresh)) return ok({ ...fresh, opened: true });
  // Two first messages may race to create the thread; the loser reads the winner's and queues behind it.
  const thread = await store.getThread(fresh);
  if (!thread) return refuse('thread_not_found', `thread "${threadId}" could not be opened`);
  if (thread.agentId !== request.agentId) {
    return refuse('thread_agent_mismatch', `thread "${threadId}" belongs to agent "${thread.agentId}"`);
  }
  return ok(thread);
}

async function answer(
  deps: CoreDeps,
  request: AdmittedRequest,
  input: RunAgentInput,
  waiting: Run,
  closing: AskClosing,
): Promise<Result<StartedRun>> {
  const { store } = deps;
  // The one conditional write that makes exactly one of concurrent answers the answer.
  const closed = await store.closeAsks(waiting.runId, closing);
  if (!closed) {
    const now = await store.getRun(waiting.runId);
    if (Object.values(now?.asks ?? {}).some((ask) => ask.state === 'expired')) {
      return refuse('interrupt_expired', 'the interrupt this input answers has expired');
    }
    return refuse('no_open_ask', 'the asks this input answers were already answered or closed');
  }
  await deps.timer.disarm(waiting.runId);
  const arrival = await store.reserveArrival(waiting, undefined);
  return accept(deps, request, input, arrival ?? 0, { parentRunId: waiting.runId, rootRunId: waiting.rootRunId });
}

/** Dispatched at once beside the running run it names; it takes a place but does not wait for one. */
async function interject(
  deps: CoreDeps,
  request: AdmittedRequest,
  input: RunAgentInput,
  target: Run,
): Promise<Result<StartedRun>> {
  const arrival = await deps.store.reserveArrival(target, undefined);
  return accept(deps, request, input, arrival ?? 0, { rootRunId: input.runId, addressedRunId: target.runId });
}

async function enqueueOrdinary(
  deps: CoreDeps,
  request: AdmittedRequest,
  input: RunAgentInput,
  thread: Thread,
): Promise<Result<StartedRun>> {
  // Places count runs not yet settled, so a thread holds one running run plus `threadQueueLimit` queued.
  const arrival = await deps.store.reserveArrival(thread, deps.settings.threadQueueLimit + 1);
  if (arrival === undefined) {
    return refuse(
      'thread_queue_full',
      `thread "${thread.threadId}" already has ${deps.settings.threadQueueLimit} runs waiting`,
    );
  }
  return accept(deps, request, input, arrival, { rootRunId: input.runId });
}

async function accept(
  deps: CoreDeps,
  request: AdmittedRequest,
  input: RunAgentInput,
  arrival: number,
  lineage: { parentRunId?: string; rootRunId: string; addressedRunId?: string },
): Promise<Result<StartedRun>> {
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
    createdAt: isoNow(deps),
  };
  if (lineage.parentRunId !== undefined) run.parentRunId = lineage.parentRunId;
  if (lineage.addressedRunId !== undefined) run.addressedRunId = lineage.addressedRunId;
  if (request.tenantPlace) run.tenantPlace = true;
  if (!(await deps.store.createRun(run))) {
    // The same runId raced in; give back the thread's place and answer as a repeat would (the
    // tenant's place goes back with the admission).
    await deps.store.releasePlace(run);
    const existing = await deps.store.getRun(input.runId);
    return existing ? attach(existing, request, input) : refuse('run_id_conflict', `runId "${input.runId}" is taken`);
  }
  const message = { threadId: threadKey(run), runId: run.runId };
  await (run.addressedRunId === undefined ? deps.queue.enqueue(message) : deps.queue.dispatchBeside(message));
  return ok({ run, attached: false });
}
