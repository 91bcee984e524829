import type { ChangeFeed, RunStore } from './ports.js';
import type { AgUiEventRecord, StoredEvent } from './model.js';

/** Past this many unwritten events the relay waits for the store instead of buffering more. */
const HIGH_WATER = 2_000;
/**
 * The most events one write takes (four DynamoDB batches, written in parallel). A burst that
 * arrived whole is stored in slices, so readers get the first slice while the next is written
 * instead of nothing until the whole burst is stored.
 */
const MOST_PER_WRITE = 100;

/**
 * Numbers a run's events and stores them before anyone sees them. Writes are group-committed:
 * while one write is in flight, the events that arrive meanwhile become the next batch, so a
 * slow stream is written event by event (low latency) and a fast one in batches (throughput).
 */
export class EventRecorder {
  private seq: number;
  private pending: StoredEvent[] = [];
  private writing: Promise<void> | undefined;
  private failure: unknown;

  constructor(
    private readonly runId: string,
    lastSeq: number,
    private readonly store: RunStore,
    private readonly feed: ChangeFeed,
  ) {
    this.seq = lastSeq;
  }

  get lastSeq(): number {
    return this.seq;
  }

  /** Takes the next event; resolves at once unless the store has fallen far behind. */
  async record(event: AgUiEventRecord): Promise<void> {
    if (this.failure !== undefined) throw this.failure;
    this.pending.push({ runId: this.runId, seq: ++this.seq, event });
    this.writing ??= this.drain();
    if (this.pending.length >= HIGH_WATER) await this.writing;
  }

  /** Resolves when every recorded event is stored; throws what the store threw. */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
    if (this.failure !== undefined) throw this.failure;
  }

  private async drain(): Promise<void> {
    try {
      while (this.pending.length > 0) {
        const batch = this.pending.length > MOST_PER_WRITE ? this.pending.splice(0, MOST_PER_WRITE) : this.pending;
        if (batch === this.pending) this.pending = [];
        await this.store.appendEvents(batch);
        this.feed.publish({ kind: 'events', runId: this.runId, events: batch });
      }
    } catch (error) {
      this.failure = error;
      this.pending = [];
    } finally {
      this.writing = undefined;
    }
  }
}
