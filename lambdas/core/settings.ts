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
}

export const DEFAULT_CORE_SETTINGS: CoreSettings = { threadQueueLimit: 8 };
