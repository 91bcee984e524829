import type { RunContext } from '../../core/model.js';
import type { ThreadMessage, ThreadQueue } from '../../core/ports.js';

/** `beside` is true for an interjection handed over outside its thread's order; `context` is what the message carried. */
type Consumer = (runId: string, delivery: { beside: boolean; context?: RunContext }) => Promise<unknown>;

/**
 * The inbound gap on one machine: a FIFO per thread, like an SQS FIFO message group. A thread's
 * next run is handed to the consumer only after the previous hand-off returned; threads run in
 * parallel. What is queued lives in the store too, so a restart re-queues it (see `recover`).
 */
export class InProcessThreadQueue implements ThreadQueue {
  private readonly tails = new Map<string, Promise<void>>();
  private readonly waiting: ThreadMessage[] = [];
  private readonly beside = new Set<Promise<void>>();
  private consumer: Consumer | undefined;
  /** Hand-offs in progress from the threads' queues, and those waiting for one to end. */
  private running = 0;
  private readonly turns: (() => void)[] = [];

  /**
   * `maxRunning`: at most this many runs are handed over from the threads' queues at once (SQS's
   * event source maximum concurrency, on one machine): a restart that finds many queued runs, or
   * a burst of threads, runs them a few at a time rather than holding every run's input at once.
   * Interjections are handed over beside, as on AWS.
   */
  constructor(
    private readonly onError: (error: unknown, runId: string) => void = () => {},
    private readonly maxRunning = Number.POSITIVE_INFINITY,
  ) {}

  /** Starts delivering (what was enqueued before is delivered now, in order). */
  start(consumer: Consumer): void {
    this.consumer = consumer;
    for (const message of this.waiting.splice(0)) this.deliver(message);
  }

  async enqueue(message: ThreadMessage): Promise<void> {
    if (this.consumer) this.deliver(message);
    else this.waiting.push(message);
  }

  async dispatchBeside({ runId, context }: ThreadMessage): Promise<void> {
    const consume = this.consumer;
    if (!consume) throw new Error('the thread queue is not started');
    const handed = consume(runId, { beside: true, ...(context ? { context } : {}) }).then(
      () => undefined,
      (error: unknown) => this.onError(error, runId),
    );
    this.beside.add(handed);
    void handed.then(() => this.beside.delete(handed));
  }

  /** Holds nothing to let go: on one machine a link run's dispatcher holds its thread's turn until it settles. */
  async release(): Promise<void> {}

  /** Resolves when every thread's queue is empty and no interjection is being dispatched. */
  async idle(): Promise<void> {
    while (this.tails.size > 0 || this.beside.size > 0) await Promise.all([...this.tails.values(), ...this.beside]);
  }

  private deliver({ threadId, runId, context }: ThreadMessage): void {
    const consume = this.consumer!;
    const previous = this.tails.get(threadId) ?? Promise.resolve();
    const next = previous.then(async () => {
      await this.turn();
      try {
        await consume(runId, { beside: false, ...(context ? { context } : {}) });
      } catch (error) {
        this.onError(error, runId);
      } finally {
        // The place passes to the longest waiting hand-off, if any.
        const waiting = this.turns.shift();
        if (waiting) waiting();
        else this.running -= 1;
      }
    });
    this.tails.set(threadId, next);
    void next.then(() => {
      if (this.tails.get(threadId) === next) this.tails.delete(threadId);
    });
  }

  /** Resolves when a hand-off may begin (one more is counted running). */
  private async turn(): Promise<void> {
    if (this.running >= this.maxRunning) await new Promise<void>((resolve) => this.turns.push(resolve));
    else this.running += 1;
  }
}
