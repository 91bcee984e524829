import type { Core } from './deps.js';
import { dispatchRun } from './dispatch-run.js';
import { RunHold } from './lease.js';
import type { Agent, Run } from './model.js';

/**
 * A run admitted on an idle thread (it holds the thread's only place) is relayed by the door that
 * admitted it, where the door takes it (`CoreDeps.doorRelay`, AWS's streaming doors): the door
 * takes the run's lease before the run is recorded and its message queued, so the dispatcher that
 * receives the message finds the door's lease and keeps the message until the run settles, and
 * the thread's later runs wait behind it as they would behind a dispatcher's. A door that dies
 * leaves its lease to lapse: a run it had started is failed `dispatch_lost`, one it had not is
 * delivered again by the sweep. An agent that dials out is offered by a dispatcher, never here;
 * and without leases (one machine) nothing fences a door from a dispatcher.
 */
export async function claimAtDoor(core: Core, runId: string, agent: Agent): Promise<RunHold | undefined> {
  const lease = core.settings.lease;
  if (!core.doorRelay || !lease) return undefined;
  const provider = core.providers[agent.provider.kind];
  if (!provider || 'linked' in provider) return undefined;
  // The lease names its holder, so a door late past its lapse renews and ends only its own. Until
  // the relay begins, nothing runs that a lost lease could stop.
  const holder = { receipt: `door:${core.ids.newId()}`, door: true };
  // Refused, a lease is held already: an earlier attempt's of this request (its door may still be
  // at work). The run then goes to a dispatcher, which finds that lease names no holder the run does.
  return RunHold.take(core, runId, holder, lease, () => undefined);
}

/** The relay of a run whose door claimed it (`claimAtDoor`), kept going by the door's function until the run settles. */
export function relayAtDoor(core: Core, run: Run, hold: RunHold): void {
  const relay = core.doorRelay;
  if (!relay) return;
  relay.keep(dispatchRun(core, run.runId, { atDoor: hold, deadline: () => relay.deadline(), ...(run.context ? { context: run.context } : {}) }));
}
