import type { ChangeFeed, RunChange } from '../../core/ports.js';

/** Wake-ups within one process: the local runtime's stand-in for DynamoDB streams. */
export class InProcessChangeFeed implements ChangeFeed {
  private readonly listeners = new Map<string, Set<(change: RunChange) => void>>();
  private readonly everything = new Set<(change: RunChange) => void>();

  publish(change: RunChange): void {
    for (const listener of this.listeners.get(change.runId) ?? []) listener(change);
    for (const listener of this.everything) listener(change);
  }

  subscribe(runId: string, listener: (change: RunChange) => void): () => void {
    let set = this.listeners.get(runId);
    if (!set) this.listeners.set(runId, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.listeners.get(runId) === set) this.listeners.delete(runId);
    };
  }

  /** Every change of every run, as a stream consumer sees the whole table (push notifications). */
  subscribeAll(listener: (change: RunChange) => void): () => void {
    this.everything.add(listener);
    return () => this.everything.delete(listener);
  }
}
