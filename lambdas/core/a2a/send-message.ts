import type { Message } from '@a2a-js/sdk';
import type { RunAgentInput } from '@ag-ui/core';
import { ok, refuse, type Refusal, type Result } from '../errors.js';
import { callerIdProblem, type MessageClaim, type Run, type Thread } from '../model.js';
import { openAsks } from '../outcome.js';
import { callerInput } from '../run-input.js';
import { storableProblem } from '../storable.js';
import { classify, classifyAnswer, refuseExpired, reportRefusal, reportRetry, startLanded, type Landing, type Place } from '../start-run.js';
import { findTask, type A2aCore, type Caller } from './deps.js';
import { answerInput, ordinaryInput, type Landing as InboundLanding } from './inbound.js';
import { lineageOf } from './lineage.js';
import { putPushConfig, vetTarget, type PushTarget } from './push-configs.js';
import { isExpired } from '../retention/expiry.js';
import { Roles } from './vocabulary.js';

export interface SendMessage extends Caller {
  message: Message;
  /** The request's `metadata`: the run's `forwardedProps`. */
  metadata?: Record<string, unknown>;
  /** A push config sent with the message (`configuration.taskPushNotificationConfig`). */
  push?: PushTarget;
}

export interface Sent {
  /** The task: its root run. */
  root: Run;
  /** The run the message started (or, for a repeated message id, the one the first started). */
  run: Run;
  repeated: boolean;
}

/**
 * A message to the caller's agent: a new task, or an answer to the task it names. A message id
 * repeated within its context lands on the run the first one started (A2A idempotency).
 */
export async function sendMessage(core: A2aCore, request: SendMessage): Promise<Result<Sent>> {
  const sent = await sendOnce(core, request);
  if (sent.ok && sent.value.repeated) reportRetry(core, sent.value.run, request.context);
  return reportRefusal(core, { ...request, door: 'a2a', ...(request.message.contextId ? { threadId: request.message.contextId } : {}) }, sent);
}

async function sendOnce(core: A2aCore, request: SendMessage): Promise<Result<Sent>> {
  const { store } = core;
  const { message, principal, agentId } = request;
  if (!message.messageId) return refuse('invalid_input', 'message.messageId is required');
  const badId = callerIdProblem('message.messageId', message.messageId);
  if (badId) return refuse('invalid_input', badId);
  if (message.role === Roles.AGENT) return refuse('invalid_input', 'message.role is ROLE_AGENT: a caller sends ROLE_USER messages');
  // What the message carries is checked before anything is written, naming the field as the caller sent it.
  const unstorable =
    storableProblem(request.metadata, 'metadata') ??
    storableProblem(message.metadata, 'message.metadata') ??
    message.parts.reduce<string | undefined>(
      (found, part, i) => found ?? (part.content?.$case === 'data' ? storableProblem(part.content.value, `message.parts[${i}].data`) : undefined),
      undefined,
    );
  if (unstorable) return refuse('invalid_input', unstorable);
  // What the message lands on is read once here: the agent, the task (a reply), the context's thread.
  const agent = request.agent?.id === agentId ? request.agent : await store.agents.get(agentId);
  if (!agent) return refuse('agent_not_found', `no agent named "${agentId}"`);
  core.recentAgents.remember(agent);

  let root: Run | undefined;
  let thread: Thread | undefined;
  if (message.taskId) {
    const found = await findTask(core, request, message.taskId);
    if (!found.ok) return found;
    root = found.value;
    if (message.contextId && message.contextId !== root.threadId) {
      return refuse('invalid_input', `contextId "${message.contextId}" is not the context of task "${root.runId}" ("${root.threadId}")`);
    }
    thread = await store.threads.get(root);
  } else if (message.contextId) {
    thread = await store.threads.get({ tenant: principal.tenant, threadId: message.contextId });
    if (!thread) {
      return refuse('thread_not_found', `no context "${message.contextId}": leave contextId out to start a new one`);
    }
    if (thread.agentId !== agentId) return refuse('thread_agent_mismatch', `context "${message.contextId}" belongs to another agent`);
  }
  if (thread && (await isExpired(core, thread))) {
    return refuse('thread_expired', `context "${thread.threadId}" was last active ${thread.lastActivityAt ?? thread.createdAt} and its retention has ended: its content is being deleted; leave contextId out to start a new one`);
  }
  if (request.push) {
    const badConfigId = request.push.configId ? callerIdProblem('taskPushNotificationConfig.id', request.push.configId) : undefined;
    if (badConfigId) return refuse('invalid_input', badConfigId);
    const vetted = await vetTarget(core, request.push.url);
    if (vetted) return vetted;
  }

  const nowSeconds = Math.floor(core.clock.now() / 1000);
  const candidate: MessageClaim = {
    key: JSON.stringify([principal.tenant, agentId, thread?.threadId ?? '', message.messageId]),
    runId: core.ids.newId(),
    threadId: thread?.threadId ?? core.ids.newId(),
    expiresAt: nowSeconds + core.a2a.settings.messageIdTtlSeconds,
  };
  const claim = await store.claims.take(candidate, nowSeconds);
  if (claim.runId !== candidate.runId) {
    const earlier = await store.runs.get(claim.runId);
    if (earlier) {
      const first = earlier.rootRunId === earlier.runId ? earlier : await store.runs.get(earlier.rootRunId);
      return ok({ root: first ?? earlier, run: earlier, repeated: true });
    }
    // The first attempt took the id but recorded no run yet (it failed, or is still on its
    // way): go on with its ids, so that both attempts land on one run whichever is first.
  }
  const landing = { threadId: claim.threadId, runId: claim.runId, metadata: request.metadata };
  const started = await start(core, request, { agent, ...(thread ? { thread } : {}) }, root, landing);
  if (!started.ok) await store.claims.release(claim);
  return started;
}

