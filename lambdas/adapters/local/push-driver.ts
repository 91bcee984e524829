import type { CoreDeps } from '../../core/deps.js';
import { deliverPush, planPush, type PushPlan } from '../../core/a2a/push.js';
import type { PushSender, RunChange } from '../../core/ports.js';

/**
 * Push notifications on one machine, driven by the in-process change feed. Changes are planned
 * one after another in the order they were published; each task's notifications are then
 * delivered in that order, so a slow receiver (retrying with backoff) holds up its own task only.
 */
export class InProcessPushDriver {
  private planning: Promise<void> = Promise.resolve();
  private readonly deliveries = new Map<string, Promise<void>>();

  constructor(
    private readonly deps: Pick<CoreDeps, 'store' | 'clock'>,
    private readonly sender: PushSender,
    private readonly onError: (error: unknown) => void = () => {},
  ) {}

  onChange(change: RunChange): void {
    this.planning = this.planning
      .then(() => planPush(this.deps, change))
      .then((plan) => plan && this.deliver(plan))
      .catch(this.onError);
  }

  /** Resolves when everything published so far was planned and delivered (or given up on). */
  async idle(): Promise<void> {
    await this.planning;
    while (this.deliveries.size > 0) await Promise.all([...this.deliveries.values()]);
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
