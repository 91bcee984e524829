import type { AskTimer, Clock } from '../../core/ports.js';

/** setTimeout's longest delay (2^31 − 1 ms); a later expiry is reached in hops. */
const LONGEST_DELAY_MS = 2_147_483_647;

/** The outbound gap's clock on one machine. Timers are not durable: `recover` re-arms them at start. */
export class InProcessAskTimer implements AskTimer {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private fire: ((runId: string) => Promise<unknown>) | undefined;

  constructor(
    private readonly clock: Clock,
    private readonly onError: (error: unknown, runId: string) => void = () => {},
  ) {}

  start(fire: (runId: string) => Promise<unknown>): void {
    this.fire = fire;
  }

  async arm(runId: string, expiresAt: string): Promise<void> {
    await this.disarm(runId);
    const delay = Math.max(0, Date.parse(expiresAt) - this.clock.now());
    const timer = setTimeout(
      () => {
        this.timers.delete(runId);
        if (delay > LONGEST_DELAY_MS) void this.arm(runId, expiresAt);
        else void this.fire?.(runId).catch((error: unknown) => this.onError(error, runId));
      },
      Math.min(delay, LONGEST_DELAY_MS),
    );
    timer.unref();
    this.timers.set(runId, timer);
  }

  async disarm(runId: string): Promise<void> {
    clearTimeout(this.timers.get(runId));
    this.timers.delete(runId);
  }

  stop(): void {
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }
}
