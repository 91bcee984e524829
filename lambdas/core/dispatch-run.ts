import { EventType } from '@ag-ui/core';
import { auditSystem } from './audit/write.js';
import type { Core } from './deps.js';
import { RunFailure, StoreUnavailable } from './errors.js';
import { checkEvent, withRunIds } from './events.js';
import type { RunLog } from './ledger.js';
import { isTerminal, type Agent, type AgUiEventRecord, type Run, type RunContext } from './model.js';
import { RunWatch } from './follow-run.js';
import type { LinkCore } from './link/deps.js';
import { handOff } from './link/offers.js';
import type { Provider } from './ports.js';
import { deriveEnd } from './outcome.js';
import { agentForDispatch } from './recent-agents.js';
import { RunHold, LeaseLost } from './lease.js';
import { limitedRun } from './relay.js';
import type { DispatchResult } from './run-life.js';
import { agentInput, threadHistory } from './run-input.js';
import { MAX_EVENT_BYTES, utf8Bytes } from './storable.js';
import { RunTranscript } from './transcript.js';

export type { DispatchResult } from './run-life.js';

export interface DispatchOptions {
  /** An interjection handed over beside its thread's running run, outside the thread's order. */
  beside?: boolean;
  /**
   * The thread-queue delivery this dispatch came in (an SQS receipt handle), recorded on the run as
   * it starts (`Run.receipt`: a repair lets a settled run's message go). A link run handed off
   * without its dispatcher holding it keeps the message (`RunLink.hold`), which its caller keeps in
   * flight, so the thread's next run waits; the run's settle lets it go (`ThreadQueue.release`).
   */
  receipt?: string;
  /** When the run must have ended whatever its agent's limit (epoch ms): the dispatching function's own end. */
  deadline?: () => number | undefined;
  /** The context its thread-queue message carried (the run's), which the dispatch's own moment (`RunLife.dispatched`) carries. */
  context?: RunContext;
  /** Dispatched by the door that admitted it, under the lease the door took before the run was queued (`claimAtDoor`). */
  atDoor?: RunHold;
}

/**
 * Runs one queued run to its end: mark it running (a conditional write), hand the agent its
 * input, record every event, derive the end, settle. Called once per thread-queue message; a
 * message whose run is already running is a redelivery after a crashed attempt, and that run is
 * failed `dispatch_lost`, never run twice.
 */
export async function dispatchRun(core: Core, runId: string, options: DispatchOptions = {}): Promise<DispatchResult> {
  const carried = options.context ? { context: options.context } : {};
  let result: DispatchResult;
  try {
    result = await dispatchOnce(core, runId, options);
  } catch (error) {
    core.life.dispatched?.({ runId, ...carried, error });
    throw error;
  }
  core.life.dispatched?.({ runId, ...carried, result });
  return result;
}

async function dispatchOnce(core: Core, runId: string, options: DispatchOptions): Promise<DispatchResult> {
  const beside = options.beside ?? false;
  // A door runs the run only if it is first to it: anything else is a dispatcher's to sort out.
  if (options.atDoor) return (await startDispatch(core, runId, options)) ?? 'skipped';
  // The common case is a queued run: it is marked running first, and read only when that fails.
  if (!beside) {
    const started = await startDispatch(core, runId, options);
    if (started) return started;
  }
  const found = await core.store.runs.get(runId);
  if (!found) return 'missing';
  if (beside && found.status === 'queued' && found.addressedRunId !== undefined) {
    const target = await core.store.runs.get(found.addressedRunId);
    if (target?.status !== 'running') {
      // The run it addressed settled first: the interjection becomes the thread's next ordinary run.
      await core.ledger.enqueue(found, true);
      return 'queued_as_next';
    }
  }
  if ((found.status === 'running' || found.status === 'cancelling') && found.link && options.receipt !== undefined && core.link && !core.link.holdUntilSettled) {
    // The message a link run holds came again (its time in flight ran out, or its dispatcher died
    // after the hand-off): the run is at its providers, and holds the message anew.
    return holdAgain(core, found, options.receipt);
  }
  if (found.status === 'running' || found.status === 'cancelling') {
    await core.ledger.abandon(found, 'dispatch_lost', 'the dispatcher running this run was lost');
    return 'dispatch_lost';
  }
  if (found.status !== 'queued') return 'skipped';
  return (await startDispatch(core, runId, options)) ?? 'skipped';
}

