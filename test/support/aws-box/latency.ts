/**
 * How long AWS takes to answer, for a box that should feel like a region rather than loopback:
 * each call the functions make waits its service's typical response time before it is served, a
 * queue's message waits for its event source's hand-off before its function is invoked, and a
 * caller's request waits API Gateway's overhead before it reaches its function. Medians from AWS's
 * documentation and published measurements, each cited below; the box without a model answers at
 * once, as it always did.
 */
export interface LatencyModel {
  /** A service call's response time (ms): `service` is the SigV4 scope (`dynamodb`, `sqs`, `lambda`, …), `operation` its action. */
  call(service: string, operation: string): number;
  /** From a message's arrival in an SQS queue to its function's invocation by the event source mapping (ms). */
  queueHandOffMs: number;
  /** What API Gateway adds before a caller's request reaches its function (ms). */
  apiGatewayMs: number;
}

/**
 * DynamoDB: "For most atomic operations, such as GetItem and PutItem, an average latency is in
 * single-digit milliseconds" (https://repost.aws/knowledge-center/dynamodb-high-latency); taken as
 * 5 ms, and twice that for Query and the batch calls, whose latency the same page says grows with
 * what they read or write.
 */
const DYNAMODB_ATOMIC_MS = 5;
const DYNAMODB_MULTI_MS = 10;
const DYNAMODB_MULTI = new Set(['Query', 'Scan', 'BatchGetItem', 'BatchWriteItem', 'TransactWriteItems', 'TransactGetItems']);
/**
 * SQS FIFO to Lambda through an event source mapping: 28.1 ms at p50 from the producer's send to
 * the consumer's invocation (p90 61.2 ms; eu-west-1, measured over 1,024 messages:
 * https://bitesizedserverless.com/bite/serverless-messaging-latency-compared/). The send's own
 * answer is given 8 ms of it, the mapping's hand-off the other 20.
 */
const SQS_SEND_MS = 8;
const SQS_FIFO_HAND_OFF_MS = 20;
/**
 * A warm Lambda invocation's own overhead (lambda:InvokeFunction, RequestResponse or Event), and any
 * other service the functions call (Step Functions, Secrets Manager): no published median was found;
 * 10 ms, the order of a regional API call.
 */
const OTHER_CALL_MS = 10;
/** API Gateway REST APIs add 10–30 ms of their own (https://www.smplogs.com/patterns/apigateway/high-latency); 15 ms. */
const API_GATEWAY_MS = 15;

/** The model of a region, as cited above. */
export const REGION_LATENCY: LatencyModel = {
  call(service, operation) {
    if (service === 'dynamodb') return DYNAMODB_MULTI.has(operation) ? DYNAMODB_MULTI_MS : DYNAMODB_ATOMIC_MS;
    if (service === 'sqs') return SQS_SEND_MS;
    return OTHER_CALL_MS;
  },
  queueHandOffMs: SQS_FIFO_HAND_OFF_MS,
  apiGatewayMs: API_GATEWAY_MS,
};

/** Waits `ms` of wall time (none for 0 or no model): the box's clock is the functions' time, not this. */
export function pause(ms: number | undefined): Promise<void> | undefined {
  return ms ? new Promise((resolve) => setTimeout(resolve, ms)) : undefined;
}
