import { createHash, randomUUID } from 'node:crypto';
import type { AwsCall, AwsService, Reply } from './aws-endpoint.js';
import type { BoxClock } from './clock.js';
import { ACCOUNT, REGION, type Deployment } from './template.js';

/** SQS FIFO's deduplication interval (SendMessage, MessageDeduplicationId). */
const DEDUPLICATION_MS = 5 * 60_000;

export interface QueuedMessage {
  messageId: string;
  body: string;
  groupId?: string;
  deduplicationId?: string;
  sequenceNumber: string;
  sentAt: number;
  firstReceivedAt?: number;
  /** When its current receive was (SQS keeps a message in flight at most 12 hours from it). */
  receivedAt?: number;
  receiveCount: number;
  invisibleUntil: number;
  receiptHandle?: string;
}

interface Queue {
  name: string;
  url: string;
  arn: string;
  fifo: boolean;
  groupScope: boolean;
  visibilityTimeoutMs: number;
  redrive?: { target: string; maxReceiveCount: number };
  messages: QueuedMessage[];
  deduplication: Map<string, { messageId: string; sequenceNumber: string; at: number }>;
  listeners: Set<() => void>;
}

/**
 * SQS, as the thread queue uses it: a small stand-in that speaks the JSON protocol of the current
 * SDK. `sqslite` answers that protocol with HTTP 415 and does not keep FIFO order, hence this one.
 * FIFO rules: a group's next message is received only while none of the group is in flight, in
 * arrival order; a deduplication id is remembered for 5 minutes (per group with the
 * `messageGroup` scope); the visibility timeout, receive count and redrive to the dead-letter
 * queue after `maxReceiveCount` receives follow the template.
 */
export class SqsService implements AwsService {
  readonly queues = new Map<string, Queue>();
  private sequence = 10_000_000_000_000_000_000n;

  constructor(
    deployment: Deployment,
    private readonly clock: BoxClock,
  ) {
    for (const [id, resource] of deployment.resources('AWS::SQS::Queue')) {
      const props = deployment.resolve(resource.Properties);
      const name = deployment.physicalName(id);
      this.queues.set(name, {
        name,
        url: deployment.ref(id),
        arn: deployment.attribute(id, 'Arn'),
        fifo: props.FifoQueue === true,
        groupScope: props.DeduplicationScope === 'messageGroup',
        visibilityTimeoutMs: (props.VisibilityTimeout ?? 30) * 1000,
        redrive: props.RedrivePolicy
          ? { target: String(props.RedrivePolicy.deadLetterTargetArn).split(':').at(-1)!, maxReceiveCount: Number(props.RedrivePolicy.maxReceiveCount) }
          : undefined,
        messages: [],
        deduplication: new Map(),
        listeners: new Set(),
      });
    }
    // Messages whose visibility ends become receivable: wake the pollers then.
    clock.onAdvance(() => this.wakeAll());
  }

  queue(nameOrUrlOrArn: string): Queue {
    const name = nameOrUrlOrArn.split(/[/:]/).at(-1)!;
    const queue = this.queues.get(name);
    if (!queue) throw Object.assign(new Error(`The specified queue does not exist: ${nameOrUrlOrArn}`), { code: 'QueueDoesNotExist' });
    return queue;
  }

  authorize(call: AwsCall): Array<{ action: string; resource: string }> {
    const body = call.body as { QueueUrl?: string; QueueName?: string };
    const target = body.QueueUrl ?? body.QueueName ?? '';
    const arn = this.queues.get(target.split('/').at(-1)!)?.arn ?? `arn:aws:sqs:${REGION}:${ACCOUNT}:${target.split('/').at(-1)}`;
    return [{ action: `sqs:${call.operation}`, resource: arn }];
  }

