import type { CoreDeps } from './deps.js';
import { ok, refuse, type Result } from './errors.js';
import type { Agent, RunStatus } from './model.js';

/** The statuses that hold a run on its agent: it was accepted and has not settled. */
const UNSETTLED: readonly RunStatus[] = ['queued', 'running', 'cancelling'];

/**
 * Removes an agent from the registry, unless it still has queued or running runs
 * (`agent_in_use`): cancel them or let them settle first. The check reads the runs through the
 * store's status listing, a scan on DynamoDB, which an admin act as rare as this can afford. It
 * is not atomic with the delete: a run accepted in between fails at dispatch with
 * `agent_not_found`, recorded on the run like any other failure, so nothing is lost unseen (or,
 * dispatched by another process within moments of its admission, runs on the definition it was
 * admitted with: see `RecentAgents`).
 */
export async function deleteAgent(deps: CoreDeps, agentId: string): Promise<Result<Agent>> {
  const agent = await deps.store.agents.get(agentId);
  if (!agent) return refuse('agent_not_found', `no agent named "${agentId}"`);
  const unsettled = await unsettledRuns(deps, agentId);
  if (unsettled > 0) {
    return refuse(
      'agent_in_use',
      `agent "${agentId}" has ${unsettled} queued or running run(s); cancel them or let them settle, then delete it`,
    );
  }
  await deps.store.agents.delete(agentId);
  deps.recentAgents?.forget(agentId);
  return ok(agent);
}

async function unsettledRuns(deps: CoreDeps, agentId: string): Promise<number> {
  const lists = await Promise.all(UNSETTLED.map((status) => deps.store.runs.listByStatus(status)));
  return lists.flat().filter((run) => run.agentId === agentId).length;
}
