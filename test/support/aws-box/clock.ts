/**
 * The box's wall clock: the machine's, moved forward by `advance`. What runs on the platform's
 * wall clock runs on it: SQS visibility and deduplication windows, the asynchronous-invoke retry
 * delays and the pollers' backoff, the state machine's Wait states and retry pauses, the
 * functions' `Date`. Elapsed time stays real: Lambda timeouts, the functions' own timers.
 * Advancing fires what came due.
 */
export class BoxClock {
  private offset = 0;
  private readonly timers = new Set<{ due: number; fire: () => void; handle: ReturnType<typeof setTimeout> }>();
  private readonly listeners = new Set<(offset: number) => void>();

  now(): number {
    return Date.now() + this.offset;
  }

  get offsetMs(): number {
    return this.offset;
  }

  /** Moves the wall clock forward by `ms`, for the box and for every function and execution. */
  advance(ms: number): void {
    this.offset += ms;
    for (const listener of this.listeners) listener(this.offset);
    for (const timer of [...this.timers]) this.arm(timer);
  }

  onAdvance(listener: (offset: number) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Calls `fire` once the box's time reaches `due` (epoch ms); returns a cancel. */
  at(due: number, fire: () => void): () => void {
    const timer = { due, fire, handle: undefined as unknown as ReturnType<typeof setTimeout> };
    this.timers.add(timer);
    this.arm(timer);
    return () => {
      clearTimeout(timer.handle);
      this.timers.delete(timer);
    };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const onAbort = () => {
        cancel();
        resolve();
      };
      const cancel = this.at(this.now() + ms, () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      });
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  close(): void {
    for (const timer of this.timers) clearTimeout(timer.handle);
    this.timers.clear();
  }

  private arm(timer: { due: number; fire: () => void; handle: ReturnType<typeof setTimeout> }): void {
    clearTimeout(timer.handle);
    timer.handle = setTimeout(() => {
      if (this.now() < timer.due) return this.arm(timer);
      this.timers.delete(timer);
      timer.fire();
    }, Math.max(0, timer.due - this.now()));
  }
}
