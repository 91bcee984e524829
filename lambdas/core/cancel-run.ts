import { checkCancel } from './actors.js';
import type { AskClosing } from './answers.js';
import type { Core } from './deps.js';
import { ok, refuse, type Result } from './errors.js';
import { isTerminal, type Principal, type Run } from './model.js';
import { openAsks } from './outcome.js';
import type { LinkCore } from './link/deps.js';
import { liveRun } from './retention/expiry.js';
import { cancelLinkRun } from './link/offers.js';

/**
 * Cancel is a request. A queued run is cancelled at once and never reaches its agent; a running
 * run becomes `cancelling` and its dispatcher asks the agent to stop (the record then says what
 * happened); a run waiting on asks has them cancelled. Terminal runs never change. A run on a
 * thread bound to its head is cancelled only with a signed `proof` (`checkCancel`), checked before
 * anything says whether the run is cancellable; the key that asked is recorded on the run.
 */
export async function cancelRun(core: Core, runId: string, principal: Principal, proof?: unknown, requestId?: string): Promise<Result<Run>> {
  const run = await liveRun(core, await core.store.runs.getOf(principal.tenant, runId));
  if (!run) return refuse('run_not_found', `no run "${runId}"`);
  const by = await checkCancel(core, run, proof);
  if (!by.ok) return by;
  // Who asked, on the record with the cancel's write (its audit record is made from it).
  const request: NonNullable<Run['cancelRequest']> = {
    principal: principal.id,
    ...(principal.credentialId ? { credentialId: principal.credentialId } : {}),
    ...(requestId ? { requestId } : {}),
    at: new Date(core.clock.now()).toISOString(),
  };
  return cancelRead(core, run, principal, by.value, request);
}

async function cancelRead(core: Core, run: Run, principal: Principal, by: string | undefined, request: NonNullable<Run['cancelRequest']>): Promise<Result<Run>> {
  const { runId } = run;
  const again = async () => {
    const now = await core.store.runs.getOf(principal.tenant, runId);
    return now ? cancelRead(core, now, principal, by, request) : refuse('run_not_found', `no run "${runId}"`);
  };
  // Each write below is conditional on the status read; one that lost a race reads again.
  switch (run.status) {
    case 'queued': {
      const cancelled = await core.ledger.cancelQueued(run, by, request);
      return cancelled ? ok(cancelled) : again();
    }
    case 'running': {
      const cancelling = await core.ledger.requestCancel(runId, by, request);
      if (!cancelling) return again();
      // A run of an agent that dials out has no dispatcher listening: its provider is told here.
      if (cancelling.link && core.link) await cancelLinkRun(core as LinkCore, cancelling);
      return ok(cancelling);
    }
    case 'cancelling':
      return ok(run);
  }
  const open = openAsks(run);
  if (run.status === 'completed' && open.length > 0) {
    const closing: AskClosing = {};
    for (const ask of open) closing[ask.id] = { state: 'cancelled' };
    const closed = await core.ledger.closeAsks(runId, closing);
    return closed ? ok(closed) : again();
  }
  if (isTerminal(run.status)) return refuse('task_not_cancelable', `run "${runId}" has already ${run.status}`);
  return ok(run);
}
