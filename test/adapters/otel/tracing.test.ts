import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it, vi } from 'vitest';
import { createTracing, NO_TRACING } from '../../../lambdas/adapters/otel/tracing.js';
import { headersFromSecret, tracingConfig } from '../../../lambdas/runtimes/tracing.js';

const env = (vars: Record<string, string>) => (name: string) => vars[name];

describe('tracing from the OTEL_* variables', () => {
  it('traces nothing without an endpoint, and says so by a disabled no-op tracer', () => {
    const config = tracingConfig(env({}));
    expect(config.endpoint).toBeUndefined();
    const tracing = createTracing(config);
    expect(tracing).toBe(NO_TRACING);
    const span = tracing.tracer.startSpan('x');
    expect(span.isRecording()).toBe(false);
    span.end();
  });

  it('appends the signal path to the base endpoint, takes the traces endpoint as it is, and decodes headers', () => {
    expect(tracingConfig(env({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' })).endpoint).toBe('http://collector:4318/v1/traces');
    const config = tracingConfig(
      env({
        // The traces' own endpoint wins for them; the metrics go to the base one.
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://vendor.example/otlp/traces',
        OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=a%3Db, x-team = one',
        OTEL_SERVICE_NAME: 'gateway-eu',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
      }),
    );
    expect(config).toEqual({
      endpoint: 'https://vendor.example/otlp/traces',
      headers: { 'x-api-key': 'a=b', 'x-team': 'one' },
      metricsEndpoint: 'http://collector:4318/v1/metrics',
      metricsHeaders: { 'x-api-key': 'a=b', 'x-team': 'one' },
      metricsIntervalMs: 60_000,
      serviceName: 'gateway-eu',
      sampler: { name: 'parentbased_traceidratio', ratio: 0.25 },
      captureContent: false,
    });
  });

  it('sends the metrics where the metrics variables say, or beside the traces, or nowhere', () => {
    const config = tracingConfig(
      env({ OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'https://metrics.example/otlp', OTEL_EXPORTER_OTLP_METRICS_HEADERS: 'k=v', OTEL_METRIC_EXPORT_INTERVAL: '15000' }),
    );
    expect(config).toMatchObject({ metricsEndpoint: 'https://metrics.example/otlp', metricsHeaders: { k: 'v' }, metricsIntervalMs: 15_000 });
    expect(config.endpoint).toBeUndefined();
    expect(tracingConfig(env({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_METRICS_EXPORTER: 'none' })).metricsEndpoint).toBeUndefined();
    expect(tracingConfig(env({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' })).metricsEndpoint).toBeUndefined();
    expect(tracingConfig(env({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' })).metricsEndpoint).toBeUndefined();
    expect(() => tracingConfig(env({ OTEL_METRICS_EXPORTER: 'prometheus' }))).toThrow('funduq: OTEL_METRICS_EXPORTER must be otlp or none (funduq exports OTLP over HTTP), got "prometheus"');
    expect(() => tracingConfig(env({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_METRIC_EXPORT_INTERVAL: '10' }))).toThrow(/OTEL_METRIC_EXPORT_INTERVAL must be a whole number of milliseconds, at least 1000/);
    expect(() => tracingConfig(env({ OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'metrics:4318' }))).toThrow(/OTEL_EXPORTER_OTLP_METRICS_ENDPOINT must be an http or https URL/);
  });

  it('exports nothing when the SDK is disabled or the exporter is none', () => {
    expect(tracingConfig(env({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' })).endpoint).toBeUndefined();
    expect(tracingConfig(env({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' })).endpoint).toBeUndefined();
  });

  it('refuses a value it cannot use in one line naming the variable', () => {
    expect(() => tracingConfig(env({ OTEL_TRACES_SAMPLER: 'sometimes' }))).toThrow(/^funduq: OTEL_TRACES_SAMPLER must be one of always_on, .*got "sometimes"$/);
    expect(() => tracingConfig(env({ OTEL_TRACES_SAMPLER_ARG: '2' }))).toThrow('funduq: OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, got "2"');
    expect(() => tracingConfig(env({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }))).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT must be an http or https URL/);
    expect(() => tracingConfig(env({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }))).toThrow(/grpc is not offered/);
    expect(() => tracingConfig(env({ OTEL_EXPORTER_OTLP_HEADERS: 'novalue' }))).toThrow(/must be key=value pairs/);
  });

  it('sends ended spans and the metrics to the OTLP/HTTP endpoint when flushed, each with the configured headers', async () => {
    const received: { path?: string; auth?: string; body: string }[] = [];
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        received.push({ path: req.url, auth: req.headers['x-api-key'] as string | undefined, body });
        res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const tracing = createTracing(tracingConfig(env({ OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=secret' })));
      tracing.tracer.startSpan('exported').end();
      tracing.meter.createCounter('counted').add(3);
      await tracing.flush();
      expect(received.map((export_) => [export_.path, export_.auth]).sort()).toEqual([
        ['/v1/metrics', 'secret'],
        ['/v1/traces', 'secret'],
      ]);
      const traces = received.find((export_) => export_.path === '/v1/traces')!;
      expect(traces.body).toContain('"exported"');
      expect(traces.body).toContain('"funduq"');
      // Nothing recorded since: the next flush sends the spans only, and no request for the metrics.
      tracing.tracer.startSpan('later').end();
      await tracing.flush();
      expect(received.map((export_) => export_.path).sort()).toEqual(['/v1/metrics', '/v1/traces', '/v1/traces']);
      const metrics = JSON.parse(received.find((export_) => export_.path === '/v1/metrics')!.body) as { resourceMetrics: { scopeMetrics: { metrics: { name: string; sum: { dataPoints: { asInt?: number; asDouble?: number }[] } }[] }[] }[] };
      const counted = metrics.resourceMetrics[0].scopeMetrics[0].metrics.find((metric) => metric.name === 'counted')!;
      expect(Number(counted.sum.dataPoints[0].asInt ?? counted.sum.dataPoints[0].asDouble)).toBe(3);
      await tracing.shutdown();
    } finally {
      server.close();
    }
  });
});

describe('OTLP headers from a secret (the stack\'s otlpHeadersSecret)', () => {
  it('reads the secret once, beside the variables\' headers, and reads it again after a failure, saying why with its code', async () => {
    const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      const answers = [Promise.reject(new Error('AccessDeniedException')), Promise.resolve('authorization=Bearer%20k,x-team=one'), Promise.resolve('never read')];
      const read = vi.fn(async () => answers.shift()!);
      const headers = headersFromSecret('funduq/otlp-headers', { 'x-team': 'variable', 'x-region': 'eu' }, read);
      await expect(headers()).rejects.toMatchObject({ code: 'otlp_headers_unreadable', message: expect.stringContaining('check that it exists') });
      expect(JSON.parse(String(logged.mock.calls[0][0]))).toMatchObject({ level: 'ERROR', code: 'otlp_headers_unreadable' });
      expect(await headers()).toEqual({ authorization: 'Bearer k', 'x-team': 'one', 'x-region': 'eu' });
      expect(await headers()).toEqual({ authorization: 'Bearer k', 'x-team': 'one', 'x-region': 'eu' });
      expect(read).toHaveBeenCalledTimes(2);
      // A secret that holds something else is said to, and its value is never logged.
      const wrong = headersFromSecret('funduq/otlp-headers', undefined, async () => 'hunter2');
      await expect(wrong()).rejects.toMatchObject({ code: 'otlp_headers_unreadable', message: expect.stringContaining('key=value pairs') });
      expect(logged.mock.calls.map((call) => String(call[0])).join('\n')).not.toContain('hunter2');
    } finally {
      logged.mockRestore();
    }
  });

  it('sends the secret\'s headers with each export of the spans', async () => {
    const seen: Array<string | undefined> = [];
    const receiver = createServer((req, res) => {
      seen.push(req.headers['x-api-key'] as string | undefined);
      req.resume().on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    try {
      const tracing = createTracing({
        serviceName: 'funduq',
        endpoint: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/v1/traces`,
        headers: headersFromSecret('funduq/otlp-headers', undefined, async () => 'x-api-key=from-the-secret'),
      });
      tracing.tracer.startSpan('one').end();
      await tracing.flush();
      expect(seen).toEqual(['from-the-secret']);
    } finally {
      receiver.close();
    }
  });
});

describe("CloudWatch's OTLP endpoint (FUNDUQ_OTLP_CLOUDWATCH, the stack's otlpCloudWatch)", () => {
  it("sends to X-Ray's OTLP traces endpoint in the region, or where the SDK's endpoint variables say, signing each export instead of sending headers", () => {
    const config = tracingConfig(env({ FUNDUQ_OTLP_CLOUDWATCH: 'true', AWS_REGION: 'eu-west-1', OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=k' }));
    expect(config.endpoint).toBe('https://xray.eu-west-1.amazonaws.com/v1/traces');
    expect(typeof config.sign).toBe('function');
    // The spans are signed, not sent with a collector's headers; no metrics go to CloudWatch.
    expect(config.headers).toBeUndefined();
    expect(config.metricsEndpoint).toBeUndefined();
    expect(tracingConfig(env({ FUNDUQ_OTLP_CLOUDWATCH: 'true', AWS_DEFAULT_REGION: 'us-west-2', AWS_ENDPOINT_URL: 'http://127.0.0.1:4566/' })).endpoint).toBe('http://127.0.0.1:4566/v1/traces');
    expect(tracingConfig(env({ FUNDUQ_OTLP_CLOUDWATCH: 'true', AWS_REGION: 'us-west-2', AWS_ENDPOINT_URL: 'http://a', AWS_ENDPOINT_URL_XRAY: 'http://b' })).endpoint).toBe('http://b/v1/traces');
    expect(tracingConfig(env({ FUNDUQ_OTLP_CLOUDWATCH: 'false' })).endpoint).toBeUndefined();
  });

  it('refuses to send beside a collector, without a region, or with a value that is not a flag', () => {
    expect(() => tracingConfig(env({ FUNDUQ_OTLP_CLOUDWATCH: 'true', AWS_REGION: 'eu-west-1', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }))).toThrow(/^funduq: FUNDUQ_OTLP_CLOUDWATCH sends traces to CloudWatch itself: unset OTEL_EXPORTER_OTLP_ENDPOINT/);
    expect(() => tracingConfig(env({ FUNDUQ_OTLP_CLOUDWATCH: 'true' }))).toThrow(/FUNDUQ_OTLP_CLOUDWATCH needs AWS_REGION/);
    expect(() => tracingConfig(env({ FUNDUQ_OTLP_CLOUDWATCH: 'yes' }))).toThrow('funduq: FUNDUQ_OTLP_CLOUDWATCH must be true or false, got "yes"');
  });

  it('logs an export the endpoint refused with its code and status, and drops that batch only: the flush that sent it still resolves', async () => {
    let status = 403;
    const bodies: string[] = [];
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        bodies.push(`${req.headers['x-signed']} ${body.length > 0}`);
        res.writeHead(status, { 'content-type': 'application/json' }).end(status === 200 ? '{}' : '{"message":"AccessDeniedException"}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      const tracing = createTracing({
        serviceName: 'funduq',
        endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`,
        sign: async ({ body }) => ({ 'x-signed': `over-${body.byteLength}` }),
      });
      tracing.tracer.startSpan('refused').end();
      await tracing.flush();
      const lines = logged.mock.calls.map(([line]) => JSON.parse(String(line)) as { code: string; message: string });
      expect(lines).toEqual([{ level: 'ERROR', code: 'otlp_export_failed', message: expect.stringMatching(/refused an export with HTTP 403 .*xray:PutTraceSegments.*Transaction Search/) }]);
      status = 200;
      tracing.tracer.startSpan('taken').end();
      await tracing.flush();
      expect(logged).toHaveBeenCalledTimes(1);
      expect(bodies).toHaveLength(2);
      expect(bodies.every((line) => /^over-\d+ true$/.test(line))).toBe(true);
      await tracing.shutdown();
    } finally {
      logged.mockRestore();
      server.close();
    }
  });
});

describe('an export that fails', () => {
  it('to be signed, for want of credentials, says what to give it, and sends nothing', async () => {
    const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      const tracing = createTracing({
        serviceName: 'funduq',
        endpoint: 'http://127.0.0.1:9/v1/traces',
        sign: async () => {
          throw new Error('Could not load credentials from any providers');
        },
      });
      tracing.tracer.startSpan('unsigned').end();
      await expect(tracing.flush()).resolves.toBeUndefined();
      const lines = logged.mock.calls.map(([line]) => JSON.parse(String(line)) as { code: string; message: string });
      expect(lines).toEqual([
        { level: 'ERROR', code: 'otlp_export_failed', message: 'an export to 127.0.0.1:9 could not be signed (Could not load credentials from any providers): give funduq AWS credentials (a function\'s role; on one machine the environment or a profile)' },
      ]);
      await tracing.shutdown();
    } finally {
      logged.mockRestore();
    }
  });

  it('is logged with its code, and the flush that sent it resolves: a collector that refuses or is down never fails an invocation', async () => {
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(400, { 'content-type': 'application/json' }).end('{"message":"bad tenant"}'));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      const tracing = createTracing({ serviceName: 'funduq', endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces` });
      tracing.tracer.startSpan('refused').end();
      await expect(tracing.flush()).resolves.toBeUndefined();
      const lines = logged.mock.calls.map(([line]) => JSON.parse(String(line)) as { code: string; message: string });
      expect(lines).toEqual([{ level: 'ERROR', code: 'otlp_export_failed', message: expect.stringMatching(/^127\.0\.0\.1:\d+ refused an export with HTTP 400 \(\{"message":"bad tenant"\}\): check the URL and the headers/) }]);
      await tracing.shutdown();
    } finally {
      logged.mockRestore();
      server.close();
    }
  });
});
