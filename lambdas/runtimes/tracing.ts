import { sigv4Signer } from '../adapters/aws/sigv4-signer.js';
import { createTracing, type SamplerName, type Tracing, type TracingConfig } from '../adapters/otel/tracing.js';
import type { Environment } from './aws.js';
import { SettingsError } from './settings.js';

const SAMPLERS: readonly SamplerName[] = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'];

/**
 * Tracing as the standard `OTEL_*` variables configure it (the OpenTelemetry SDK's environment
 * specification), read by `bin/` and the handlers: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as
 * it is) or `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/traces` appended), their `…_HEADERS`
 * (`key=value,…`, values URL-encoded), `OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER` and its
 * `…_ARG`, `OTEL_SDK_DISABLED`, `OTEL_TRACES_EXPORTER=none`; and the GenAI instrumentations'
 * `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` for message content. No endpoint: no traces.
 * `FUNDUQ_OTLP_CLOUDWATCH=true` sends them to CloudWatch's OTLP endpoint in `AWS_REGION` instead
 * (X-Ray's, where the SDK's `AWS_ENDPOINT_URL_XRAY` or `AWS_ENDPOINT_URL` name none other), each
 * export signed with SigV4 by the credentials the SDK finds.
 * A value that cannot be used throws `SettingsError`, one line naming the variable.
 */
