import type { CoreDeps } from '../core/deps.js';
import { deliverPush, planPush, type PushPlan } from '../core/a2a/push.js';
import { isTerminal, type Run } from '../core/model.js';
import type { PushConfig } from '../core/model.js';
import type { PushConfigs, PushSender, RunChange, RunStore } from '../core/ports.js';

/**
 * Push notifications on one machine, driven by the in-process change feed. Changes are planned
 * one after another in the order they were published; each task's notifications are then
 * delivered in that order, so a slow receiver (retrying with backoff) holds up its own task only.
 * Planning reads the store, on the same thread as the relay: changes that pile up while it works
 * are planned together (a run's consecutive event batches as one), a running run is known from
 * its last status change rather than read again, and whether a task has push configs at all is
 * asked at most once (this process writes every config, see `noticingPushConfigs`; a task begun
 * since the driver started and never told of is known to have none), so the common task costs
 * the relay no reads.
 */
export class InProcessPushDriver {
  private pending: RunChange[] = [];
  private planning: Promise<void> | undefined;
  private readonly running = new Map<string, Run>();
  /** By task id: whether it has push configs, while its runs are being planned. */
  private readonly configured = new Map<string, boolean>();
  /** Tasks whose configs were written or removed since this driver started. */
  private readonly noticed = new Set<string>();
  private readonly startedAt: number;
  private readonly deliveries = new Map<string, Promise<void>>();

  constructor(
    private readonly deps: Pick<CoreDeps, 'store' | 'clock'>,
    private readonly sender: PushSender,
    private readonly onError: (error: unknown) => void = () => {},
  ) {
    this.startedAt = deps.clock.now();
  }

  onChange(change: RunChange): void {
    this.pending.push(change);
    this.planning ??= this.plan();
  }

  /** A task's push configs were written or removed: ask the store again. */
  configsChanged(taskId: string): void {
    this.configured.delete(taskId);
    this.noticed.add(taskId);
  }

  /** Resolves when everything published so far was planned and delivered (or given up on). */
  async idle(): Promise<void> {
    while (this.planning) await this.planning;
    while (this.deliveries.size > 0) await Promise.all([...this.deliveries.values()]);
  }

  private async plan(): Promise<void> {
    while (this.pending.length > 0) {
      for (const change of coalesce(this.pending.splice(0))) {
        const settled = change.kind === 'status' && isTerminal(change.run.status);
        if (change.kind === 'status' && !settled) this.running.set(change.runId, change.run);
        try {
          const run = change.kind === 'status' ? change.run : (this.running.get(change.runId) ?? (await this.deps.store.runs.get(change.runId)));
          if (run && (await this.hasConfigs(run))) {
            const plan = await planPush(this.deps, change, run);
            if (plan) this.deliver(plan);
          }
          // A settled run's task may be answered later: it is asked about again then.
          if (run && settled) this.configured.delete(run.rootRunId);
        } catch (error) {
          this.onError(error);
        }
        if (settled) this.running.delete(change.runId);
      }
    }
    this.planning = undefined;
  }

  private async hasConfigs(run: Run): Promise<boolean> {
    const taskId = run.rootRunId;
    let has = this.configured.get(taskId);
    // A task begun since this driver started has had every config write told to it: none told, none there.
    const begunSinceStart = run.runId === taskId && Date.parse(run.createdAt) >= this.startedAt;
    if (has === undefined && begunSinceStart && !this.noticed.has(taskId)) has = false;
    if (has === undefined) {
      has = (await this.deps.store.pushConfigs.list(taskId)).length > 0;
      this.configured.set(taskId, has);
    }
    return has;
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

/**
 * The store as the gateway uses it, telling `changed` of every push config written or removed:
 * on one machine every config passes through here, so the push driver can trust what it was told.
 */
export function noticingPushConfigs(store: RunStore, changed: (taskId: string) => void): RunStore {
  const configs = store.pushConfigs;
  const pushConfigs: PushConfigs = Object.assign(Object.create(configs) as PushConfigs, {
    async put(config: PushConfig): Promise<void> {
      await configs.put(config);
      changed(config.taskId);
    },
    async delete(taskId: string, configId: string): Promise<boolean> {
      const removed = await configs.delete(taskId, configId);
      changed(taskId);
      return removed;
    },
  });
  return Object.assign(Object.create(store) as RunStore, { pushConfigs });
}
