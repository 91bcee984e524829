import { BatchWriteCommand, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { StoreUnavailable } from '../../../../core/errors.js';
import type { StoredEvent } from '../../../../core/model.js';
import type { EventLog } from '../../../../core/ports.js';
import { delay, isConditionFailure, isThrottled, isUnavailable, type DynamoHandle } from './handle.js';
import type { Item } from './keys.js';

const KB = 1024;
/** BatchWriteItem takes at most 25 put requests. */
const BATCH_SIZE = 25;
/** Attempts of one batch while DynamoDB fails it (a server fault, no answer). */
const BATCH_ATTEMPTS = 5;
const BATCH_BACKOFF_MS = 50;
/**
 * The longest pause between two attempts of a batch DynamoDB throttles. A throttled batch is tried
 * again until it is stored, however long: a run's log is one partition (about 1,000 write units a
 * second), and a burst past that is slowed, not failed. Meanwhile the run's writer holds its agent
 * back (`RunLog`: it stops reading past its high water), and its lease is renewed on the runs table.
 */
const THROTTLED_BACKOFF_MS = 1_000;

/** Full jitter, capped (AWS's advice for throttling and UnprocessedItems). */
function backoff(attempt: number): number {
  return Math.random() * Math.min(THROTTLED_BACKOFF_MS, BATCH_BACKOFF_MS * 2 ** Math.min(attempt, 10));
}
/** Conditional puts of one `appendNew` call in flight at once. */
const NEW_EVENTS_IN_FLIGHT = 16;

/** Run events: the run_events table, an item per event under (`runId`, `seq`), its JSON as a string (`e`). */
export class DynamoEventLog implements EventLog {
  constructor(private readonly handle: DynamoHandle) {}

  async append(events: StoredEvent[]): Promise<void> {
    const batches: Item[][] = [];
    for (let i = 0; i < events.length; i += BATCH_SIZE) {
      // `e` is a string: one JSON.stringify here is far cheaper than marshalling the event as a map.
      batches.push(
        events.slice(i, i + BATCH_SIZE).map((stored) => {
          stored.json ??= JSON.stringify(stored.event);
          return { runId: stored.runId, seq: stored.seq, e: stored.json };
        }),
      );
    }
    // Every batch is done before the caller hears of one that failed: none is still on its way when
    // the caller writes after what is stored (a run's closing RUN_ERROR).
    const results = await Promise.allSettled(batches.map((batch) => this.writeBatch(batch)));
    const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (failed) throw failed.reason;
  }

  async appendNew(events: StoredEvent[]): Promise<number[]> {
    const taken: number[] = [];
    let next = 0;
    // One conditional PutItem per event (BatchWriteItem takes no conditions), a bounded number in
    // flight; each costs the write units a batched put would.
    const writer = async () => {
      while (next < events.length) {
        const stored = events[next++];
        stored.json ??= JSON.stringify(stored.event);
        const item = { runId: stored.runId, seq: stored.seq, e: stored.json };
        if (!(await this.putEventIfNew(item))) taken.push(stored.seq);
      }
    };
    const results = await Promise.allSettled(Array.from({ length: Math.min(NEW_EVENTS_IN_FLIGHT, events.length) }, writer));
    const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (failed) throw failed.reason;
    return taken.sort((a, b) => a - b);
  }

  async read(runId: string, afterSeq: number, limit?: number): Promise<StoredEvent[]> {
    const events: StoredEvent[] = [];
    let start: Item | undefined;
    do {
      const left = limit === undefined ? undefined : limit - events.length;
      if (left !== undefined && left <= 0) break;
      this.handle.sent.readRequests++;
      const page = await this.handle.doc.send(
        new QueryCommand({
          TableName: this.handle.tables.runEvents,
          KeyConditionExpression: 'runId = :run AND seq > :after',
          ExpressionAttributeValues: { ':run': runId, ':after': afterSeq },
          ScanIndexForward: true,
          // A reader woken by a change must see the write that woke it.
          ConsistentRead: true,
          Limit: left,
          ExclusiveStartKey: start,
        }),
      );
      for (const item of page.Items ?? []) {
        events.push({ runId, seq: item.seq as number, event: JSON.parse(item.e as string), json: item.e as string });
      }
      start = page.LastEvaluatedKey;
    } while (start);
    return events;
  }

  async lastSeq(runId: string): Promise<number> {
    this.handle.sent.readRequests++;
    const result = await this.handle.doc.send(
      new QueryCommand({
        TableName: this.handle.tables.runEvents,
        KeyConditionExpression: 'runId = :run',
        ExpressionAttributeValues: { ':run': runId },
        ProjectionExpression: 'seq',
        ScanIndexForward: false,
        ConsistentRead: true,
        Limit: 1,
      }),
    );
    return (result.Items?.[0]?.seq as number | undefined) ?? 0;
  }

  /** False when the seq was stored already. Throttling and outages are retried as a batch's are. */
  private async putEventIfNew(item: Item): Promise<boolean> {
    let failures = 0;
    for (let attempt = 1; ; attempt++) {
      this.handle.sent.writeRequests++;
      this.handle.sent.writeUnits += eventUnits(item);
      try {
        await this.handle.doc.send(
          new PutCommand({ TableName: this.handle.tables.runEvents, Item: item, ConditionExpression: 'attribute_not_exists(seq)' }),
        );
        return true;
      } catch (err) {
        if (isConditionFailure(err)) return false;
        if (!isUnavailable(err)) throw err;
        if (!isThrottled(err) && ++failures === BATCH_ATTEMPTS) {
          throw new StoreUnavailable(`run_events did not take event ${String(item.seq)} after ${BATCH_ATTEMPTS} attempts: ${(err as Error).message}`, { cause: err });
        }
        await delay(backoff(attempt));
      }
    }
  }

  private async writeBatch(batch: Item[]): Promise<void> {
    const table = this.handle.tables.runEvents;
    let pending = batch;
    // Failures other than throttling are counted apart: only they use up the batch's attempts.
    let failures = 0;
    for (let attempt = 1; ; attempt++) {
      this.handle.sent.writeRequests++;
      for (const item of pending) this.handle.sent.writeUnits += eventUnits(item);
      let unprocessed: Item[];
      try {
        const result = await this.handle.doc.send(
          new BatchWriteCommand({ RequestItems: { [table]: pending.map((Item) => ({ PutRequest: { Item } })) } }),
        );
        // Items handed back unprocessed are DynamoDB's throttling of part of a batch.
        unprocessed = (result.UnprocessedItems?.[table] ?? []).flatMap((request) => (request.PutRequest?.Item ? [request.PutRequest.Item] : []));
      } catch (err) {
        if (!isUnavailable(err)) throw err;
        if (!isThrottled(err) && ++failures === BATCH_ATTEMPTS) {
          throw new StoreUnavailable(`run_events did not take ${pending.length} events after ${BATCH_ATTEMPTS} attempts: ${(err as Error).message}`, { cause: err });
        }
        // Throttling that outlasted the SDK's own retries, or no answer: putting the same events
        // again is harmless (same keys, same items), so the whole batch goes again.
        unprocessed = pending;
      }
      if (unprocessed.length === 0) return;
      await delay(backoff(attempt));
      pending = unprocessed;
    }
  }
}

/** The size of a run_events item without serialising it again: `e` is already its JSON. */
function eventUnits(item: Item): number {
  const bytes = 'runIdseqe'.length + Buffer.byteLength(item.runId as string) + String(item.seq).length + Buffer.byteLength(item.e as string);
  return Math.max(1, Math.ceil(bytes / KB));
}