export type UndeliveredResult = 'dispatch_failed' | 'settled' | 'missing';

/**
 * A thread-queue message the queue gave up on (its receives used up, now in the dead-letter
 * queue): no dispatch will reach its run. The run fails `dispatch_failed` from whatever state
 * the dispatchers left it in (queued, or running under a dispatcher that died on its last
 * receive: by then every receive's visibility has passed, so none is still at work), and gives
 * back its places. A run that settled already only has its settle completed. Safe to do again.
 */
export async function failUndelivered(core: Core, runId: string): Promise<UndeliveredResult> {
  const found = await core.store.runs.get(runId);
  if (!found) return 'missing';
  const failed = await core.ledger.abandon(found, 'dispatch_failed', 'the thread queue gave up delivering this run to a dispatcher', ['queued', 'running', 'cancelling']);
  if (failed) {
    await auditSystem(core, { tenant: found.tenant, action: 'run.failed_by_repair', target: `run:${runId}`, detail: { reason: 'dispatch_failed', threadId: found.threadId } });
    return 'dispatch_failed';
  }
  const settled = await core.store.runs.get(runId);
  if (settled?.closingEvents) await core.ledger.completeSettle(settled);
  return 'settled';
}

/** Marks a queued run running and runs it to its end; undefined when the run was not queued. */
async function startDispatch(core: Core, runId: string, options: DispatchOptions): Promise<DispatchResult | undefined> {
  const stop = new AbortController();
  let cancelRequested = false;
  // Subscribed before the run is marked running, so a cancel that follows cannot slip between.
  const unsubscribe = core.feed.subscribe(runId, (change) => {
    if (change.kind === 'status' && change.run.status === 'cancelling') {
      cancelRequested = true;
      stop.abort(new Error('cancel requested'));
    }
  });
  let ended: Relayed = {};
  const transcript = new RunTranscript();
  let run: Run | undefined;
  let log: RunLog | undefined;
  let hold: RunHold | undefined;
  try {
    // The lease first: a dispatcher that dies between the two writes leaves a queued run with a
    // lapsing lease, whose message the sweep delivers again, rather than a running run with none.
    const lost = () => stop.abort(new LeaseLost(runId));
    if (options.atDoor) {
      hold = options.atDoor;
      hold.whenLost = lost;
      if (hold.lost) lost();
    } else if (core.settings.lease) {
      const by = { receipt: options.receipt, door: false };
      hold = await RunHold.take(core, runId, by, core.settings.lease, lost);
      // Refused, a door holds the lease: the one that admitted the run relays it, and this
      // dispatcher keeps its message for it; an earlier attempt's, which the run does not name, goes.
      if (!hold && (await endStaleDoorLease(core, runId))) hold = await RunHold.take(core, runId, by, core.settings.lease, lost);
      if (!hold) return await keepForDoor(core, runId, options.receipt);
    }
    run = await core.ledger.start(runId, options.receipt);
    if (!run) {
      // Not queued any more. A dispatch stalled past its lapse finds its lease another's: the
      // sweep let its message go again and the next delivery started the run, which is that one's
      // to run (failing it `dispatch_lost` below would end a live relay).
      if (hold && !(await hold.held())) return 'superseded';
      await hold?.end();
      return undefined;
    }
    log = core.ledger.log(run, 0, hold);
    const agent = await agentForDispatch(core, run.agentId);
    const provider = agent ? core.providers[agent.provider.kind] : undefined;
    if (agent && provider && 'linked' in provider) {
      unsubscribe();
      // Handed to its providers, the run is held by its link (and its timers), not by this dispatcher.
      await hold?.end();
      return await handOffLinked(core, run, agent, options);
    }
    ended = !agent
      ? { failure: { code: 'agent_not_found', message: `agent "${run.agentId}" is no longer registered` } }
      : !provider
        ? { failure: { code: 'provider_unknown', message: `no provider of kind "${agent.provider.kind}"` } }
        : await relay(core, run, agent, provider as Provider, log, transcript, stop, options);
  } finally {
    unsubscribe();
    hold?.stop();
  }
  // Failed `dispatch_lost` while this dispatcher was late: the failure is the run's end, and nothing is written over it.
  if (hold?.lost) return 'dispatch_lost';
  const end = deriveEnd(transcript, { threadId: run.threadId, runId, cancelRequested, failure: ended.failure });
  const settled = await core.ledger.settle(run, ended.dropped ? { ...end, droppedEvents: ended.dropped } : end, log, ended.terminal);
  // Not settled here: another ended the run (a sweep that found its lease lapsed), and took the lease with it.
  if (settled) await hold?.end();
  return 'ran';
}

