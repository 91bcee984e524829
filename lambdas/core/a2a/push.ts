import type { StreamResponse } from '@a2a-js/sdk';
import type { CoreDeps } from '../deps.js';
import { isoNow } from '../time.js';
import { logOf } from '../log.js';
import type { Run } from '../model.js';
import type { PushNotification, PushSender, RunChange } from '../ports.js';
import { lineageOf } from './lineage.js';
import { beforeEvents, replayRun, TaskProjection } from './projection.js';

/** What one change of the record pushes: its task, and the notifications in the order they go. */
export interface PushPlan {
  taskId: string;
  notifications: PushNotification[];
}

/**
 * The push notifications one change of the record calls for (A2A push): the updates the change
 * adds to its task, as the task projection says them, once per push config of the task. Events
 * push the artifact chunks and funduq-only events they carry (and WORKING when a run starts); a
 * run's status change pushes the task's status, except `queued` and `running`.
 */
export async function planPush(
  deps: Pick<CoreDeps, 'store'>,
  change: RunChange,
  /** The changed run as its last status change showed it, when the caller kept it: saves a read per batch of events. */
  known?: Run,
): Promise<PushPlan | undefined> {
  const { store } = deps;
  // A run's creation (queued) is answered to its caller by the send itself, and its start by its
  // RUN_STARTED: neither is a push of its own.
  if (change.kind === 'status' && (change.run.status === 'queued' || change.run.status === 'running')) return undefined;
  const run = change.kind === 'status' ? change.run : (known ?? (await store.runs.get(change.runId)));
  if (!run) return undefined;
  const configs = await store.pushConfigs.list(run.rootRunId);
  if (configs.length === 0) return undefined;
  const root = run.rootRunId === run.runId ? run : await store.runs.get(run.rootRunId);
  if (!root) return undefined;

  const projection = new TaskProjection(root.runId, root.threadId);
  const updates: StreamResponse[] = [];
  for (const member of await lineageOf(store, root)) {
    if (change.kind === 'events' && member.runId === change.runId) {
      // The run's record may already be ahead of this batch; its later state is pushed by its own change.
      projection.observeRun(beforeEvents(member));
      const last = Math.max(...change.events.map((stored) => stored.seq));
      const wanted = new Set(change.events.map((stored) => stored.seq));
      for (const stored of await store.events.read(member.runId, 0, last)) {
        const said = projection.applyEvent(stored);
        if (wanted.has(stored.seq)) updates.push(...said);
      }
      break;
    }
    replayRun(projection, member, await logOf(store, member));
  }
  if (change.kind === 'status') updates.push(projection.statusNow());
  return {
    taskId: root.runId,
    notifications: updates.flatMap((body) => configs.map((config) => ({ config, body }))),
  };
}

/**
 * Sends a plan in order: each update to all of its configs before the next update. A notification
 * that no try delivered is recorded on its config as a dead letter, and the plan goes on.
 */
export async function deliverPush(deps: { store: CoreDeps['store']; clock: Pick<CoreDeps['clock'], 'now'> }, sender: PushSender, plan: PushPlan): Promise<void> {
  const byUpdate = new Map<unknown, PushNotification[]>();
  for (const notification of plan.notifications) {
    const group = byUpdate.get(notification.body) ?? [];
    group.push(notification);
    byUpdate.set(notification.body, group);
  }
  for (const group of byUpdate.values()) {
    await Promise.all(
      group.map(async (notification) => {
        const result = await sender.send(notification);
        if (result.delivered) return;
        const { taskId, configId } = notification.config;
        await deps.store.pushConfigs.recordFailure(taskId, configId, {
          at: isoNow(deps),
          error: result.error,
          attempts: result.attempts,
          notification: notification.body,
        });
      }),
    );
  }
}

/**
 * Push for one change, planned and delivered: what a change feed's consumer calls (the local
 * runtime's feed listener; on AWS, the stream handler for each record of the runs and run_events
 * streams, in order per shard).
 */
export async function pushForChange(deps: { store: CoreDeps['store']; clock: Pick<CoreDeps['clock'], 'now'> }, sender: PushSender, change: RunChange): Promise<void> {
  const plan = await planPush(deps, change);
  if (plan) await deliverPush(deps, sender, plan);
}