  async handle(call: AwsCall): Promise<Reply> {
    const body = call.body as Record<string, any>;
    try {
      switch (call.operation) {
        case 'SendMessage':
          return json(this.send(this.queue(body.QueueUrl), body as { MessageBody: string }));
        case 'GetQueueUrl':
          return json({ QueueUrl: this.queue(body.QueueName).url });
        case 'DeleteMessage':
          this.delete(this.queue(body.QueueUrl), body.ReceiptHandle);
          return json({});
        case 'ChangeMessageVisibility':
          this.changeVisibility(this.queue(body.QueueUrl), body.ReceiptHandle, Number(body.VisibilityTimeout));
          return json({});
        case 'ReceiveMessage': {
          const messages = this.receive(this.queue(body.QueueUrl), body.MaxNumberOfMessages ?? 1);
          return json({ Messages: messages.map((m) => wireMessage(m)) });
        }
        default:
          return sqsError(400, 'InvalidAction', `the box's SQS does not serve ${call.operation}`);
      }
    } catch (error) {
      const code = (error as { code?: string }).code ?? 'InvalidParameterValue';
      return sqsError(400, code, (error as Error).message);
    }
  }

  send(queue: Queue, input: { MessageBody: string; MessageGroupId?: string; MessageDeduplicationId?: string; DelaySeconds?: number }): { MessageId: string; MD5OfMessageBody: string; SequenceNumber?: string } {
    const md5 = createHash('md5').update(input.MessageBody).digest('hex');
    if (queue.fifo) {
      if (!input.MessageGroupId) throw Object.assign(new Error('The request must contain the parameter MessageGroupId.'), { code: 'MissingParameter' });
      if (!input.MessageDeduplicationId) throw Object.assign(new Error('The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly'), { code: 'InvalidParameterValue' });
      const key = queue.groupScope ? `${input.MessageGroupId}\u0000${input.MessageDeduplicationId}` : input.MessageDeduplicationId;
      const earlier = queue.deduplication.get(key);
      if (earlier && this.clock.now() - earlier.at < DEDUPLICATION_MS) {
        return { MessageId: earlier.messageId, MD5OfMessageBody: md5, SequenceNumber: earlier.sequenceNumber };
      }
      const message = this.enqueue(queue, input.MessageBody, input.MessageGroupId, input.MessageDeduplicationId);
      queue.deduplication.set(key, { messageId: message.messageId, sequenceNumber: message.sequenceNumber, at: this.clock.now() });
      return { MessageId: message.messageId, MD5OfMessageBody: md5, SequenceNumber: message.sequenceNumber };
    }
    // A standard queue's per-message delay (DelaySeconds, at most 15 minutes).
    const delay = Number(input.DelaySeconds ?? 0);
    if (delay > 900) throw Object.assign(new Error('Value for parameter DelaySeconds is invalid. Reason: must be between 0 and 900.'), { code: 'InvalidParameterValue' });
    const message = this.enqueue(queue, input.MessageBody, undefined, undefined, delay * 1000);
    return { MessageId: message.messageId, MD5OfMessageBody: md5 };
  }

  /**
   * ChangeMessageVisibility of a message in flight: visible again at once (0) or later, within 12
   * hours of its receive. A receipt of a message deleted, or received again since, is refused.
   */
  changeVisibility(queue: Queue, receiptHandle: string, seconds: number): void {
    const message = queue.messages.find((m) => m.receiptHandle === receiptHandle);
    if (!message || message.invisibleUntil <= this.clock.now()) {
      throw Object.assign(new Error(`Value ${receiptHandle} for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.`), { code: 'MessageNotInflight' });
    }
    const until = this.clock.now() + seconds * 1000;
    if (until - (message.receivedAt ?? 0) > 12 * 3600_000) {
      throw Object.assign(new Error('Value for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for the message is beyond the limit [43200 seconds]'), { code: 'InvalidParameterValue' });
    }
    message.invisibleUntil = until;
    this.clock.at(until, () => this.wake(queue));
    this.wake(queue);
  }

