import type { ChangeFeed, RunChange } from '../../core/ports.js';

/** Wake-ups within one process: the local runtime's stand-in for DynamoDB streams. */
export class InProcessChangeFeed implements ChangeFeed {
  private readonly listeners = new Map<string, Set<(change: RunChange) => void>>();

  publish(change: RunChange): void {
    for (const listener of this.listeners.get(change.runId) ?? []) listener(change);
  }

  subscribe(runId: string, listener: (change: RunChange) => void): () => void {
    let set = this.listeners.get(runId);
    if (!set) this.listeners.set(runId, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(runId);
    };
  }
}
