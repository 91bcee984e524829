import type { PushSenderSettings } from '../adapters/http/push-sender.js';
import type { PushNotification, PushSender } from '../core/ports.js';

/**
 * The push sender on AWS: 3 tries of at most 5 s each, 1 s and 2 s apart, so 18 s at worst for one
 * notification. The stream handler delivers inside its invocation, and a notification's tries must
 * end well within the function's timeout: a timed-out invocation fails its whole batch, whose retry
 * sends again what was already delivered. (Locally the sender keeps its longer defaults.)
 */
export const PUSH_SENDER_SETTINGS = {
  attempts: 3,
  firstRetryMs: 1_000,
  timeoutMs: 5_000,
} as const satisfies Partial<PushSenderSettings>;

/** The stream handler's Lambda timeout: room for several notifications tried to the last. */
export const STREAM_HANDLER_TIMEOUT_SECONDS = 120;

/** Kept back from the deadline for what follows a send: recording a dead letter, answering Lambda. */
export const DELIVERY_MARGIN_MS = 5_000;

type Budget = Pick<PushSenderSettings, 'attempts' | 'firstRetryMs' | 'timeoutMs'>;

/** The longest one notification may take: every try to its timeout, and the backoff between them. */
export function longestSendMs({ attempts, firstRetryMs, timeoutMs }: Budget): number {
  return attempts * timeoutMs + firstRetryMs * (2 ** (attempts - 1) - 1);
}

/** A notification was not started: its tries could have outlasted the invocation. */
export class OutOfTime extends Error {
  constructor(remainingMs: number, neededMs: number) {
    super(`${remainingMs} ms left in the invocation, a notification may take ${neededMs} ms`);
    this.name = 'OutOfTime';
  }
}

/**
 * The push sender for one invocation of the stream handler, over the container's sender.
 * - It starts no notification whose tries could outlast the invocation: it throws instead, the
 *   stream handler reports the change back, and Lambda retries the batch from that record.
 * - A config whose notification used up every try is not tried again in this invocation: its later
 *   notifications are dead-lettered at once. A shard's records are handled one at a time, so a
 *   receiver that is down would otherwise cost every one of its notifications the full tries and
 *   hold up everyone else's on the shard (and could never finish a long change within a timeout).
 */
export class InvocationPushSender implements PushSender {
  delivered = 0;
  undelivered = 0;
  private readonly down = new Map<string, string>();
  private readonly neededMs: number;

  constructor(
    private readonly sender: PushSender,
    private readonly budget: Budget,
    private readonly remainingMs: () => number,
  ) {
    this.neededMs = longestSendMs(budget) + DELIVERY_MARGIN_MS;
  }

  vet(url: string): Promise<string | undefined> {
    return this.sender.vet(url);
  }

  async send(notification: PushNotification): Promise<{ delivered: true } | { delivered: false; attempts: number; error: string }> {
    const config = JSON.stringify([notification.config.taskId, notification.config.configId]);
    const earlier = this.down.get(config);
    if (earlier !== undefined) {
      this.undelivered += 1;
      return { delivered: false, attempts: 0, error: `not tried: an earlier notification to this config failed in the same batch (${earlier})` };
    }
    const remaining = this.remainingMs();
    if (remaining < this.neededMs) throw new OutOfTime(remaining, this.neededMs);
    const result = await this.sender.send(notification);
    if (result.delivered) {
      this.delivered += 1;
      return result;
    }
    this.undelivered += 1;
    // A final answer before the last try (a 4xx, a refused address) may concern this notification only.
    if (result.attempts >= this.budget.attempts) this.down.set(config, result.error);
    return result;
  }
}
