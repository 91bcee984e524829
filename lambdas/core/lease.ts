import { auditSystem } from './audit/write.js';
import type { Core } from './deps.js';
import { RunFailure } from './errors.js';
import { isTerminal, type RunLease } from './model.js';
import type { Clock, RunStore } from './ports.js';
import type { LeaseSettings } from './settings.js';

/** The dispatcher's run was failed `dispatch_lost` while it still relayed it (it was late past its lease): it writes nothing more of it. */
export class LeaseLost extends RunFailure {
  constructor(runId: string) {
    super('dispatch_lost', `the run ${runId} was failed dispatch_lost while its dispatcher was late renewing its lease`);
    this.name = 'LeaseLost';
  }
}

/**
 * A dispatcher's hold on the run it relays (`RunLease`). It is renewed on a timer and, before a
 * write of the run's events, once `renewMs` passed since the last renewal: so no batch is written
 * more than `renewMs` after a renewal that found the lease held, and a sweep, which ends a lease
 * only `lapseMs` after its last renewal, cannot fail the run under a write unless the write took
 * longer than the difference. A renewal that finds the lease ended (the sweep failed the run) or
 * taken over by a later delivery's dispatch marks it lost; from then on every write of the run's
 * stops (`hold` throws), and its dispatcher settles nothing. Its end ends only the lease it took: a
 * dispatch that was only stalled past its lapse, whose run a later delivery started meanwhile,
 * leaves that delivery's lease alone.
 */
export class RunHold {
  lost = false;
  /** What losing the lease stops: the relay of the dispatch that holds it (a door's hold is taken before its relay begins). */
  whenLost: () => void;
  private renewedAt: number;
  private stopTimer: (() => void) | undefined;
  private ended = false;

  private constructor(
    private readonly deps: { store: RunStore; clock: Clock },
    private readonly runId: string,
    /** The delivery this dispatch came in (or a door's own name): its renewals and its end touch only the lease it took, never a later delivery's. */
    readonly receipt: string | undefined,
    private readonly settings: LeaseSettings,
    onLost: () => void,
  ) {
    this.whenLost = onLost;
    this.renewedAt = deps.clock.now();
    this.arm();
  }

  /**
   * Takes the run's lease (a redelivery's takes over the one before: that dispatch is gone);
   * undefined when a door holds it, or, for a door (`door`), when anyone does.
   */
  static async take(
    deps: { store: RunStore; clock: Clock },
    runId: string,
    by: { receipt: string | undefined; door: boolean },
    settings: LeaseSettings,
    onLost: () => void,
  ): Promise<RunHold | undefined> {
    const { receipt, door } = by;
    const taken = await deps.store.leases.take({ runId, until: deps.clock.now() + settings.lapseMs, ...(receipt !== undefined ? { receipt } : {}), ...(door ? { door: true as const } : {}) });
    return taken ? new RunHold(deps, runId, receipt, settings, onLost) : undefined;
  }

  /** Before a write of the run's: renews the lease when due; throws `LeaseLost` once the run is no longer this dispatcher's. */
  async hold(): Promise<void> {
    if (!this.lost && this.deps.clock.now() - this.renewedAt >= this.renewEvery) await this.renew();
    if (this.lost) throw new LeaseLost(this.runId);
  }

  /** Whether the lease is still this dispatch's (renewed now, if it is): false once it was ended or taken over. */
  async held(): Promise<boolean> {
    if (!this.lost) await this.renew();
    return !this.lost;
  }

  /** The run settled (or its dispatch ended): the lease goes, so no sweep looks at it again. */
  async end(): Promise<void> {
    this.stop();
    if (!this.lost) await this.deps.store.leases.end(this.runId, this.receipt !== undefined ? { receipt: this.receipt } : {});
  }

  /** Stops renewing, leaving the lease to lapse (a run handed to its providers is held by its link). */
  stop(): void {
    this.ended = true;
    this.stopTimer?.();
  }

  /** Renewed well inside the lapse whatever the settings say: three renewals a lapse at the least. */
  private get renewEvery(): number {
    return Math.min(this.settings.renewMs, Math.floor(this.settings.lapseMs / 3));
  }

  /** Each renewal is sent whatever is on its way: two that cross each hold the lease a lapse past its own time. */
  private async renew(): Promise<void> {
    const at = this.deps.clock.now();
    if (await this.deps.store.leases.renew(this.runId, at + this.settings.lapseMs, this.receipt)) {
      this.renewedAt = Math.max(this.renewedAt, at);
    } else if (!this.lost) {
      this.lost = true;
      this.stop();
      this.whenLost();
    }
  }