/**
 * A run of an agent that dials out is offered over its providers' links; its events come back as
 * frames. On one machine the dispatcher holds it until it settles, so the thread's next run waits.
 * Elsewhere (AWS) the dispatcher returns at once: the run's first write of its `link` keeps the
 * thread-queue message it came in, and `handed_off` says the message is the run's now, unless the
 * run already settled (a cancel came first), when the message may go.
 */
async function handOffLinked(core: Core, run: Run, agent: Agent, options: DispatchOptions): Promise<DispatchResult> {
  if (!core.link) {
    await core.ledger.abandon(run, 'provider_unknown', 'this gateway takes no provider links: register the agent as agui-http or lambda here, or deploy the stack that takes them');
    return 'ran';
  }
  const linked = core as LinkCore;
  const first = { beside: options.beside ?? false, ...(options.receipt !== undefined && !options.beside ? { hold: options.receipt } : {}) };
  if (!linked.link.holdUntilSettled) {
    await handOff(linked, run, agent, first);
    if (first.hold === undefined) return 'ran';
    // Read after the hand-off's writes: a settle that comes later finds the hold on the record and lets it go.
    const now = await core.store.runs.get(run.runId);
    return now && !isTerminal(now.status) && now.link?.hold === first.hold ? 'handed_off' : 'ran';
  }
  const watch = new RunWatch(core.feed, run.runId);
  try {
    await handOff(linked, run, agent, first);
    for (;;) {
      // Taken before the read: a change that lands in between is not slept through.
      const seen = watch.changes;
      const latest = watch.latest ?? (await core.store.runs.get(run.runId));
      if (!latest || isTerminal(latest.status)) return 'ran';
      await watch.changeSince(seen);
    }
  } finally {
    watch.close();
  }
}

/**
 * A door's lease on a run that does not name its holder: taken by an attempt of the run's request
 * whose door died before recording the run (the run was recorded by a later attempt, which took
 * no lease). It is ended, only as read, so the run goes on with a dispatcher. True when it was.
 */
async function endStaleDoorLease(core: Core, runId: string): Promise<boolean> {
  const [lease, run] = await Promise.all([core.store.leases.get(runId), core.store.runs.get(runId)]);
  if (!lease?.door || !run || run.atDoor === lease.receipt) return false;
  return core.store.leases.end(runId, { until: lease.until, ...(lease.receipt !== undefined ? { receipt: lease.receipt } : {}) });
}

/**
 * A message whose run its door relays (the door's lease refused this dispatcher's): the run takes
 * the message's receipt, which its settle lets go, and the dispatcher keeps it in flight until
 * then, so the thread's next run waits. `skipped` when the run settled first: the message may go.
 * A door that dies leaves its lease to lapse, and the sweep finds the receipt on the run.
 */
