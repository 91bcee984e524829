import type { Clock, LinkJob, LinkTimer } from '../../../core/ports.js';

/** setTimeout's longest delay (2^31 − 1 ms); a later job is reached in hops. */
const LONGEST_DELAY_MS = 2_147_483_647;

/** The link's timers on one machine: the clock's. Not durable: a restart fails the link runs it finds running. */
export class InProcessLinkTimer implements LinkTimer {
  private readonly pending = new Set<() => void>();
  private fire: ((job: LinkJob) => Promise<unknown>) | undefined;

  constructor(
    private readonly clock: Clock,
    private readonly onError: (error: unknown, runId: string) => void = () => {},
  ) {}

  start(fire: (job: LinkJob) => Promise<unknown>): void {
    this.fire = fire;
  }

  async schedule(job: LinkJob, afterMs: number): Promise<void> {
    const delay = Math.min(Math.max(0, afterMs), LONGEST_DELAY_MS);
    const cancel = this.clock.after(delay, () => {
      this.pending.delete(cancel);
      if (afterMs > LONGEST_DELAY_MS) void this.schedule(job, afterMs - LONGEST_DELAY_MS);
      else void this.fire?.(job).catch((error: unknown) => this.onError(error, job.runId));
    });
    this.pending.add(cancel);
  }

  stop(): void {
    for (const cancel of this.pending) cancel();
    this.pending.clear();
  }
}