  private arm(): void {
    if (this.ended) return;
    this.stopTimer = this.deps.clock.after(this.renewEvery, () => {
      // On a steady beat, whatever a renewal takes; a store that failed one is tried again at the
      // next, and the run's own writes say it failed.
      this.arm();
      this.renew().catch(() => {});
    });
  }
}

/** Leases ended per page, and pages per sweep. */
const LAPSED_PAGE = 100;
const LAPSED_PAGES = 10;

export interface LapsedSweep {
  /** Runs failed `dispatch_lost`: their dispatcher's lease lapsed. */
  failed: number;
  /** Thread-queue deliveries let go (the failed runs', and those of runs that settled before their lease was ended). */
  released: number;
  /** Queued runs' deliveries made visible again: their dispatcher died before marking them running. */
  redelivered: number;
}

/**
 * Leases that lapsed before `now`: their dispatcher died (its environment ended) or fell far
 * behind. Each lease is ended first, only while it is as listed, so a dispatcher that renewed
 * since keeps its run; then a run still running (or cancelling) is failed `dispatch_lost` and its
 * thread-queue delivery is let go, so the thread's next run is delivered now rather than at the
 * message's visibility timeout. A run that settled (its dispatcher died before ending its lease)
 * only has its delivery let go; one still queued (its dispatcher died between taking the lease and
 * marking it running) has its message made visible again, so the next receive runs it. A run
 * running under another delivery's receipt than the lease's was started by a later dispatcher,
 * after this lease was ended: it is left to that one. Safe twice, and beside live dispatchers.
 */
export async function failLapsed(core: Core, now: number): Promise<LapsedSweep> {
  const sweep: LapsedSweep = { failed: 0, released: 0, redelivered: 0 };
  for (let page = 0; page < LAPSED_PAGES; page++) {
    const leases = await core.store.leases.lapsed(now, LAPSED_PAGE);
    for (const lease of leases) {
      const done = await settleLapsed(core, lease);
      if (done.failed) sweep.failed += 1;
      if (done.released) sweep.released += 1;
      if (done.redelivered) sweep.redelivered += 1;
    }
    if (leases.length < LAPSED_PAGE) break;
  }
  return sweep;
}

/**
 * What a reader does that found the run it follows still running with no change for a lapse
 * (`lease.lapseMs`): its dispatcher may be dead, and the run is failed `dispatch_lost` now, as the
 * sweep would at its next pass, when its lease lapsed indeed. False when the lease was renewed
 * (or is another delivery's, or gone): the dispatcher is alive, or the sweep came first.
 */
export async function failIfLapsed(core: Core, runId: string): Promise<boolean> {
  const lease = await core.store.leases.get(runId);
  if (!lease || lease.until >= core.clock.now()) return false;
  // Asked only for a run its reader saw running, which is never queued again: the queued case
  // (its message made visible again, which a door may not do) stays the sweep's.
  return (await settleLapsed(core, lease)).failed;
}

/** One lapsed lease, ended only as it was read: its run failed, its delivery let go or made visible again. */
async function settleLapsed(core: Core, lease: RunLease): Promise<{ failed: boolean; released: boolean; redelivered: boolean }> {
  const done = { failed: false, released: false, redelivered: false };
  if (!(await core.store.leases.end(lease.runId, { until: lease.until }))) return done;
  const run = await core.store.runs.get(lease.runId);
  if (!run) return done;
  // A door's lease names its holder, not a delivery: the message a dispatcher kept for the run is the one on the run.
  const delivery = lease.door ? undefined : lease.receipt;
  if (run.status === 'queued') {
    const receipt = delivery ?? run.receipt;
    if (receipt !== undefined) {
      await core.queue.redeliver(receipt);
      done.redelivered = true;
    }
    return done;
  }
  // A link run is its providers' once handed off, its message held by its link: the link's timers end it.
  if (!isTerminal(run.status) && run.link) return done;
  // Started by a later delivery of its message (whose dispatcher took a lease of its own after
  // this one was ended): the run is that dispatcher's, and failing it would end a live relay.
  if (!isTerminal(run.status) && delivery !== undefined && run.receipt !== delivery) return done;
  if (!isTerminal(run.status)) {
    if (!(await core.ledger.abandon(run, 'dispatch_lost', 'the dispatcher running this run was lost (its lease lapsed)'))) return done;
    done.failed = true;
    await auditSystem(core, { tenant: run.tenant, action: 'run.failed_by_sweep', target: `run:${run.runId}`, detail: { reason: 'dispatch_lost', threadId: run.threadId } });
  }
  const receipt = delivery ?? run.receipt;
  if (receipt !== undefined) {
    await core.queue.release(receipt);
    done.released = true;
  }
  return done;
}
