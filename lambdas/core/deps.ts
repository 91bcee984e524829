import type { RecentAgents } from './recent-agents.js';
import type { CoreSettings } from './settings.js';
import type { AskTimer, ChangeFeed, Clock, IdSource, Provider, RunStore, ThreadQueue } from './ports.js';

/** Everything the use cases reach the world through. */
export interface CoreDeps {
  store: RunStore;
  queue: ThreadQueue;
  timer: AskTimer;
  feed: ChangeFeed;
  /** Providers by kind (`demo`, `agui-http`, …): an agent's `provider.kind` picks one. */
  providers: Readonly<Record<string, Provider>>;
  clock: Clock;
  ids: IdSource;
  settings: CoreSettings;
  /** Definitions read moments ago, for a dispatch right after admission; absent, every dispatch reads. */
  recentAgents?: RecentAgents;
}

export function isoNow(deps: Pick<CoreDeps, 'clock'>): string {
  return new Date(deps.clock.now()).toISOString();
}
