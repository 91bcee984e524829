import type { AskClosing } from './answers.js';
import { charge, type BudgetDeps } from './budgets.js';
import { closingLog } from './log.js';
import { threadKey, type Agent, type AgUiEventRecord, type Run, type RunLink, type StoredEvent } from './model.js';
import { cancelledEnd, earliestExpiry, failedEnd, openAsks, type RunEnd } from './outcome.js';
import type { AskTimer, ChangeFeed, Clock, RunStore, ThreadQueue } from './ports.js';
import type { RunLife, RunRef } from './run-life.js';
import { isoNow } from './time.js';
import { itemBytes, MAX_ITEM_BYTES, RUN_END_ROOM_BYTES, utf8Bytes } from './storable.js';
import { runUsage, usageRecordOf } from './usage.js';

export interface LedgerDeps {
  store: RunStore;
  feed: ChangeFeed;
  queue: ThreadQueue;
  timer: AskTimer;
  clock: Clock;
  /** The agent of a run as a settle prices it (a definition read moments ago will do). */
  agentOf(agentId: string): Promise<Agent | undefined>;
  budgets: BudgetDeps;
  /** Who watches runs' lives: told of each write here that is a moment of one. */
  life: RunLife;
}

/** Room an end keeps for its own fields (status, times, reason, usage), beside the asks and the closing events. */
const END_FIELDS_BYTES = 8 * 1024;
/**
 * Asks and closing events this small fit beside any input: a run is accepted only with
 * `RUN_END_ROOM_BYTES` of its item left, of which the end's fields take `END_FIELDS_BYTES` and
 * what a running run gains (its start time, its message's receipt) takes less than 4 KB.
 */
const SMALL_END_BYTES = RUN_END_ROOM_BYTES - END_FIELDS_BYTES - 4 * 1024;

/**
 * Whether the run's item keeps `end` beside its input. A small end is known to fit without
 * measuring the input (hundreds of KB read back from the record and walked, at every settle).
 */
function fitsBesideInput(run: Run, end: Pick<Run, 'asks'> & Partial<Pick<Run, 'closingEvents'>>): boolean {
  if (itemBytes(end) <= SMALL_END_BYTES) return true;
  return itemBytes({ ...run, ...end }) <= MAX_ITEM_BYTES - END_FIELDS_BYTES;
}

/** Past this many unwritten events a log's writer waits for the store instead of buffering more. */
const HIGH_WATER = 2_000;
/**
 * The most events one write takes. A burst that arrived whole is stored in slices, so readers get
 * the first slice while the next is written instead of nothing until the whole burst is stored.
 */
const MOST_PER_WRITE = 100;

/**
 * The one owner of a run's record: every write of a run (its creation, its start, its events,
 * its end, a cancel, the closing of its asks) goes through here, and each is published on the
 * change feed once the store took it, so a reader woken by a change reads what is stored. The
 * side effects a write calls for (the queue message, the places given back, the waiting run, the
 * ask timer) are made here too, right after the write that calls for them.
 *
 * Events are numbered by their producer. The run's holder in this process (its dispatcher)
 * numbers them through `log()`; a producer elsewhere (an agent that dials out, over frames that
 * may come twice, in any order, at different functions) brings its own seqs to `append()`, stored
 * first-write-wins per seq, and readers wait out a gap until it fills. A run's closing events are
 * written first-write-wins too (a repair may write them again behind a writer that stopped), so
 * nothing a reader may have seen is ever overwritten.
 */
export class Ledger {
  constructor(private readonly deps: LedgerDeps) {}

  /** Records a new run, queued, and hands it to its thread's queue (beside the running run for an interjection). */
  async queue(run: Run): Promise<boolean> {
    if (!(await this.deps.store.runs.create(run))) return false;
    this.publish(run);
    // Told before the message goes: a dispatcher may take it at once, and the wait is from here.
    this.deps.life.queued?.(run);
    await this.enqueue(run);
    return true;
  }

