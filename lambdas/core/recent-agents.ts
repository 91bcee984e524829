import type { Agent } from './model.js';
import type { Clock } from './ports.js';

/** How long a definition read by this gateway is used without reading it again. */
export const RECENT_AGENT_MS = 2_000;
const MOST = 1_000;

/**
 * Agent definitions this gateway read moments ago. A run is dispatched right after it was
 * admitted, and a thread's next run right after the last: both use the definition read then
 * instead of reading it again on the way to the agent's first event. Admission always reads the
 * store, so a disabled or deleted agent takes no new run; a run admitted just before dispatches
 * with the definition it was admitted with, at most `RECENT_AGENT_MS` old.
 */
export class RecentAgents {
  private readonly seen = new Map<string, { agent: Agent; at: number }>();

  constructor(
    private readonly clock: Clock,
    private readonly forMs = RECENT_AGENT_MS,
  ) {}

  remember(agent: Agent): void {
    this.seen.delete(agent.id);
    this.seen.set(agent.id, { agent, at: this.clock.now() });
    // Oldest first in a Map: the least recently read goes when there are too many.
    if (this.seen.size > MOST) this.seen.delete(this.seen.keys().next().value as string);
  }

  recent(agentId: string): Agent | undefined {
    const entry = this.seen.get(agentId);
    if (!entry) return undefined;
    if (this.clock.now() - entry.at < this.forMs) return entry.agent;
    this.seen.delete(agentId);
    return undefined;
  }

  forget(agentId: string): void {
    this.seen.delete(agentId);
  }
}