async function start(core: A2aCore, request: SendMessage, found: Place, root: Run | undefined, landing: InboundLanding): Promise<Result<Sent>> {
  const { store } = core;
  let input: RunAgentInput;
  let place: Place = found;
  let classified: Result<Landing>;
  if (root) {
    const tail = (await lineageOf(store, root)).at(-1) ?? root;
    const open = openAsks(tail);
    // A first attempt of this message (its run id claimed) closed the asks for its run and died before recording it.
    const closedForThis = Object.values(tail.asks ?? {}).filter((ask) => ask.state !== 'open' && ask.closedByRunId === landing.runId);
    const answered = open.length > 0 ? open : closedForThis;
    if (tail.status !== 'completed' || answered.length === 0) return notWaiting(root, tail);
    // The context's open asks are its latest waiting run's; an older task's asks were left behind.
    // (A waiting run not yet named on its thread, the moment after its end, is still the latest.)
    const named = found.thread?.waitingRunId;
    const later = named !== undefined && named !== tail.runId ? await store.runs.get(named) : undefined;
    if (later && later.arrival > tail.arrival) {
      return refuse('no_open_ask', `task "${root.runId}" waits no more: a later task of context "${root.threadId}" holds its asks`);
    }
    const built = answerInput(request.message, answered, landing);
    if (!built.ok) return built;
    input = callerInput(built.value);
    const waiting = { ...found, waiting: tail };
    place = waiting;
    classified = open.length > 0 ? await classifyAnswer(core, waiting, input.runId) : ok({ kind: 'answer', waiting: tail, closing: {}, closed: true });
  } else {
    const built = ordinaryInput(request.message, landing);
    if (!built.ok) return built;
    input = callerInput(built.value);
    classified = await classify(core, request.principal, input, place);
  }
  if (!classified.ok) return classified;
  // A config sent with the message is stored before the run can start, so it misses no update.
  const taskId = root?.runId ?? landing.runId;
  const config = request.push ? await putPushConfig(core, taskId, request.principal, request.push) : undefined;
  const started = await startLanded(
    core,
    { agentId: request.agentId, input, door: 'a2a', principal: request.principal, ...(request.context ? { context: request.context } : {}), ...(request.requestId ? { requestId: request.requestId } : {}) },
    place,
    classified.value,
  );
  if (!started.ok) {
    if (config && !root) await store.pushConfigs.delete(config.taskId, config.configId);
    return started;
  }
  const { run, attached } = started.value;
  const taskRoot = root ?? (run.rootRunId === run.runId ? run : ((await store.runs.get(run.rootRunId)) ?? run));
  return ok({ root: taskRoot, run, repeated: attached });
}

function notWaiting(root: Run, tail: Run): Refusal {
  const expired = Object.values(tail.asks ?? {}).filter((ask) => ask.state === 'expired');
  if (tail.status === 'completed' && expired.length > 0) return refuseExpired(expired, root.runId);
  const now = tail.status === 'completed' ? 'has completed' : `is ${tail.status}`;
  return refuse('no_open_ask', `task "${root.runId}" is not waiting for an answer: its latest run ${now}`);
}
