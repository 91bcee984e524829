import { EventType } from '@ag-ui/core';
import type { Message } from '@ag-ui/core';
import { isoNow, type CoreDeps } from './deps.js';
import { RunFailure, StoreUnavailable } from './errors.js';
import { EventRecorder } from './event-recorder.js';
import { checkEvent } from './events.js';
import { foldThread } from './fold.js';
import { threadKey, type AgUiEventRecord, type Run } from './model.js';
import { deriveEnd, earliestExpiry, failedEnd, type RunEnd } from './outcome.js';
import { agentInput } from './run-input.js';
import { agentForDispatch } from './recent-agents.js';
import { releasePlaces } from './tenant-limits.js';
import { RunTranscript } from './transcript.js';

export type DispatchResult = 'ran' | 'skipped' | 'dispatch_lost' | 'missing' | 'queued_as_next';

/**
 * Runs one queued run to its end: mark it running (a conditional write), hand the agent its
 * input, record every event, derive the end, settle. Called once per thread-queue message; a
 * message whose run is already running is a redelivery after a crashed attempt, and that run is
 * failed `dispatch_lost`, never run twice.
 */
export async function dispatchRun(deps: CoreDeps, runId: string, beside = false): Promise<DispatchResult> {
  const { store } = deps;
  // The common case is a queued run: it is marked running first, and read only when that fails.
  if (!beside) {
    const started = await startDispatch(deps, runId);
    if (started) return started;
  }
  const found = await store.getRun(runId);
  if (!found) return 'missing';
  if (beside && found.status === 'queued' && found.addressedRunId !== undefined) {
    const target = await store.getRun(found.addressedRunId);
    if (target?.status !== 'running') {
      // The run it addressed settled first: the interjection becomes the thread's next ordinary run.
      await deps.queue.enqueue({ threadId: threadKey(found), runId });
      return 'queued_as_next';
    }
  }
  if (found.status === 'running' || found.status === 'cancelling') {
    await settleAbandoned(deps, found, 'dispatch_lost', 'the dispatcher running this run was lost');
    return 'dispatch_lost';
  }
  if (found.status !== 'queued') return 'skipped';
  return (await startDispatch(deps, runId, beside)) ?? 'skipped';
}

/** Marks a queued run running and runs it to its end; undefined when the run was not queued. */
async function startDispatch(deps: CoreDeps, runId: string, beside = false): Promise<DispatchResult | undefined> {
  const { store } = deps;
  const stop = new AbortController();
  let cancelRequested = false;
  // Subscribed before the run is marked running, so a cancel that follows cannot slip between.
  const unsubscribe = deps.feed.subscribe(runId, (change) => {
    if (change.kind === 'status' && change.run.status === 'cancelling') {
      cancelRequested = true;
      stop.abort(new Error('cancel requested'));
    }
  });
  let failure: { code: string; message: string } | undefined;
  const recorder = new EventRecorder(runId, 0, store, deps.feed);
  const transcript = new RunTranscript();
  let run: Run | undefined;
  try {
    run = await store.transitionRun(runId, ['queued'], { status: 'running', startedAt: isoNow(deps) });
    if (!run) return undefined;
    deps.feed.publish({ kind: 'status', runId, run });
    failure = await relay(deps, run, recorder, transcript, stop, beside);
  } finally {
    unsubscribe();
  }
  const end = deriveEnd(transcript, { threadId: run.threadId, runId, cancelRequested, failure });
  await settle(deps, run, recorder, end);
  return 'ran';
}

async function relay(
  deps: CoreDeps,
  run: Run,
  recorder: EventRecorder,
  transcript: RunTranscript,
  stop: AbortController,
  interjecting: boolean,
): Promise<{ code: string; message: string } | undefined> {
  const agent = await agentForDispatch(deps, run.agentId);
  if (!agent) return { code: 'agent_not_found', message: `agent "${run.agentId}" is no longer registered` };
  const provider = deps.providers[agent.provider.kind];
  if (!provider) return { code: 'provider_unknown', message: `no provider of kind "${agent.provider.kind}"` };
  const history = run.door === 'agui' ? [] : await threadHistory(deps, run);
  try {
    for await (const raw of provider.run(agentInput(run, history, interjecting), { agent, signal: stop.signal })) {
      const checked = checkEvent(raw);
      if (!checked.ok) {
        stop.abort();
        return { code: 'provider_sent_malformed_event', message: checked.message };
      }
      const event = withRunIds(checked.event, run);
      transcript.observe(event);
      await recorder.record(event);
      // A run ends at its first RUN_FINISHED or RUN_ERROR; whatever the agent says after is not this run's.
      if (transcript.ended) {
        stop.abort();
        break;
      }
    }
  } catch (error) {
    if (error instanceof StoreUnavailable) return { code: error.code, message: error.message };
    if (error instanceof RunFailure) return { code: error.code, message: error.message };
    if (stop.signal.aborted) return undefined;
    return { code: 'provider_failed', message: error instanceof Error ? error.message : String(error) };
  }
  return undefined;
}