export function tracingConfig(get: (name: string) => string | undefined): TracingConfig {
  const read = (name: string) => {
    const value = get(name)?.trim();
    return value === undefined || value === '' ? undefined : value;
  };
  const bad = (name: string, takes: string): never => {
    throw new SettingsError(`funduq: ${name} ${takes}, got "${read(name)}"`);
  };
  const serviceName = read('OTEL_SERVICE_NAME') ?? 'funduq';
  const disabled = read('OTEL_SDK_DISABLED')?.toLowerCase() === 'true';
  const exporter = read('OTEL_TRACES_EXPORTER');
  if (exporter !== undefined && !['otlp', 'none'].includes(exporter)) bad('OTEL_TRACES_EXPORTER', 'must be otlp or none (funduq exports OTLP over HTTP)');
  const protocol = read('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  if (read(protocol) !== undefined && !['http/json', 'http/protobuf'].includes(read(protocol)!)) bad(protocol, 'must be http/json or http/protobuf (funduq sends OTLP/HTTP; grpc is not offered)');
  const cloudWatch = read('FUNDUQ_OTLP_CLOUDWATCH')?.toLowerCase();
  if (cloudWatch !== undefined && cloudWatch !== 'true' && cloudWatch !== 'false') bad('FUNDUQ_OTLP_CLOUDWATCH', 'must be true or false');
  const collector = signalEndpoint('TRACES', read, bad);
  const signed = cloudWatch === 'true' ? cloudWatchOf(read, collector, bad) : undefined;
  const endpoint = signed?.endpoint ?? collector;
  const headers = signalHeaders('TRACES', read, bad);
  const metrics = metricsOf(read, bad);
  const samplerName = read('OTEL_TRACES_SAMPLER') ?? 'parentbased_always_on';
  if (!SAMPLERS.includes(samplerName as SamplerName)) bad('OTEL_TRACES_SAMPLER', `must be one of ${SAMPLERS.join(', ')}`);
  const arg = read('OTEL_TRACES_SAMPLER_ARG');
  const ratio = arg === undefined ? 1 : Number(arg);
  if (!(ratio >= 0 && ratio <= 1)) bad('OTEL_TRACES_SAMPLER_ARG', 'must be a ratio from 0 to 1');
  const capture = read('OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT')?.toLowerCase();
  if (capture !== undefined && capture !== 'true' && capture !== 'false') bad('OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT', 'must be true or false');
  return {
    serviceName,
    ...(endpoint !== undefined && !disabled && exporter !== 'none' ? { endpoint } : {}),
    ...(metrics && !disabled ? metrics : {}),
    ...(headers && !signed ? { headers } : {}),
    ...(signed ? { sign: sigv4Signer({ service: 'xray', region: signed.region }) } : {}),
    sampler: { name: samplerName as SamplerName, ratio },
    captureContent: capture === 'true',
  };
}

/**
 * Where the metrics go: `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` as it is, or the base endpoint with
 * `/v1/metrics` (a collector takes both signals), with `…_METRICS_HEADERS` or the base headers,
 * every `OTEL_METRIC_EXPORT_INTERVAL` ms; `OTEL_METRICS_EXPORTER=none` sends none. CloudWatch's
 * OTLP endpoint takes traces only (its metrics are the functions' EMF ones).
 */
function metricsOf(read: (name: string) => string | undefined, bad: (name: string, takes: string) => never): Pick<TracingConfig, 'metricsEndpoint' | 'metricsHeaders' | 'metricsIntervalMs'> | undefined {
  const exporter = read('OTEL_METRICS_EXPORTER');
  if (exporter !== undefined && !['otlp', 'none'].includes(exporter)) bad('OTEL_METRICS_EXPORTER', 'must be otlp or none (funduq exports OTLP over HTTP)');
  const endpoint = signalEndpoint('METRICS', read, bad);
  if (exporter === 'none' || endpoint === undefined) return undefined;
  const headers = signalHeaders('METRICS', read, bad);
  const interval = read('OTEL_METRIC_EXPORT_INTERVAL');
  const intervalMs = interval === undefined ? 60_000 : Number(interval);
  if (!Number.isInteger(intervalMs) || intervalMs < 1_000) bad('OTEL_METRIC_EXPORT_INTERVAL', 'must be a whole number of milliseconds, at least 1000');
  return { metricsEndpoint: endpoint, ...(headers ? { metricsHeaders: headers } : {}), metricsIntervalMs: intervalMs };
}

/** CloudWatch's OTLP traces endpoint (X-Ray's), in the function's region: it takes SigV4-signed exports only, so no collector's endpoint or headers go with it. */
function cloudWatchOf(read: (name: string) => string | undefined, collector: string | undefined, bad: (name: string, takes: string) => never): { endpoint: string; region: string } {
  if (collector !== undefined) bad('FUNDUQ_OTLP_CLOUDWATCH', 'sends traces to CloudWatch itself: unset OTEL_EXPORTER_OTLP_ENDPOINT (and …_TRACES_ENDPOINT), or set this to false');
  const region = read('AWS_REGION') ?? read('AWS_DEFAULT_REGION');
  if (region === undefined) bad('FUNDUQ_OTLP_CLOUDWATCH', 'needs AWS_REGION (the region whose CloudWatch takes the traces)');
  const base = read('AWS_ENDPOINT_URL_XRAY') ?? read('AWS_ENDPOINT_URL') ?? `https://xray.${region}.amazonaws.com`;
  return { endpoint: `${base.replace(/\/+$/, '')}/v1/traces`, region: region as string };
}

/**
 * A signal's URL: its own variable (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `…_METRICS_…`) as it
 * is, or the base one with the signal's path appended (the OTLP exporter specification).
 */
function signalEndpoint(signal: 'TRACES' | 'METRICS', read: (name: string) => string | undefined, bad: (name: string, takes: string) => never): string | undefined {
  const own = read(`OTEL_EXPORTER_OTLP_${signal}_ENDPOINT`);
  const name = own !== undefined ? `OTEL_EXPORTER_OTLP_${signal}_ENDPOINT` : 'OTEL_EXPORTER_OTLP_ENDPOINT';
  const given = own ?? read('OTEL_EXPORTER_OTLP_ENDPOINT');
  if (given === undefined) return undefined;
  urlOf(given, () => bad(name, 'must be an http or https URL'));
  return own !== undefined ? given : `${given.replace(/\/+$/, '')}/v1/${signal.toLowerCase()}`;
}

/** A signal's headers: its own variable's, or the base one's. */
function signalHeaders(signal: 'TRACES' | 'METRICS', read: (name: string) => string | undefined, bad: (name: string, takes: string) => never): Record<string, string> | undefined {
  const name = read(`OTEL_EXPORTER_OTLP_${signal}_HEADERS`) ? `OTEL_EXPORTER_OTLP_${signal}_HEADERS` : 'OTEL_EXPORTER_OTLP_HEADERS';
  return headersOf(read(name), () => bad(name, 'must be key=value pairs separated by commas'));
}

function urlOf(given: string, bad: () => never): string {
  let url: URL;
  try {
    url = new URL(given);
  } catch {
    return bad();
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') bad();
  return given;
}

export function headersOf(text: string | undefined, bad: () => never): Record<string, string> | undefined {
  if (text === undefined) return undefined;
  const headers: Record<string, string> = {};
  for (const pair of text.split(',')) {
    if (pair.trim() === '') continue;
    const at = pair.indexOf('=');
    if (at <= 0) bad();
    try {
      headers[decodeURIComponent(pair.slice(0, at).trim())] = decodeURIComponent(pair.slice(at + 1).trim());
    } catch {
      bad();
    }
  }
  return headers;
}

let processTracing: { env: Environment; tracing: Tracing } | undefined;

/** Where a function's environment names the secret holding its OTLP headers (the stack's `otlpHeadersSecret`). */
export const OTLP_HEADERS_SECRET_ENV = 'FUNDUQ_OTLP_HEADERS_SECRET';

/**
 * The process's tracing, from the function's environment (the OTEL_* variables the stack sets): one
 * per container. Headers from a secret are read at the first export, not at the cold start, and kept.
 */
export function tracingOf(env: Environment, readSecret: (secretId: string) => Promise<string> = readWithSdk): Tracing {
  if (processTracing?.env !== env) {
    const config = tracingConfig((name) => env[name]);
    const secretId = env[OTLP_HEADERS_SECRET_ENV];
    const tracing = createTracing(secretId && (config.endpoint || config.metricsEndpoint) ? withSecretHeaders(config, secretId, readSecret) : config);
    processTracing = { env, tracing };
  }
  return processTracing.tracing;
}

/** The collector's headers from the secret, with each signal's own from the variables (read once for both). */
function withSecretHeaders(config: TracingConfig, secretId: string, readSecret: (secretId: string) => Promise<string>): TracingConfig {
  const secret = headersFromSecret(secretId, {}, readSecret);
  const beside = (given: TracingConfig['headers']) => async () => ({ ...(given as Record<string, string> | undefined), ...(await secret()) });
  return { ...config, headers: beside(config.headers), ...(config.metricsEndpoint ? { metricsHeaders: beside(config.metricsHeaders) } : {}) };
}

/** Thrown at an export whose headers could not be read: that batch of spans is not sent. */
export class OtlpHeadersUnreadable extends Error {
  readonly code = 'otlp_headers_unreadable';
}

/**
 * Headers read from a secret once, beside the variables' own; a read that fails is logged with its
 * code and tried again at the next export (a secret set after the deploy heals without a restart),
 * and the spans of that export go nowhere rather than to a collector that would refuse them.
 */
export function headersFromSecret(secretId: string, given: Record<string, string> | undefined, readSecret: (secretId: string) => Promise<string>): () => Promise<Record<string, string>> {
  let read: Promise<Record<string, string>> | undefined;
  return () => {
    read ??= readSecret(secretId)
      .then((text) => ({
        ...given,
        ...headersOf(text, () => {
          throw new OtlpHeadersUnreadable(`the secret ${secretId} does not hold OTLP headers: write them as key=value pairs separated by commas`);
        }),
      }))
      .catch((error: unknown) => {
        read = undefined;
        const failure = error instanceof OtlpHeadersUnreadable ? error : new OtlpHeadersUnreadable(`the secret ${secretId} named by otlpHeadersSecret could not be read (${(error as Error).message}): check that it exists in this account and region`);
        // A log line of its own, as the functions' logger writes them: this module loads on one machine too.
        console.error(JSON.stringify({ level: 'ERROR', message: failure.message, code: failure.code }));
        throw failure;
      });
    return read;
  };
}

async function readWithSdk(secretId: string): Promise<string> {
  const { SecretsManagerClient, GetSecretValueCommand } = await import('@aws-sdk/client-secrets-manager');
  const { SecretString } = await new SecretsManagerClient({}).send(new GetSecretValueCommand({ SecretId: secretId }));
  if (!SecretString) throw new Error('it holds no string');
  return SecretString;
}

/**
 * A handler whose invocation returns only once its spans are sent: Lambda freezes an environment
 * between invocations, and a batch still waiting in the span processor then goes nowhere (or
 * late, with the next invocation). Nothing to send costs nothing.
 */
export function flushing<A extends unknown[], R>(tracing: Tracing, handler: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
  return async (...args) => {
    try {
      return await handler(...args);
    } finally {
      await tracing.flush();
    }
  };
}
