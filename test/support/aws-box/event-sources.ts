import { pause, type LatencyModel } from './latency.js';
import type { BoxClock } from './clock.js';
import type { DynamoDbService, StreamRecord } from './dynamodb.js';
import type { Iam } from './iam.js';
import { TooManyRequests, type InvokeOutcome, type LambdaFunction, type LambdaService } from './lambda.js';
import { wireMessage, type QueuedMessage, type SqsService } from './sqs.js';
import { REGION, type Deployment } from './template.js';

interface Mapping {
  id: string;
  fn: LambdaFunction;
  source: string;
  props: Record<string, any>;
}

/**
 * Lambda's event source mappings of the template, each polling its source with the mapping's own
 * settings: SQS (batch size, maximum concurrency, partial-batch responses) and DynamoDB streams
 * (batch size, batching window, filters, bisection on error, retries, partial-batch responses,
 * the on-failure destination). The execution role must allow the mapping's reads, as Lambda checks
 * when the mapping is created.
 */
export class EventSources {
  private readonly stops: Array<() => void> = [];
  private closed = false;
  /** How long a queue's batch waits for its poller's hand-off (`BoxOptions.latency`); none, at once. */
  latency: LatencyModel | undefined;
  /** Batches handed to each function, for tests that look at what a poller did. */
  readonly batches: Array<{ handler: string; size: number; outcome: 'ok' | 'partial' | 'error' | 'throttled' }> = [];

  constructor(
    private readonly deployment: Deployment,
    private readonly lambda: LambdaService,
    private readonly sqs: SqsService,
    private readonly dynamodb: DynamoDbService,
    private readonly iam: Iam,
    private readonly clock: BoxClock,
  ) {}

