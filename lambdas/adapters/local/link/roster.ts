import type { LinkConnection, LinkRoster } from '../../../core/ports.js';

/** The provider link's roster on one machine: the gateway's own links and the runs at each provider, in memory. */
export class InProcessLinkRoster implements LinkRoster {
  private readonly links = new Map<string, LinkConnection>();
  private readonly byProvider = new Map<string, string>();
  private readonly waits = new Map<string, Set<string>>();
  private readonly holds = new Map<string, Set<string>>();
  /** Listings so far, so providers of equal load take turns, also among offers made at once. */
  private turns = 0;

  async join(connection: LinkConnection): Promise<LinkConnection | undefined> {
    const previous = this.byProvider.get(connection.providerId);
    const replaced = previous === undefined ? undefined : this.links.get(previous);
    if (previous !== undefined) this.links.delete(previous);
    this.links.set(connection.connectionId, { ...connection, agents: [...connection.agents] });
    this.byProvider.set(connection.providerId, connection.connectionId);
    return replaced;
  }

  async leave(connectionId: string): Promise<LinkConnection | undefined> {
    const connection = this.links.get(connectionId);
    if (!connection) return undefined;
    this.links.delete(connectionId);
    if (this.byProvider.get(connection.providerId) === connectionId) this.byProvider.delete(connection.providerId);
    return connection;
  }

  async get(connectionId: string): Promise<LinkConnection | undefined> {
    return this.links.get(connectionId);
  }

  async ofProvider(providerId: string): Promise<LinkConnection | undefined> {
    const connectionId = this.byProvider.get(providerId);
    return connectionId === undefined ? undefined : this.links.get(connectionId);
  }

  async serve(connectionId: string, agents: string[]): Promise<void> {
    const connection = this.links.get(connectionId);
    if (connection) connection.agents = [...agents];
  }

  /** Least busy first (runs on offer or held); providers of equal load take turns being first. */
  async serving(agentId: string): Promise<LinkConnection[]> {
    const load = (c: LinkConnection) => this.holds.get(c.providerId)?.size ?? 0;
    const serving = [...this.links.values()].filter((c) => c.agents.includes(agentId));
    const turn = this.turns++ % Math.max(1, serving.length);
    const rotated = [...serving.slice(turn), ...serving.slice(0, turn)];
    return rotated.sort((a, b) => load(a) - load(b));
  }

  async wait(agentId: string, runId: string): Promise<void> {
    setOf(this.waits, agentId).add(runId);
  }

  async unwait(agentId: string, runId: string): Promise<void> {
    removeFrom(this.waits, agentId, runId);
  }

  async waiting(agentId: string): Promise<string[]> {
    return [...(this.waits.get(agentId) ?? [])];
  }

  async hold(providerId: string, runId: string): Promise<void> {
    setOf(this.holds, providerId).add(runId);
  }

  async drop(providerId: string, runId: string): Promise<void> {
    removeFrom(this.holds, providerId, runId);
  }

  async held(providerId: string): Promise<string[]> {
    return [...(this.holds.get(providerId) ?? [])];
  }
}

function setOf(map: Map<string, Set<string>>, key: string): Set<string> {
  let set = map.get(key);
  if (!set) map.set(key, (set = new Set()));
  return set;
}

function removeFrom(map: Map<string, Set<string>>, key: string, value: string): void {
  const set = map.get(key);
  set?.delete(value);
  if (set?.size === 0) map.delete(key);
}