  /** What a receive hands out now: for FIFO, the oldest message of each group with none in flight. */
  receive(queue: Queue, max: number): QueuedMessage[] {
    const now = this.clock.now();
    const taken: QueuedMessage[] = [];
    const blocked = new Set<string>();
    for (const message of [...queue.messages]) {
      if (taken.length >= max) break;
      const group = message.groupId;
      if (group !== undefined && blocked.has(group)) continue;
      if (message.invisibleUntil > now) {
        if (group !== undefined) blocked.add(group);
        continue;
      }
      if (queue.redrive && message.receiveCount >= queue.redrive.maxReceiveCount) {
        queue.messages.splice(queue.messages.indexOf(message), 1);
        const target = this.queue(queue.redrive.target);
        target.messages.push({ ...message, invisibleUntil: 0, receiptHandle: undefined });
        this.wake(target);
        continue;
      }
      message.receiveCount += 1;
      message.firstReceivedAt ??= now;
      message.receivedAt = now;
      message.invisibleUntil = now + queue.visibilityTimeoutMs;
      message.receiptHandle = randomUUID();
      taken.push(message);
      // A batch may hold several messages of one group, in order; the group is then in flight.
      if (group !== undefined && taken.length >= max) blocked.add(group);
    }
    for (const message of taken) {
      // Once its visibility ends, the message (and its group) is receivable again.
      this.clock.at(message.invisibleUntil, () => this.wake(queue));
    }
    return taken;
  }

  delete(queue: Queue, receiptHandle: string): void {
    const index = queue.messages.findIndex((m) => m.receiptHandle === receiptHandle);
    if (index >= 0) queue.messages.splice(index, 1);
    this.wake(queue);
  }

  /** Makes a received message visible again at once (a function error, a reported failure). */
  release(queue: Queue, receiptHandle: string): void {
    const message = queue.messages.find((m) => m.receiptHandle === receiptHandle);
    if (message) message.invisibleUntil = this.clock.now();
    this.wake(queue);
  }

  onChange(queue: Queue, listener: () => void): () => void {
    queue.listeners.add(listener);
    return () => queue.listeners.delete(listener);
  }

  private enqueue(queue: Queue, body: string, groupId?: string, deduplicationId?: string, delayMs = 0): QueuedMessage {
    this.sequence += 1n;
    const message: QueuedMessage = {
      messageId: randomUUID(),
      body,
      groupId,
      deduplicationId,
      sequenceNumber: this.sequence.toString(),
      sentAt: this.clock.now(),
      receiveCount: 0,
      invisibleUntil: delayMs > 0 ? this.clock.now() + delayMs : 0,
    };
    queue.messages.push(message);
    if (delayMs > 0) this.clock.at(message.invisibleUntil, () => this.wake(queue));
    else this.wake(queue);
    return message;
  }

  private wake(queue: Queue): void {
    for (const listener of [...queue.listeners]) listener();
  }

  private wakeAll(): void {
    for (const queue of this.queues.values()) this.wake(queue);
  }
}

export function wireMessage(m: QueuedMessage): Record<string, unknown> {
  return {
    MessageId: m.messageId,
    ReceiptHandle: m.receiptHandle,
    MD5OfBody: createHash('md5').update(m.body).digest('hex'),
    Body: m.body,
    Attributes: {
      ApproximateReceiveCount: String(m.receiveCount),
      SentTimestamp: String(m.sentAt),
      ApproximateFirstReceiveTimestamp: String(m.firstReceivedAt ?? m.sentAt),
      SenderId: 'AROABOX',
      ...(m.groupId ? { MessageGroupId: m.groupId, MessageDeduplicationId: m.deduplicationId, SequenceNumber: m.sequenceNumber } : {}),
    },
  };
}

function json(body: unknown): Reply {
  return { status: 200, body: JSON.stringify(body), headers: { 'content-type': 'application/x-amz-json-1.0' } };
}

function sqsError(status: number, code: string, message: string): Reply {
  return {
    status,
    body: JSON.stringify({ __type: `com.amazonaws.sqs#${code}`, message }),
    headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amzn-query-error': `${code};Sender` },
  };
}