  /** Hands an existing queued run to its thread's queue again (a restart, or an interjection that came too late). */
  async enqueue(run: Pick<Run, 'tenant' | 'threadId' | 'runId' | 'addressedRunId' | 'context'>, next = false): Promise<void> {
    const message = { threadId: threadKey(run), runId: run.runId, ...(run.context ? { context: run.context } : {}) };
    await (run.addressedRunId === undefined || next ? this.deps.queue.enqueue(message) : this.deps.queue.dispatchBeside(message));
  }

  /** queued → running, with the queue's delivery it holds; undefined when the run was not queued. */
  async start(runId: string, receipt?: string): Promise<Run | undefined> {
    const run = await this.deps.store.runs.transition(runId, ['queued'], { status: 'running', startedAt: isoNow(this.deps), ...(receipt !== undefined ? { receipt } : {}) });
    if (run) {
      this.publish(run);
      this.deps.life.started?.(run);
    }
    return run;
  }

  /** The writer of a run's events in this process (its holder: the dispatcher that marked it running), numbering them after `lastSeq`. */
  log(run: RunRef, lastSeq = 0, hold?: WriteFence): RunLog {
    return new RunLog(run, lastSeq, this.deps.store, this.deps.feed, this.deps.life, hold);
  }

  /**
   * Stores events their producer numbered (seq 1, 2, … per run, in any order and any number of
   * times): a seq stored already keeps its first event. Publishes what was new.
   */
  async append(events: StoredEvent[], run?: RunRef): Promise<StoredEvent[]> {
    if (events.length === 0) return [];
    const taken = new Set(await this.deps.store.events.appendNew(events));
    const stored = taken.size === 0 ? events : events.filter((event) => !taken.has(event.seq));
    if (stored.length > 0) {
      this.deps.feed.publish({ kind: 'events', runId: stored[0].runId, events: stored });
      this.deps.life.stored?.(run ?? { runId: stored[0].runId }, stored);
    }
    return stored;
  }

  /**
   * The end of a run. What `log` holds is stored first; then the end is written (once, from
   * running or cancelling) with the events that close the log (the agent's own terminal event, or
   * funduq's) held on the record; the places the run held go back, and a run that left asks
   * becomes its thread's waiting run with its ask timer armed; then the closing events are stored
   * and published. So whoever reads the run's last event reads a record that already has its end
   * and its asks: an answer sent the moment an interrupt arrives finds the ask open. A store that
   * refuses the log fails the run `store_unavailable` after what it did store.
   */
  async settle(run: Run, end: RunEnd, log: RunLog, terminal?: AgUiEventRecord): Promise<Run | undefined> {
    try {
      await log.flush();
    } catch (error) {
      const failed = failedEnd('store_unavailable', error instanceof Error ? error.message : String(error));
      return this.finish(run, failed, await this.storedLog(run.runId), failed.closingEvents);
    }
    return this.finish(run, end, { events: log.lastSeq, bytes: log.bytes }, terminal ? [terminal, ...end.closingEvents] : end.closingEvents);
  }

  /**
   * A run whose dispatcher is gone (or that no dispatch will reach): its stored log gets a final
   * RUN_ERROR and the run fails with `reason`, from one of the states `from` names.
   */
  async abandon(run: Run, reason: string, message: string, from: Run['status'][] = ['running', 'cancelling']): Promise<Run | undefined> {
    const end = failedEnd(reason, message);
    return this.finish(run, end, await this.storedLog(run.runId), end.closingEvents, from);
  }

  /**
   * The end of a run whose events were stored by `append` (a provider that dials out), derived by
   * its caller from the stored log: its first `stored.events` events, whole, then the agent's
   * terminal event (or funduq's closing events), held on the record until the log has them, as `settle` does.
   */
  async settleStored(run: Run, end: RunEnd, stored: { events: number; bytes: number }, terminal?: AgUiEventRecord): Promise<Run | undefined> {
    return this.finish(run, end, stored, terminal ? [terminal, ...end.closingEvents] : end.closingEvents);
  }

  /** Moves a link run among providers (offered, accepted, carried on another link, ending), if nobody moved it since `run` was read. */
  async updateLink(run: Run, link: RunLink): Promise<Run | undefined> {
    const updated = await this.deps.store.runs.updateLink(run.runId, run.link?.rev, link);
    if (updated) this.publish(updated);
    return updated;
  }

