import { deleteAgent } from './agents.js';
import { cancelRun } from './cancel-run.js';
import type { CoreDeps } from './deps.js';
import { dispatchRun } from './dispatch-run.js';
import { expireAsks } from './expire-asks.js';
import { followRun, RunWatch } from './follow-run.js';
import type { Agent, Principal, Run } from './model.js';
import { RecentAgents } from './recent-agents.js';
import { recover } from './recover.js';
import { startRun, type StartRunRequest } from './start-run.js';
import { threadView } from './thread-view.js';

/**
 * The core's use cases bound to one set of ports: what doors, dispatchers and timers call.
 * Each method is one use case; the functions stay importable on their own for tests.
 */
export function createGateway(given: CoreDeps) {
  const deps: CoreDeps = { ...given, recentAgents: given.recentAgents ?? new RecentAgents(given.clock) };
  return {
    deps,
    startRun: (request: StartRunRequest) => startRun(deps, request),
    dispatchRun: (runId: string, beside = false) => dispatchRun(deps, runId, beside),
    cancelRun: (runId: string, principal: Principal) => cancelRun(deps, runId, principal),
    expireAsks: (runId: string) => expireAsks(deps, runId),
    recover: () => recover(deps),
    /** Made before `startRun`, it lets the run's first reader start without reading the store. */
    watchRun: (runId: string) => new RunWatch(deps.feed, runId),
    followRun: (runId: string, afterSeq: number, signal?: AbortSignal, created?: { run: Run; watch: RunWatch }) =>
      followRun(deps, runId, afterSeq, signal, created),
    threadView: (threadId: string, principal: Principal) => threadView(deps, threadId, principal),
    getRun: async (runId: string, principal: Principal) => {
      const run = await deps.store.getRun(runId);
      return run && run.tenant === principal.tenant ? run : undefined;
    },
    putAgent: async (agent: Agent) => {
      await deps.store.putAgent(agent);
      deps.recentAgents?.forget(agent.id);
    },
    getAgent: (agentId: string) => deps.store.getAgent(agentId),
    listAgents: () => deps.store.listAgents(),
    deleteAgent: (agentId: string) => deleteAgent(deps, agentId),
  };
}

export type Gateway = ReturnType<typeof createGateway>;
