export interface CoreSettings {
  /** At most this many runs wait `queued` per thread; the next is refused with `thread_queue_full`. */
  threadQueueLimit: number;
}

export const DEFAULT_CORE_SETTINGS: CoreSettings = { threadQueueLimit: 8 };