  /** A cancel of a running run: it becomes `cancelling`, and its dispatcher (listening) asks the agent to stop. */
  async requestCancel(runId: string, by?: string, request?: Run['cancelRequest']): Promise<Run | undefined> {
    const run = await this.deps.store.runs.transition(runId, ['running'], { status: 'cancelling', cancelRequested: true, ...(by ? { cancelRequestedBy: by } : {}), ...(request ? { cancelRequest: request } : {}) });
    if (run) {
      this.publish(run);
      this.deps.life.cancelRequested?.(run);
    }
    return run;
  }

  /** A cancel of a queued run: it ends at once, never reaching its agent, with a log that says so. */
  async cancelQueued(run: Run, by?: string, request?: Run['cancelRequest']): Promise<Run | undefined> {
    const end = cancelledEnd(undefined, run, 'cancelled_while_queued');
    // The transition makes this the run's only writer: its dispatcher will skip it.
    return this.finish(run, { ...end, cancelRequested: true, ...(by ? { cancelRequestedBy: by } : {}), ...(request ? { cancelRequest: request } : {}) }, { events: 0, bytes: 0 }, end.closingEvents, ['queued']);
  }

  /**
   * Moves asks of a settled run from open to their new states in one conditional write (every one
   * named must still be open), and stops the run's ask timer once none is left open.
   */
  async closeAsks(runId: string, closing: AskClosing): Promise<Run | undefined> {
    const closed = await this.deps.store.runs.closeAsks(runId, closing);
    if (!closed) return undefined;
    if (earliestExpiry(closed.asks) === undefined) await this.deps.timer.disarm(runId, closed.asksReopened);
    this.publish(closed);
    return closed;
  }

  /** An answer whose run could not be recorded gives its asks back: open again, as they were. */
  async reopenAsks(runId: string, closing: AskClosing): Promise<Run | undefined> {
    const reopened = await this.deps.store.runs.reopenAsks(runId, closing);
    if (!reopened) return undefined;
    const expiry = earliestExpiry(reopened.asks);
    if (expiry !== undefined) await this.deps.timer.arm(runId, expiry, reopened.asksReopened, reopened.context);
    this.publish(reopened);
    return reopened;
  }

  /**
   * What a settled run's end calls for after its end is written: its usage record written and
   * charged to its tenant's budget, then its closing events stored (the usage first: a caller who
   * read the run's last event finds the run in its usage). A record that still holds closing
   * events has not had all of it (its writer may have stopped in between), and this is safe to
   * do again: a seq stored already keeps its event, a usage record is written once.
   */
  async completeSettle(run: Run): Promise<void> {
    const record = usageRecordOf(run);
    if (await this.deps.store.usage.put(record)) await charge(this.deps.budgets, record);
    const closing = closingLog(run);
    await this.append(closing, run);
    if (run.closingEvents) await this.deps.store.runs.forgetClosingEvents(run.runId);
  }

  /**
   * A repair of a settled run whose settle may have stopped part-way (its record still holds
   * closing events): each step its end calls for is done again, and each is safe to repeat (a
   * place goes back once, a timer is armed once per run, a seq and a usage record are written
   * once). A run that still has open asks becomes its thread's waiting run, unless a later run
   * of the thread became it meanwhile.
   */
  async repairEnd(run: Run): Promise<void> {
    await this.giveBack(run);
    if (openAsks(run).length > 0) {
      const thread = await this.deps.store.threads.get(run);
      const waiting = thread?.waitingRunId === undefined ? undefined : await this.deps.store.runs.get(thread.waitingRunId);
      if (thread && thread.waitingRunId !== run.runId && (!waiting || waiting.arrival < run.arrival)) await this.deps.store.threads.setWaitingRun(run, run.runId);
    }
    await this.armOpenAsks(run);
    await this.completeSettle(run);
  }