/**
 * RUN_STARTED and RUN_FINISHED carry the run's ids; an agent that sends others has them
 * rewritten to funduq's, with its original kept under `rawEvent`.
 */
function withRunIds(event: AgUiEventRecord, run: Run): AgUiEventRecord {
  if (event.type !== EventType.RUN_STARTED && event.type !== EventType.RUN_FINISHED) return event;
  if (event.threadId === run.threadId && event.runId === run.runId) return event;
  return { ...event, threadId: run.threadId, runId: run.runId, rawEvent: event };
}

async function threadHistory(deps: CoreDeps, run: Run): Promise<Message[]> {
  const earlier = (await deps.store.listThreadRuns(run)).filter(
    (other) => other.arrival < run.arrival && other.runId !== run.runId,
  );
  return foldThread(deps.store, earlier);
}

async function settle(deps: CoreDeps, run: Run, recorder: EventRecorder, end: RunEnd): Promise<void> {
  try {
    for (const event of end.closingEvents) await recorder.record(event);
    await recorder.flush();
  } catch (error) {
    const failed = failedEnd('store_unavailable', error instanceof Error ? error.message : String(error));
    await finish(deps, run, failed, await closeAfterStored(deps, run, failed));
    return;
  }
  await finish(deps, run, end, recorder.lastSeq);
}

/**
 * After a write the store refused for good, the recorder is spent and the stored log may end
 * before its count. The closing events go after what is stored, should the store take them now,
 * so a reader sees the RUN_ERROR; if not, readers stop at what is stored and the record says why.
 */
async function closeAfterStored(deps: CoreDeps, run: Run, end: RunEnd): Promise<number> {
  const recorder = new EventRecorder(run.runId, await deps.store.lastSeq(run.runId), deps.store, deps.feed);
  try {
    for (const event of end.closingEvents) await recorder.record(event);
    await recorder.flush();
    return recorder.lastSeq;
  } catch {
    return deps.store.lastSeq(run.runId);
  }
}

/** Writes the end of a run once (from running or cancelling) and lets the thread move on. */
export async function finish(deps: CoreDeps, run: Run, end: RunEnd, lastSeq: number): Promise<Run | undefined> {
  const patch: Partial<Run> & { status: Run['status'] } = { status: end.status, endedAt: isoNow(deps), lastSeq };
  if (end.outcome !== undefined) patch.outcome = end.outcome;
  if (end.reason !== undefined) patch.reason = end.reason;
  if (end.message !== undefined) patch.message = end.message;
  if (end.asks !== undefined) patch.asks = end.asks;
  const settled = await deps.store.transitionRun(run.runId, ['running', 'cancelling'], patch);
  if (!settled) return undefined;
  await releasePlaces(deps, run);
  if (end.asks) {
    await deps.store.setWaitingRun(run, run.runId);
    const expiry = earliestExpiry(end.asks);
    if (expiry !== undefined) await deps.timer.arm(run.runId, expiry);
  }
  deps.feed.publish({ kind: 'status', runId: run.runId, run: settled });
  return settled;
}

/** A run whose dispatcher is gone: its stored log gets a final RUN_ERROR and the run fails with `reason`. */
export async function settleAbandoned(deps: CoreDeps, run: Run, reason: string, message: string): Promise<void> {
  const lastSeq = await deps.store.lastSeq(run.runId);
  const end = failedEnd(reason, message);
  const recorder = new EventRecorder(run.runId, lastSeq, deps.store, deps.feed);
  for (const event of end.closingEvents) await recorder.record(event);
  await recorder.flush();
  await finish(deps, run, end, recorder.lastSeq);
}
