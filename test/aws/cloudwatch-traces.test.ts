import { randomUUID } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { sigv4Signer } from '../../lambdas/adapters/aws/sigv4-signer.js';
import { runInput } from '../support/aws-box/run-input.js';
import { BOX_CONTEXT, useAwsBox } from '../support/aws-box/box.js';
import { readSse } from '../support/gateway.js';

// The door and the dispatcher each export: a thread's first run is the dispatcher's here (relayAtDoor false).
const aws = useAwsBox({ context: { ...BOX_CONTEXT, otlpCloudWatch: 'true', relayAtDoor: 'false' } });

describe("traces sent to CloudWatch's OTLP endpoint", { timeout: 120_000 }, () => {
  it('reach it from the door and the dispatcher, each export signed with SigV4 by its function’s role, in the caller’s trace', async () => {
    const { box } = aws;
    const admin = await box.admin('PUT', 'agents/demo', { provider: 'demo', description: 'the demo agent' });
    expect(admin.status).toBe(201);
    const traceId = randomUUID().replaceAll('-', '');
    const response = await box.fetch(`${box.url}/agui/demo`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${'4'.repeat(16)}-01` },
      body: JSON.stringify(runInput(`t-${randomUUID()}`, 'to CloudWatch')),
    });
    expect(response.status).toBe(200);
    expect((await readSse(response)).events.at(-1)?.data).toMatchObject({ type: 'RUN_FINISHED' });

    const traces = box.cloudWatchTraces;
    const inTrace = () => traces.spans.filter((span) => span.traceId.toLowerCase() === traceId);
    await vi.waitFor(() => expect(inTrace().map((span) => span.name)).toEqual(expect.arrayContaining(['POST /agui/:agentId', 'funduq.queue.wait', 'invoke_agent demo'])), { timeout: 30_000 });
    const server = inTrace().find((span) => span.name === 'POST /agui/:agentId')!;
    expect(server.parentSpanId).toBe('4'.repeat(16));
    expect(inTrace().find((span) => span.name === 'invoke_agent demo')!.parentSpanId).toBe(server.spanId);
    // The streaming door and the dispatcher each signed their own exports; none was refused, and IAM allowed each.
    expect(traces.exports.map((taken) => taken.caller)).toEqual(expect.arrayContaining(['doors-stream', 'dispatcher']));
    expect(traces.refusals).toEqual([]);
    expect(box.iam.denials).toEqual([]);
  });

  it('refuses an export whose signature was computed over other bytes than it carries (the check can fail)', async () => {
    const { box } = aws;
    const url = new URL(`${box.endpoint.url}/v1/traces`);
    const sign = sigv4Signer({ service: 'xray', region: 'us-east-1', credentials: { accessKeyId: box.lambda.accessKeyOf('dispatcher'), secretAccessKey: 'box-secret' } });
    const headers = { 'content-type': 'application/json' };
    const signed = await sign({ url, headers, body: new TextEncoder().encode('{"resourceSpans":[]}') });
    const tampered = await fetch(url, { method: 'POST', headers: { ...headers, ...signed }, body: '{"resourceSpans": []}' });
    expect(tampered.status).toBe(403);
    const honest = await fetch(url, { method: 'POST', headers: { ...headers, ...signed }, body: '{"resourceSpans":[]}' });
    expect(honest.status).toBe(200);
  });
});
