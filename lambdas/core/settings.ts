import type { Budget } from './model.js';
import type { RetentionPolicy } from './retention/policy.js';

export interface CoreSettings {
  /** At most this many runs wait `queued` per thread; the next is refused with `thread_queue_full`. */
  threadQueueLimit: number;
  /** Runs a tenant may start per clock minute; the next is refused with `tenant_rate_limited`. Absent: no limit. */
  tenantRunsPerMinute?: number;
  /**
   * Runs a tenant may have unsettled (queued or running) across its threads; the next is refused
   * with `tenant_concurrency_limited`. Absent: no limit.
   */
  tenantConcurrentRuns?: number;
  /** The budget of every tenant that has none of its own; absent, such tenants have none. */
  tenantBudget?: Budget;
  /** The provider link's clocks; each left out takes its default (`DEFAULT_LINK_SETTINGS`). */
  link?: Partial<LinkSettings>;
  /**
   * A dispatcher holds the run it relays by a lease (AWS, where a function's environment may die
   * mid-run); absent (one machine, whose restart fails such runs `orphaned_by_restart`), none.
   */
  lease?: LeaseSettings;
  /** How long the record keeps what it holds, for tenants with no policy of their own; each field left out takes `DEFAULT_RETENTION`'s. */
  retention?: Partial<RetentionPolicy>;
}

/** How a dispatcher holds its run (AWS: a Lambda environment may die mid-run; one machine's restart fails such runs itself). */
export interface LeaseSettings {
  /** A lease is renewed this often while its dispatcher relays: before a write of events once this much passed, and on a timer between. */
  renewMs: number;
  /** A lease not renewed for this long has lapsed: its dispatcher is taken for dead. */
  lapseMs: number;
}

export interface LinkSettings {
  /** An offer unanswered this long is offered again (to another provider when one has room). */
  offerMs: number;
  /** A run no provider took this long fails `no_provider_took_it`. */
  unclaimedMs: number;
  /** A provider whose link closed keeps its runs this long, for a reconnect that resumes them; then `provider_left_holding_it`. */
  graceMs: number;
  /** How often a provider says it is alive; a link silent for three of these is closed. */
  heartbeatMs: number;
  /** How far a proof's time may be from funduq's clock. */
  proofWindowMs: number;
}

export const DEFAULT_LINK_SETTINGS: LinkSettings = {
  offerMs: 5_000,
  unclaimedMs: 45_000,
  graceMs: 60_000,
  // API Gateway closes a WebSocket idle for 10 minutes; well inside that.
  heartbeatMs: 20_000,
  proofWindowMs: 60_000,
};

export const DEFAULT_CORE_SETTINGS: CoreSettings = { threadQueueLimit: 8 };