  /** Creates every mapping; a role that cannot read its source fails the deploy, as CreateEventSourceMapping does. */
  start(): void {
    const mappings: Mapping[] = this.deployment.resources('AWS::Lambda::EventSourceMapping').map(([id, resource]) => {
      const props = this.deployment.resolve(resource.Properties);
      return { id, fn: this.lambda.fn(props.FunctionName), source: props.EventSourceArn, props };
    });
    for (const mapping of mappings) {
      const caller = { name: mapping.fn.handler, roleId: mapping.fn.roleId };
      const needs = mapping.source.startsWith('arn:aws:sqs:')
        ? ['sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes'].map((action) => [action, mapping.source])
        : [
            ...['dynamodb:DescribeStream', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator'].map((action) => [action, mapping.source]),
            ['dynamodb:ListStreams', '*'],
            ...(mapping.props.DestinationConfig?.OnFailure?.Destination ? [['sqs:SendMessage', mapping.props.DestinationConfig.OnFailure.Destination]] : []),
          ];
      for (const [action, resource] of needs) {
        const denied = this.iam.check(caller, action, resource);
        if (denied) throw new Error(`the event source mapping ${mapping.id} cannot be created: ${denied}`);
      }
    }
    for (const mapping of mappings) {
      this.stops.push(mapping.source.startsWith('arn:aws:sqs:') ? this.pollQueue(mapping) : this.pollStream(mapping));
    }
  }

  close(): void {
    this.closed = true;
    for (const stop of this.stops) stop();
  }

  private pollQueue(mapping: Mapping): () => void {
    const queue = this.sqs.queue(mapping.source);
    const batchSize: number = mapping.props.BatchSize ?? 10;
    // Without a maximum, the poller scales up to the function's concurrency (1,250 pollers at most).
    const maximum: number = mapping.props.ScalingConfig?.MaximumConcurrency ?? 1250;
    const partial = (mapping.props.FunctionResponseTypes ?? []).includes('ReportBatchItemFailures');
    let inFlight = 0;
    const poll = () => {
      while (!this.closed && inFlight < maximum) {
        const messages = this.sqs.receive(queue, batchSize);
        if (messages.length === 0) return;
        inFlight += 1;
        void this.deliver(mapping, messages, partial).finally(() => {
          inFlight -= 1;
          poll();
        });
      }
    };
    const unsubscribe = this.sqs.onChange(queue, poll);
    poll();
    return unsubscribe;
  }

  private async deliver(mapping: Mapping, messages: QueuedMessage[], partial: boolean): Promise<void> {
    // The mapping's poller takes a while to hand a batch over (`BoxOptions.latency`).
    if (mapping.source.startsWith('arn:aws:sqs:')) await pause(this.latency?.queueHandOffMs);
    const queue = this.sqs.queue(mapping.source);
    const event = {
      Records: messages.map((message) => {
        const wire = wireMessage(message) as { MessageId: string; ReceiptHandle: string; Body: string; MD5OfBody: string; Attributes: Record<string, string> };
        return {
          messageId: wire.MessageId,
          receiptHandle: wire.ReceiptHandle,
          body: wire.Body,
          attributes: wire.Attributes,
          messageAttributes: {},
          md5OfBody: wire.MD5OfBody,
          eventSource: 'aws:sqs',
          eventSourceARN: mapping.source,
          awsRegion: REGION,
        };
      }),
    };
    const outcome = await this.invokeWhileVisible(mapping.fn, event, Math.min(...messages.map((m) => m.invisibleUntil)));
    if (!outcome) return;
    if (!outcome.ok) {
      this.batches.push({ handler: mapping.fn.handler, size: messages.length, outcome: 'error' });
      return;
    }
    const failed = new Set<string>(partial ? ((safeJson(outcome.payload)?.batchItemFailures ?? []) as Array<{ itemIdentifier: string }>).map((f) => f.itemIdentifier) : []);
    this.batches.push({ handler: mapping.fn.handler, size: messages.length, outcome: failed.size > 0 ? 'partial' : 'ok' });
    // A reported failure stays in flight until its visibility timeout ends, as on SQS.
    for (const message of messages) if (!failed.has(message.messageId)) this.sqs.delete(queue, message.receiptHandle!);
  }

  /**
   * A throttled invoke is retried with backoff for as long as the messages stay invisible; once
   * their visibility timeout ends they are back in the queue (one receive used up) and this
   * attempt is given up.
   */
  private async invokeWhileVisible(fn: LambdaFunction, event: unknown, visibleAt: number): Promise<InvokeOutcome | undefined> {
    for (let delay = 1_000; ; delay = Math.min(delay * 2, 60_000)) {
      try {
        return await this.lambda.invoke(fn.handler, event);
      } catch (error) {
        if (!(error instanceof TooManyRequests)) throw error;
        this.batches.push({ handler: fn.handler, size: (event as { Records: unknown[] }).Records.length, outcome: 'throttled' });
        if (this.closed || this.clock.now() + delay >= visibleAt) return undefined;
        await this.clock.sleep(delay);
      }
    }
  }

  private pollStream(mapping: Mapping): () => void {
    const table = this.dynamodb.tableByStreamArn(mapping.source);
    const props = mapping.props;
    const filters = ((props.FilterCriteria?.Filters ?? []) as Array<{ Pattern: string }>).map((f) => JSON.parse(f.Pattern) as Record<string, unknown>);
    const batchSize: number = props.BatchSize ?? 100;
    const windowMs = (props.MaximumBatchingWindowInSeconds ?? 0) * 1000;
    // LATEST: the records written after the mapping was created.
    let position = table.stream.length;
    let wake: (() => void) | undefined;
    const listener = () => wake?.();
    table.listeners.add(listener);
    const stop = new AbortController();
    const waitForRecords = () => new Promise<void>((resolve) => {
      if (table.stream.length > position || stop.signal.aborted) return resolve();
      const onAbort = () => resolve();
      wake = () => {
        stop.signal.removeEventListener('abort', onAbort);
        resolve();
      };
      stop.signal.addEventListener('abort', onAbort, { once: true });
    });
    void (async () => {
      while (!stop.signal.aborted) {
        await waitForRecords();
        wake = undefined;
        if (stop.signal.aborted) return;
        if (windowMs > 0 && table.stream.length - position < batchSize) await this.clock.sleep(windowMs, stop.signal);
        const batch = table.stream.slice(position, position + batchSize);
        position += batch.length;
        const matching = batch.filter((record) => filters.length === 0 || filters.some((pattern) => matches(pattern, record)));
        if (matching.length > 0) await this.processStreamBatch(mapping, matching, stop.signal);
      }
    })();
    return () => {
      stop.abort();
      table.listeners.delete(listener);
    };
  }

  private async processStreamBatch(mapping: Mapping, records: StreamRecord[], signal: AbortSignal): Promise<void> {
    const props = mapping.props;
    const retries: number = props.MaximumRetryAttempts ?? -1;
    const bisect = props.BisectBatchOnFunctionError === true;
    const partial = (props.FunctionResponseTypes ?? []).includes('ReportBatchItemFailures');
    let pending = records;
    for (let attempt = 0; pending.length > 0 && !signal.aborted; attempt += 1) {
      let outcome: InvokeOutcome;
      try {
        outcome = await this.lambda.invoke(mapping.fn.handler, { Records: pending });
      } catch (error) {
        if (!(error instanceof TooManyRequests)) throw error;
        this.batches.push({ handler: mapping.fn.handler, size: pending.length, outcome: 'throttled' });
        await this.clock.sleep(1_000, signal);
        attempt -= 1;
        continue;
      }
      if (outcome.ok) {
        const failures = partial ? ((safeJson(outcome.payload)?.batchItemFailures ?? []) as Array<{ itemIdentifier: string }>) : [];
        if (failures.length === 0) {
          this.batches.push({ handler: mapping.fn.handler, size: pending.length, outcome: 'ok' });
          return;
        }
        this.batches.push({ handler: mapping.fn.handler, size: pending.length, outcome: 'partial' });
        // Lambda resumes from the lowest sequence number reported: the records before it are done.
        const lowest = failures.map((f) => BigInt(f.itemIdentifier)).reduce((a, b) => (a < b ? a : b));
        pending = pending.filter((record) => BigInt(record.dynamodb.SequenceNumber) >= lowest);
      } else {
        this.batches.push({ handler: mapping.fn.handler, size: pending.length, outcome: 'error' });
        if (bisect && pending.length > 1) {
          const half = Math.ceil(pending.length / 2);
          await this.processStreamBatch(mapping, pending.slice(0, half), signal);
          await this.processStreamBatch(mapping, pending.slice(half), signal);
          return;
        }
      }
      if (retries >= 0 && attempt >= retries) {
        this.toFailureDestination(mapping, pending);
        return;
      }
      await this.clock.sleep(500, signal);
    }
  }

  private toFailureDestination(mapping: Mapping, records: StreamRecord[]): void {
    const destination = mapping.props.DestinationConfig?.OnFailure?.Destination as string | undefined;
    if (!destination) return;
    this.sqs.send(this.sqs.queue(destination), {
      MessageBody: JSON.stringify({
        requestContext: { functionArn: mapping.fn.arn, condition: 'RetryAttemptsExhausted', approximateInvokeCount: 1 },
        DDBStreamBatchInfo: {
          shardId: 'shardId-00000000000000000000-box',
          startSequenceNumber: records[0].dynamodb.SequenceNumber,
          endSequenceNumber: records.at(-1)!.dynamodb.SequenceNumber,
          batchSize: records.length,
          streamArn: mapping.source,
        },
      }),
    });
  }
}

/** An event filter pattern (Lambda event filtering): each key's list of accepted values, nested objects matched within. */
function matches(pattern: Record<string, unknown>, value: unknown): boolean {
  return Object.entries(pattern).every(([key, expected]) => {
    const actual = (value as Record<string, unknown> | undefined)?.[key];
    if (Array.isArray(expected)) return expected.some((option) => option === actual);
    return typeof expected === 'object' && expected !== null && matches(expected as Record<string, unknown>, actual);
  });
}

function safeJson(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
