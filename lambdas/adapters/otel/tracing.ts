import { ProxyTracerProvider, ROOT_CONTEXT, type Context, type Tracer } from '@opentelemetry/api';
import { ExportResultCode, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  SimpleSpanProcessor,
  TraceIdRatioBasedSampler,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { SCHEMA_URL, SCOPE } from '../../core/traces.js';
import { OtlpExportFailed, SignedSpanExporter, type ExportSigner } from './signed-exporter.js';

/** The standard `OTEL_TRACES_SAMPLER` values. */
export type SamplerName = 'always_on' | 'always_off' | 'traceidratio' | 'parentbased_always_on' | 'parentbased_always_off' | 'parentbased_traceidratio';

/** Where and how spans go: read from the standard `OTEL_*` variables by the runtimes (`runtimes/tracing.ts`). */
export interface TracingConfig {
  /** The OTLP/HTTP traces URL (`…/v1/traces`); absent, nothing is traced and tracing costs nothing. */
  endpoint?: string;
  /** Sent with every export (a collector's or a vendor's credentials); a function is asked at each export (headers read from a secret). */
  headers?: Record<string, string> | (() => Promise<Record<string, string>>);
  serviceName: string;
  sampler?: { name: SamplerName; ratio?: number };
  /** Message content (inputs, outputs, tool arguments) may go into spans: off unless a setting opts in. */
  captureContent?: boolean;
  /** Each export to `endpoint` is signed by it (CloudWatch's OTLP endpoint, SigV4): `headers` are then not sent. */
  sign?: ExportSigner;
  /** Spans go here instead of to an endpoint, each as it ends (tests: sdk-trace-base's `InMemorySpanExporter`). */
  exporter?: SpanExporter;
}

/** What the doors and the run observer trace with: one per process. */
export interface Tracing {
  /** False when nothing is exported: callers skip their spans altogether. */
  readonly enabled: boolean;
  readonly tracer: Tracer;
  readonly captureContent: boolean;
  /** The context a carrier names (W3C `traceparent`/`tracestate`), or the root context. */
  extract(carrier: Readonly<Record<string, string | undefined>>): Context;
  /** The W3C headers that continue `context`'s span elsewhere (another process, a queue's message, an agent). */
  inject(context: Context): Record<string, string>;
  /** Sends every ended span now: each Lambda invocation awaits it before it returns (a frozen environment sends nothing). */
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

const propagator = new W3CTraceContextPropagator();
const carrierGetter = {
  get: (carrier: Readonly<Record<string, string | undefined>>, key: string) => carrier[key],
  keys: (carrier: Readonly<Record<string, string | undefined>>) => Object.keys(carrier),
};
const carrierSetter = { set: (carrier: Record<string, string>, key: string, value: string) => void (carrier[key] = value) };

const propagation = {
  extract: (carrier: Readonly<Record<string, string | undefined>>) => propagator.extract(ROOT_CONTEXT, carrier, carrierGetter),
  inject: (context: Context) => {
    const carrier: Record<string, string> = {};
    propagator.inject(context, carrier, carrierSetter);
    return carrier;
  },
};

/** No endpoint: a tracer that records nothing, and a flush that has nothing to send. */
export const NO_TRACING: Tracing = {
  enabled: false,
  // A proxy with no delegate is the API's no-op tracer: its spans record nothing and cost a branch.
  tracer: new ProxyTracerProvider().getTracer(SCOPE),
  captureContent: false,
  ...propagation,
  flush: async () => {},
  shutdown: async () => {},
};

function samplerOf(config: TracingConfig['sampler']): Sampler {
  const ratio = new TraceIdRatioBasedSampler(config?.ratio ?? 1);
  switch (config?.name ?? 'parentbased_always_on') {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio;
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/**
 * A tracer provider of its own (none is registered globally, so nothing else in the process is
 * traced by accident, and two gateways in one test process do not share one), exporting by
 * OTLP/HTTP in batches.
 */
export function createTracing(config: TracingConfig): Tracing {
  if (config.endpoint === undefined && config.exporter === undefined) return NO_TRACING;
  const processor = config.exporter
    ? new SimpleSpanProcessor(config.exporter)
    : new BatchSpanProcessor(
        config.sign
          ? new SignedSpanExporter(config.endpoint as string, config.sign, logFailure)
          : reporting(new OTLPTraceExporter({ url: config.endpoint, headers: config.headers ?? {} }), config.endpoint as string),
      );
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': config.serviceName }),
    sampler: samplerOf(config.sampler),
    spanProcessors: [processor],
  });
  return {
    enabled: true,
    tracer: provider.getTracer(SCOPE, undefined, { schemaUrl: SCHEMA_URL }),
    captureContent: config.captureContent === true,
    ...propagation,
    // A batch that could not be sent was reported by its exporter: the invocation that flushed it goes on.
    flush: () => provider.forceFlush().catch(() => {}),
    shutdown: () => provider.shutdown(),
  };
}

/** The stock exporter, its failed exports reported as the signed one reports them (it tells only OpenTelemetry's silent diagnostics). */
function reporting(exporter: SpanExporter, url: string): SpanExporter {
  return {
    export: (spans, done) =>
      exporter.export(spans, (result) => {
        if (result.code !== ExportResultCode.SUCCESS) {
          logFailure(new OtlpExportFailed(`${spans.length} spans could not be sent to ${url} (${result.error?.message ?? 'no reason given'}): check that the collector is up and takes OTLP/HTTP at that URL, with the headers it asks for`));
        }
        done(result);
      }),
    forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
    shutdown: () => exporter.shutdown(),
  };
}

/** A log line of its own, as the functions' logger writes them: an export refused is the operator's to mend (a permission, Transaction Search). */
function logFailure(failure: OtlpExportFailed): void {
  console.error(JSON.stringify({ level: 'ERROR', message: failure.message, code: failure.code }));
}