  /** Writes the end of a run once (by default from running or cancelling) and lets the thread move on. */
  private async finish(
    run: Run,
    given: RunEnd & Pick<Run, 'cancelRequested' | 'cancelRequestedBy' | 'cancelRequest'>,
    stored: { events: number; bytes: number },
    givenClosing: AgUiEventRecord[],
    from: Run['status'][] = ['running', 'cancelling'],
  ): Promise<Run | undefined> {
    // An end that does not fit beside the run's input in its record (an agent's interrupts of
    // hundreds of KB) fails the run instead: the record keeps every run's end whole, or says why not.
    const tooLarge = !fitsBesideInput(run, { asks: given.asks });
    const end: RunEnd & Pick<Run, 'cancelRequested' | 'cancelRequestedBy' | 'cancelRequest'> = tooLarge
      ? { ...failedEnd('provider_event_too_large', 'the run ended with asks larger than its record keeps beside its input'), cancelRequested: given.cancelRequested, cancelRequestedBy: given.cancelRequestedBy, cancelRequest: given.cancelRequest }
      : given;
    let closing = tooLarge ? end.closingEvents : givenClosing;
    // The tokens the agent reported on its terminal event are counted whatever the record keeps of
    // its end (an end too large for the record, or closing events moved into the log).
    const reported = givenClosing;
    // Closing events that do not fit on the record either are stored in the log first, as events are.
    if (closing.length > 0 && !fitsBesideInput(run, { asks: end.asks, closingEvents: closing })) {
      await this.append(closing.map((event, i) => ({ runId: run.runId, seq: stored.events + 1 + i, event })), run);
      stored = { events: stored.events + closing.length, bytes: stored.bytes + closing.reduce((sum, event) => sum + utf8Bytes(JSON.stringify(event)), 0) };
      closing = [];
    }
    const endedAt = isoNow(this.deps);
    const log = { events: stored.events + closing.length, bytes: stored.bytes + closing.reduce((sum, event) => sum + utf8Bytes(JSON.stringify(event)), 0) };
    const prices = (await this.deps.agentOf(run.agentId))?.prices;
    const patch: Partial<Run> & { status: Run['status'] } = {
      status: end.status,
      endedAt,
      lastSeq: log.events,
      usage: runUsage(run, log, reported, endedAt, prices),
    };
    if (end.outcome !== undefined) patch.outcome = end.outcome;
    if (end.reason !== undefined) patch.reason = end.reason;
    if (end.message !== undefined) patch.message = end.message;
    if (end.asks !== undefined) patch.asks = end.asks;
    if (end.cancelRequested) patch.cancelRequested = true;
    // A queued run's cancel: who asked is on the record, as for a running run's.
    if (end.cancelRequestedBy !== undefined) patch.cancelRequestedBy = end.cancelRequestedBy;
    if (end.cancelRequest !== undefined) patch.cancelRequest = end.cancelRequest;
    if (end.droppedEvents) patch.droppedEvents = end.droppedEvents;
    // Held even when none is left to store: a record holding closing events is one whose settle is
    // under way, and a repair (or a restart) completes it should its writer stop before it does.
    patch.closingEvents = closing;
    const settled = await this.deps.store.runs.transition(run.runId, from, patch);
    if (!settled) return undefined;
    await this.giveBack(settled);
    // A link run on offer to a provider, or held by one, holds one of that provider's places (a
    // count, not a set: given back here only, never by a repair; a restart resets them).
    if (settled.link?.providerId !== undefined) await this.deps.store.providers.releasePlace(settled.link.providerId);
    if (end.asks) await this.deps.store.threads.setWaitingRun(run, run.runId);
    await this.armOpenAsks(settled);
    this.publish(settled);
    this.deps.life.settled?.(settled);
    try {
      await this.completeSettle(settled);
    } catch {
      // The record holds its closing events: readers take them from there, and a restart (or a
      // repair) completes the settle.
    }
    return settled;
  }

  /**
   * What a run's log holds as stored, up to its first gap (a writer stopped part-way through a
   * batch): its events and their bytes. The end goes right after them, and readers stop at the
   * end, so what lies beyond a gap was never seen and never will be.
   */
  private async storedLog(runId: string): Promise<{ events: number; bytes: number }> {
    const events = await this.deps.store.events.read(runId, 0);
    let count = 0;
    let bytes = 0;
    for (const stored of events) {
      if (stored.seq !== count + 1) break;
      count = stored.seq;
      bytes += utf8Bytes(stored.json ?? JSON.stringify(stored.event));
    }
    return { events: count, bytes };
  }

