import type { AskClosing } from './answers.js';
import type { CoreDeps } from './deps.js';
import type { Run } from './model.js';
import { earliestExpiry } from './outcome.js';

/**
 * The ask timer fired for a waiting run: once its earliest `expiresAt` has passed the set can no
 * longer be answered whole, so every open ask of the run becomes `expired` in one conditional write.
 */
export async function expireAsks(deps: CoreDeps, runId: string): Promise<void> {
  const run = await deps.store.getRun(runId);
  const due = earliestExpiry(run?.asks);
  if (!run || due === undefined) return;
  if (Date.parse(due) > deps.clock.now()) {
    await deps.timer.arm(runId, due);
    return;
  }
  await expireOpenAsks(deps, run);
}

export async function expireOpenAsks(deps: CoreDeps, run: Run): Promise<void> {
  const closing: AskClosing = {};
  for (const ask of Object.values(run.asks ?? {})) if (ask.state === 'open') closing[ask.id] = { state: 'expired' };
  if (Object.keys(closing).length === 0) return;
  const closed = await deps.store.closeAsks(run.runId, closing);
  if (closed) deps.feed.publish({ kind: 'status', runId: run.runId, run: closed });
}
