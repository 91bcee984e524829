import { randomUUID } from 'node:crypto';
import { createNoopMeter, ProxyTracerProvider, ROOT_CONTEXT, type Context, type Counter, type Gauge, type Histogram, type Meter, type Tracer, type UpDownCounter } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { JsonMetricsSerializer, JsonTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider, PeriodicExportingMetricReader, type PushMetricExporter } from '@opentelemetry/sdk-metrics';
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
import { OtlpJsonExporter, type ExportAuth, type ExportSigner, type OtlpExportFailed } from './otlp-json.js';

/** The standard `OTEL_TRACES_SAMPLER` values. */
export type SamplerName = 'always_on' | 'always_off' | 'traceidratio' | 'parentbased_always_on' | 'parentbased_always_off' | 'parentbased_traceidratio';

/** Where and how spans and metrics go: read from the standard `OTEL_*` variables by the runtimes (`runtimes/tracing.ts`). */
export interface TracingConfig {
  /** The OTLP/HTTP traces URL (`…/v1/traces`); absent, nothing is traced and tracing costs nothing. */
  endpoint?: string;
  /** The OTLP/HTTP metrics URL (`…/v1/metrics`); absent, no metrics are kept and they cost nothing. */
  metricsEndpoint?: string;
  /** How often metrics go out by themselves (one machine); a Lambda invocation's flush sends them too. */
  metricsIntervalMs?: number;
  /** Sent with every export of spans (a collector's or a vendor's credentials); a function is asked at each export (headers read from a secret). */
  headers?: Record<string, string> | (() => Promise<Record<string, string>>);
  /** Sent with every export of metrics, as `headers` for spans. */
  metricsHeaders?: Record<string, string> | (() => Promise<Record<string, string>>);
  serviceName: string;
  sampler?: { name: SamplerName; ratio?: number };
  /** Message content (inputs, outputs, tool arguments) may go into spans: off unless a setting opts in. */
  captureContent?: boolean;
  /** Each export of spans to `endpoint` is signed by it (CloudWatch's OTLP endpoint, SigV4): `headers` are then not sent. */
  sign?: ExportSigner;
  /** Spans go here instead of to an endpoint, each as it ends (tests: sdk-trace-base's `InMemorySpanExporter`). */
  exporter?: SpanExporter;
  /** Metrics go here instead of to an endpoint (tests: sdk-metrics' `InMemoryMetricExporter`). */
  metricExporter?: PushMetricExporter;
}