  /**
   * A settled run gives back the places it held: its thread's, its tenant's when it took one, and
   * the thread-queue message a link run held, or a dispatcher kept for a run its door relayed;
   * once, whoever calls.
   */
  private async giveBack(run: Run): Promise<void> {
    await this.deps.store.threads.releasePlace(run, run.runId, new Date(this.deps.clock.now()).toISOString());
    if (run.tenantPlace) await this.deps.store.tenants.releasePlace(run.tenant, run.runId);
    if (run.link?.hold !== undefined) await this.deps.queue.release(run.link.hold);
    if (run.atDoor !== undefined && run.receipt !== undefined) await this.deps.queue.release(run.receipt);
  }

  /** The ask timer of a run with open asks that expire (armed once per run: a repeat is a no-op). */
  private async armOpenAsks(run: Run): Promise<void> {
    const expiry = earliestExpiry(run.asks);
    if (expiry !== undefined) await this.deps.timer.arm(run.runId, expiry, run.asksReopened, run.context);
  }

  private publish(run: Run): void {
    this.deps.feed.publish({ kind: 'status', runId: run.runId, run });
  }
}

/** What a writer checks before each write of a run's events: it throws once the run is no longer the writer's (`RunHold`). */
export interface WriteFence {
  hold(): Promise<void>;
}

/**
 * Numbers a run's events and stores them before anyone sees them. Writes are group-committed:
 * the events that arrive in one turn of the event loop (one network read of the agent's stream
 * holds many) are written together, and while a write is in flight the events that arrive
 * meanwhile become the next batch; so a slow stream is written event by event (low latency) and
 * a fast one in batches (throughput), whether the store answers in microseconds or milliseconds.
 */
export class RunLog {
  private seq: number;
  private readonly runId: string;
  /** The bytes of what this writer numbered, as JSON. */
  bytes = 0;
  private pending: StoredEvent[] = [];
  private writing: Promise<void> | undefined;
  private failure: unknown;

  constructor(
    private readonly run: RunRef,
    lastSeq: number,
    private readonly store: RunStore,
    private readonly feed: ChangeFeed,
    private readonly life: RunLife,
    private readonly fence?: WriteFence,
  ) {
    this.runId = run.runId;
    this.seq = lastSeq;
  }

  get lastSeq(): number {
    return this.seq;
  }

  /** Takes the next event (with its JSON, and that JSON's UTF-8 size, when the caller made them); resolves at once unless the store has fallen far behind. */
  async record(event: AgUiEventRecord, given?: string, givenBytes?: number): Promise<void> {
    if (this.failure !== undefined) throw this.failure;
    // Serialised and measured once: the store writes this JSON and framing reuses it.
    const json = given ?? JSON.stringify(event);
    this.bytes += givenBytes ?? utf8Bytes(json);
    this.pending.push({ runId: this.runId, seq: ++this.seq, event, json });
    this.writing ??= this.drain();
    if (this.pending.length >= HIGH_WATER) await this.writing;
  }

  /** Resolves when every recorded event is stored; throws what the store threw. */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
    if (this.failure !== undefined) throw this.failure;
  }

  private async drain(): Promise<void> {
    try {
      // The rest of this turn's events join the first write: they come in microtasks of the same
      // network read, all run before an immediate (not a timer: no time passes, the clock is not asked).
      await new Promise<void>((resolve) => setImmediate(resolve));
      while (this.pending.length > 0) {
        const batch = this.pending.length > MOST_PER_WRITE ? this.pending.splice(0, MOST_PER_WRITE) : this.pending;
        if (batch === this.pending) this.pending = [];
        await this.fence?.hold();
        await this.store.events.append(batch);
        this.feed.publish({ kind: 'events', runId: this.runId, events: batch });
        this.life.stored?.(this.run, batch);
      }
    } catch (error) {
      this.failure = error;
      this.pending = [];
    } finally {
      this.writing = undefined;
    }
  }
}
