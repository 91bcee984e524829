import type { Agent } from './model.js';
import type { Clock, RunStore } from './ports.js';

/** How long a definition (or a tenant's budget) read by this gateway is used without reading it again. */
export const RECENT_AGENT_MS = 2_000;
const MOST = 1_000;

/** Things read moments ago, by key, each used until it is `forMs` old; the least recently read go first past `MOST`. */
export class Recent<T> {
  private readonly seen = new Map<string, { value: T; at: number }>();

  constructor(
    private readonly clock: Pick<Clock, 'now'>,
    private readonly forMs = RECENT_AGENT_MS,
  ) {}

  keep(key: string, value: T): void {
    this.seen.delete(key);
    this.seen.set(key, { value, at: this.clock.now() });
    // Oldest first in a Map: the least recently read goes when there are too many.
    if (this.seen.size > MOST) this.seen.delete(this.seen.keys().next().value as string);
  }

  recent(key: string): T | undefined {
    const entry = this.seen.get(key);
    if (!entry) return undefined;
    if (this.clock.now() - entry.at < this.forMs) return entry.value;
    this.seen.delete(key);
    return undefined;
  }

  forget(key: string): void {
    this.seen.delete(key);
  }
}

/**
 * Agent definitions this gateway read moments ago. A run is dispatched right after it was
 * admitted, and a thread's next run right after the last: both use the definition read then
 * instead of reading it again on the way to the agent's first event. Admission always reads the
 * store, so a disabled or deleted agent takes no new run; a run admitted just before dispatches
 * with the definition it was admitted with, at most `RECENT_AGENT_MS` old.
 */
export class RecentAgents extends Recent<Agent> {
  remember(agent: Agent): void {
    this.keep(agent.id, agent);
  }
}

/**
 * The agent as a dispatch uses it: a definition read within `RECENT_AGENT_MS`, else the store's
 * (remembered from then on). A remembered one is not remembered again, so its age is the age of
 * the read: a dispatcher that never admits (AWS) still reads again every `RECENT_AGENT_MS`.
 */
export async function agentForDispatch(
  deps: { store: Pick<RunStore, 'agents'>; recentAgents?: RecentAgents },
  agentId: string,
): Promise<Agent | undefined> {
  const recent = deps.recentAgents?.recent(agentId);
  if (recent) return recent;
  const agent = await deps.store.agents.get(agentId);
  if (agent) deps.recentAgents?.remember(agent);
  return agent;
}
