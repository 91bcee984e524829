import type { CoreDeps } from '../../core/deps.js';
import { deliverPush, planPush, type PushPlan } from '../../core/a2a/push.js';
import { isTerminal, type Run } from '../../core/model.js';
import type { PushSender, RunChange } from '../../core/ports.js';

/**
 * Push notifications on one machine, driven by the in-process change feed. Changes are planned
 * one after another in the order they were published; each task's notifications are then
 * delivered in that order, so a slow receiver (retrying with backoff) holds up its own task only.
 * Planning reads the store, on the same thread as the relay: changes that pile up while it works
 * are planned together (a run's consecutive event batches as one), and a running run is known
 * from its last status change rather than read again.
 */
export class InProcessPushDriver {
  private pending: RunChange[] = [];
  private planning: Promise<void> | undefined;
  private readonly running = new Map<string, Run>();
  private readonly deliveries = new Map<string, Promise<void>>();

  constructor(
    private readonly deps: Pick<CoreDeps, 'store' | 'clock'>,
    private readonly sender: PushSender,
    private readonly onError: (error: unknown) => void = () => {},
  ) {}

  onChange(change: RunChange): void {
    this.pending.push(change);
    this.planning ??= this.plan();
  }

  /** Resolves when everything published so far was planned and delivered (or given up on). */
  async idle(): Promise<void> {
    while (this.planning) await this.planning;
    while (this.deliveries.size > 0) await Promise.all([...this.deliveries.values()]);
  }

  private async plan(): Promise<void> {
    while (this.pending.length > 0) {
      for (const change of coalesce(this.pending.splice(0))) {
        if (change.kind === 'status') {
          if (isTerminal(change.run.status)) this.running.delete(change.runId);
          else this.running.set(change.runId, change.run);
        }
        try {
          const plan = await planPush(this.deps, change, this.running.get(change.runId));
          if (plan) this.deliver(plan);
        } catch (error) {
          this.onError(error);
        }
      }
    }
    this.planning = undefined;
  }

  private deliver(plan: PushPlan): void {
    const previous = this.deliveries.get(plan.taskId) ?? Promise.resolve();
    const next = previous.then(() => deliverPush(this.deps, this.sender, plan)).catch(this.onError);
    this.deliveries.set(plan.taskId, next);
    void next.then(() => {
      if (this.deliveries.get(plan.taskId) === next) this.deliveries.delete(plan.taskId);
    });
  }
}

/** Consecutive event batches of one run become one change; order is otherwise kept. */
function coalesce(changes: RunChange[]): RunChange[] {
  const merged: RunChange[] = [];
  for (const change of changes) {
    const last = merged.at(-1);
    if (change.kind === 'events' && last?.kind === 'events' && last.runId === change.runId) {
      merged[merged.length - 1] = { ...last, events: [...last.events, ...change.events] };
    } else {
      merged.push(change);
    }
  }
  return merged;
}
