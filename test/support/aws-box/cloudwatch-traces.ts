import { createHash, createHmac } from 'node:crypto';
import type { AwsCall, AwsService, Reply } from './aws-endpoint.js';

/** A span as OTLP/JSON carries it, with its resource's service name. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  service: string;
  links?: { traceId: string; spanId: string }[];
}

interface OtlpJson {
  resourceSpans: { resource: { attributes: { key: string; value: { stringValue?: string } }[] }; scopeSpans: { spans: Omit<ReceivedSpan, 'service'>[] }[] }[];
}

/** The spans of one OTLP/JSON export, each with its resource's `service.name`. */
export function spansOf(body: string): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const { resource, scopeSpans } of (JSON.parse(body) as OtlpJson).resourceSpans) {
    const service = resource.attributes.find((attribute) => attribute.key === 'service.name')?.value.stringValue ?? '';
    for (const scope of scopeSpans) for (const span of scope.spans) spans.push({ ...span, service });
  }
  return spans;
}

/** The secret half of every box credential (the functions' and the state machine's). */
const BOX_SECRET = 'box-secret';

/**
 * CloudWatch's OTLP traces endpoint (`https://xray.{region}.amazonaws.com/v1/traces`): it takes
 * OTLP/HTTP JSON signed with SigV4 for `xray` and authorizes an export as `xray:PutTraceSegments`.
 * The box checks each signature as AWS would, with a SigV4 of its own (not the SDK's signer the
 * functions use), so an export signed over other bytes, headers or a path than it sent is refused 403.
 */
export class CloudWatchTraces implements AwsService {
  readonly spans: ReceivedSpan[] = [];
  /** Each export taken, by whom. */
  readonly exports: Array<{ caller: string; spans: number }> = [];
  readonly refusals: string[] = [];

  authorize(): Array<{ action: string; resource: string }> {
    return [{ action: 'xray:PutTraceSegments', resource: '*' }];
  }

  async handle(call: AwsCall): Promise<Reply> {
    if (call.method !== 'POST' || new URL(call.path, 'http://box').pathname !== '/v1/traces') return this.refuse(404, `the box's CloudWatch OTLP endpoint serves POST /v1/traces, not ${call.method} ${call.path}`);
    if (!String(call.headers['content-type']).startsWith('application/json')) return this.refuse(415, `the box takes OTLP/JSON, not ${call.headers['content-type']}`);
    const mismatch = checkSignature(call);
    if (mismatch) return this.refuse(403, mismatch);
    const spans = spansOf(call.raw);
    this.spans.push(...spans);
    this.exports.push({ caller: call.caller.name, spans: spans.length });
    return { status: 200, body: '{"partialSuccess":{}}', headers: { 'content-type': 'application/json' } };
  }

  private refuse(status: number, message: string): Reply {
    this.refusals.push(message);
    return { status, body: JSON.stringify({ message }), headers: { 'content-type': 'application/json' } };
  }
}

/** Why the request's SigV4 signature does not hold, or undefined when it does. */
function checkSignature(call: AwsCall): string | undefined {
  const authorization = String(call.headers.authorization ?? '');
  const match = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/xray\/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(authorization);
  if (!match) return `not a SigV4 authorization for xray: ${authorization}`;
  const [, , day, region, signedHeaders, signature] = match;
  const amzDate = String(call.headers['x-amz-date'] ?? '');
  if (!amzDate.startsWith(day)) return 'x-amz-date is not the credential scope’s day';
  const payloadHash = createHash('sha256').update(call.raw, 'utf8').digest('hex');
  if (call.headers['x-amz-content-sha256'] !== undefined && call.headers['x-amz-content-sha256'] !== payloadHash) return 'x-amz-content-sha256 is not the hash of the body';
  const names = signedHeaders.split(';');
  for (const required of ['host', 'x-amz-date']) if (!names.includes(required)) return `${required} is not signed`;
  if (call.headers['x-amz-security-token'] !== undefined && !names.includes('x-amz-security-token')) return 'the session token is not signed';
  const canonicalHeaders = names.map((name) => `${name}:${String(call.headers[name] ?? '').trim().replace(/\s+/g, ' ')}\n`).join('');
  const url = new URL(call.path, 'http://box');
  const canonicalRequest = ['POST', url.pathname, url.search.slice(1), canonicalHeaders, signedHeaders, payloadHash].join('\n');
  const scope = `${day}/${region}/xray/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, createHash('sha256').update(canonicalRequest).digest('hex')].join('\n');
  let key: Buffer = createHmac('sha256', `AWS4${BOX_SECRET}`).update(day).digest();
  for (const part of [region, 'xray', 'aws4_request']) key = createHmac('sha256', key).update(part).digest();
  const expected = createHmac('sha256', key).update(stringToSign).digest('hex');
  return expected === signature ? undefined : 'The request signature we calculated does not match the signature you provided.';
}