/** What the doors and the run observers trace and measure with: one per process. */
export interface Tracing {
  /** False when no span is exported: callers skip their spans altogether. */
  readonly enabled: boolean;
  readonly tracer: Tracer;
  /** False when no metric is exported: the runs' metrics are not observed at all. */
  readonly metered: boolean;
  readonly meter: Meter;
  readonly captureContent: boolean;
  /** The context a carrier names (W3C `traceparent`/`tracestate`), or the root context. */
  extract(carrier: Readonly<Record<string, string | undefined>>): Context;
  /** The W3C headers that continue `context`'s span elsewhere (another process, a queue's message, an agent). */
  inject(context: Context): Record<string, string>;
  /**
   * Sends every ended span and the metrics now: each Lambda invocation awaits it before it returns
   * (a frozen environment sends nothing). It never fails: an export that could not be sent was
   * logged by its exporter.
   */
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

/** No endpoint: a tracer and a meter that record nothing, and a flush that has nothing to send. */
export const NO_TRACING: Tracing = {
  enabled: false,
  // A proxy with no delegate is the API's no-op tracer: its spans record nothing and cost a branch.
  tracer: new ProxyTracerProvider().getTracer(SCOPE),
  metered: false,
  meter: createNoopMeter(),
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
 * A tracer provider and a meter provider of its own (none is registered globally, so nothing else
 * in the process is traced by accident, and two gateways in one test process do not share one),
 * exporting OTLP/HTTP JSON: spans in batches, metrics every `metricsIntervalMs` and at each flush.
 * Each process is its own `service.instance.id`, so a backend keeps the cumulative sums of two
 * Lambda environments apart.
 */
export function createTracing(config: TracingConfig): Tracing {
  const traced = config.endpoint !== undefined || config.exporter !== undefined;
  const metered = config.metricsEndpoint !== undefined || config.metricExporter !== undefined;
  if (!traced && !metered) return NO_TRACING;
  const resource = resourceFromAttributes({ 'service.name': config.serviceName, 'service.instance.id': randomUUID() });
  const auth: ExportAuth = config.sign ? { sign: config.sign } : config.headers ? { headers: config.headers } : {};
  const tracerProvider = traced
    ? new BasicTracerProvider({
        resource,
        sampler: samplerOf(config.sampler),
        spanProcessors: [
          config.exporter
            ? new SimpleSpanProcessor(config.exporter)
            : new BatchSpanProcessor(new OtlpJsonExporter(config.endpoint as string, JsonTraceSerializer, auth, logFailure)),
        ],
      })
    : undefined;
  const meterProvider = metered
    ? new MeterProvider({
        resource,
        readers: [
          new PeriodicExportingMetricReader({
            exporter: config.metricExporter ?? new OtlpJsonExporter(config.metricsEndpoint as string, JsonMetricsSerializer, config.metricsHeaders ? { headers: config.metricsHeaders } : {}, logFailure),
            exportIntervalMillis: config.metricsIntervalMs ?? 60_000,
          }),
        ],
      })
    : undefined;
  // A batch that could not be sent was reported by its exporter: the invocation that flushed it goes on.
  const settle = (work: Array<Promise<unknown> | undefined>) => Promise.all(work.map((promise) => promise?.catch(() => {}))).then(() => {});
  // A flush sends the metrics only when something was recorded since the last one: a Lambda
  // invocation that measured nothing (most of the doors' reads) makes no request for them.
  let recorded = 0;
  let flushed = 0;
  const metricsDue = () => {
    const due = recorded !== flushed;
    flushed = recorded;
    return due;
  };
  return {
    enabled: traced,
    tracer: tracerProvider ? tracerProvider.getTracer(SCOPE, undefined, { schemaUrl: SCHEMA_URL }) : NO_TRACING.tracer,
    metered,
    meter: meterProvider ? countingMeter(meterProvider.getMeter(SCOPE, undefined, { schemaUrl: SCHEMA_URL }), () => (recorded += 1)) : NO_TRACING.meter,
    captureContent: config.captureContent === true,
    ...propagation,
    flush: () => settle([tracerProvider?.forceFlush(), meterProvider && metricsDue() ? meterProvider.forceFlush() : undefined]),
    shutdown: () => settle([tracerProvider?.shutdown(), meterProvider?.shutdown()]),
  };
}

/**
 * The meter, each recording of its synchronous instruments counted (`counted`). Observable
 * instruments are read at a collection, so a flush sends them only beside a recording.
 */
function countingMeter(meter: Meter, counted: () => void): Meter {
  const adding = (instrument: Counter | UpDownCounter): Counter => ({ add: (value, attributes, context) => (counted(), instrument.add(value, attributes, context)) });
  const recording = (instrument: Histogram | Gauge): Histogram => ({ record: (value, attributes, context) => (counted(), instrument.record(value, attributes, context)) });
  return {
    createHistogram: (name, options) => recording(meter.createHistogram(name, options)),
    createCounter: (name, options) => adding(meter.createCounter(name, options)),
    createUpDownCounter: (name, options) => adding(meter.createUpDownCounter(name, options)),
    createGauge: (name, options) => recording(meter.createGauge(name, options)),
    createObservableGauge: (name, options) => meter.createObservableGauge(name, options),
    createObservableCounter: (name, options) => meter.createObservableCounter(name, options),
    createObservableUpDownCounter: (name, options) => meter.createObservableUpDownCounter(name, options),
    addBatchObservableCallback: (callback, observables) => meter.addBatchObservableCallback(callback, observables),
    removeBatchObservableCallback: (callback, observables) => meter.removeBatchObservableCallback(callback, observables),
  };
}

/** A log line of its own, as the functions' logger writes them: an export refused is the operator's to mend (a collector down, a permission, Transaction Search). */
function logFailure(failure: OtlpExportFailed): void {
  console.error(JSON.stringify({ level: 'ERROR', message: failure.message, code: failure.code }));
}
