import type { AskClosing } from './answers.js';
import type { Core } from './deps.js';
import type { Run } from './model.js';
import { earliestExpiry } from './outcome.js';
import { auditSystem } from './audit/write.js';

/**
 * The ask timer fired for a waiting run: once its earliest `expiresAt` has passed the set can no
 * longer be answered whole, so every open ask of the run becomes `expired` in one conditional write.
 */
export async function expireAsks(core: Core, runId: string): Promise<void> {
  const run = await core.store.runs.get(runId);
  const due = earliestExpiry(run?.asks);
  if (!run || due === undefined) return;
  if (Date.parse(due) > core.clock.now()) {
    await core.timer.arm(runId, due, run.asksReopened, run.context);
    return;
  }
  await expireOpenAsks(core, run);
}

export async function expireOpenAsks(core: Core, run: Run): Promise<void> {
  const closing: AskClosing = {};
  for (const ask of Object.values(run.asks ?? {})) if (ask.state === 'open') closing[ask.id] = { state: 'expired' };
  if (Object.keys(closing).length === 0) return;
  const closed = await core.ledger.closeAsks(run.runId, closing);
  if (!closed) return;
  core.life.expired?.(closed, Object.keys(closing));
  await auditSystem(core, { tenant: run.tenant, action: 'ask.expired', target: `run:${run.runId}`, detail: { asks: Object.keys(closing), threadId: run.threadId } });
}
