import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createTracing, NO_TRACING } from '../../../lambdas/adapters/otel/tracing.js';
import { tracingConfig } from '../../../lambdas/runtimes/tracing.js';

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
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://ignored:4318',
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
      serviceName: 'gateway-eu',
      sampler: { name: 'parentbased_traceidratio', ratio: 0.25 },
      captureContent: false,
    });
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

  it('sends ended spans to the OTLP/HTTP endpoint when flushed, with the configured headers', async () => {
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
      await tracing.flush();
      expect(received).toHaveLength(1);
      expect(received[0].path).toBe('/v1/traces');
      expect(received[0].auth).toBe('secret');
      expect(received[0].body).toContain('"exported"');
      expect(received[0].body).toContain('"funduq"');
      await tracing.shutdown();
    } finally {
      server.close();
    }
  });
});