async function keepForDoor(core: Core, runId: string, receipt: string | undefined): Promise<DispatchResult> {
  if (receipt === undefined) return 'skipped';
  for (let found = await core.store.runs.get(runId); found && !isTerminal(found.status); found = await core.store.runs.get(runId)) {
    if (!(await core.store.runs.transition(runId, [found.status], { status: found.status, receipt }))) continue;
    // A sweep that ended the door's lapsed lease meanwhile may have read the run before the receipt
    // was on it, and delivers nothing again: the message is made visible here, for the next
    // receive to run the run (never this one, which a sweep's redelivery would fail beside it).
    if ((await core.store.leases.get(runId))?.door) return 'held_at_door';
    await core.queue.redeliver(receipt);
    return 'redelivered';
  }
  return 'skipped';
}

/** A link run takes the message it came in again; `skipped` when it settled first (the message may go). */
async function holdAgain(core: Core, run: Run, hold: string): Promise<DispatchResult> {
  for (let found: Run | undefined = run; found?.link && !isTerminal(found.status); found = await core.store.runs.get(run.runId)) {
    if (await core.ledger.updateLink(found, { ...found.link, rev: found.link.rev + 1, hold })) return 'handed_off';
  }
  return 'skipped';
}

async function relay(
  core: Core,
  run: Run,
  agent: Agent,
  provider: Provider,
  log: RunLog,
  transcript: RunTranscript,
  stop: AbortController,
  options: DispatchOptions,
): Promise<Relayed> {
  const fail = (code: string, message: string): Relayed => ({ failure: { code, message } });
  const history = run.door === 'agui' ? [] : await threadHistory(core, run);
  const input = agentInput(run, history, options.beside ?? false);
  const rules = core.rules.start();
  const dropped: Relayed['dropped'] = { count: 0, first: '' };
  const call = core.life.providerCall?.({ run, agent });
  const ended = (relayed: Relayed): Relayed => {
    call?.ended?.(relayed.failure);
    return dropped.count > 0 ? { ...relayed, dropped } : relayed;
  };
  const headers = call?.headers ? { headers: call.headers } : {};
  try {
    for await (const raw of limitedRun(provider, input, { agent, signal: stop.signal, clock: core.clock, deadline: options.deadline?.(), ...headers })) {
      const turn = core.turn?.();
      if (turn) await turn;
      const checked = checkEvent(raw);
      if (!checked.ok) {
        stop.abort();
        return ended(fail('provider_sent_malformed_event', checked.message));
      }
      const event = withRunIds(checked.event, run);
      const json = JSON.stringify(event);
      const bytes = utf8Bytes(json);
      if (bytes > MAX_EVENT_BYTES) {
        stop.abort();
        return ended(fail('provider_event_too_large', `a ${event.type} event of ${Math.ceil(bytes / 1024)} KB is more than the record keeps (${MAX_EVENT_BYTES / 1024} KB an event)`));
      }
      // Held to the stock client's rules: what they refuse and changes nothing is left out (and
      // noted); anything else they refuse ends the run, so no caller gets a stream its client refuses.
      const redundant = transcript.redundant(event);
      if (redundant) {
        dropped.count += 1;
        dropped.first ||= redundant;
        continue;
      }
      const broken = rules(event);
      if (broken) {
        stop.abort();
        return ended(fail('provider_sent_malformed_event', `the agent's stream breaks the AG-UI event order: ${broken}`));
      }
      transcript.observe(event);
      // A run ends at its first RUN_FINISHED or RUN_ERROR; whatever the agent says after is not this
      // run's. The terminal event is the end's to write: it closes the log after the end is recorded.
      if (transcript.ended) {
        stop.abort();
        return ended({ terminal: event });
      }
      await log.record(event, json, bytes);
    }
  } catch (error) {
    if (error instanceof StoreUnavailable) return ended(fail(error.code, error.message));
    if (error instanceof RunFailure) return ended(fail(error.code, error.message));
    if (stop.signal.aborted) return ended({});
    return ended(fail('provider_failed', error instanceof Error ? error.message : String(error)));
  }
  return ended({});
}

/** How a relay ended: with the agent's terminal event, with a failure funduq saw, or neither (the stream just ended). */
interface Relayed {
  terminal?: AgUiEventRecord;
  failure?: { code: string; message: string };
  dropped?: { count: number; first: string };
}
