import { z } from 'zod';
import type { Budget } from '../core/model.js';
import type { LeaseSettings, LinkSettings } from '../core/settings.js';
import type { RetentionPolicy } from '../core/retention/policy.js';
import { FUNCTION_NAME } from '../providers/function-name.js';

/**
 * Every setting of funduq, in one schema: its name in the environment (`npm start` and the
 * Lambda handlers read it there) and in CDK context (`cdk synth -c key=value`, `cdk.json`), how
 * its text is read, and its default. The same value means the same thing wherever it is given,
 * and a bad one fails with the same message: one line naming the setting and what it takes.
 */
interface Setting<T, D extends T | undefined = T | undefined> {
  env?: string;
  context?: string;
  /** Reads the given text; a refusal says what the setting takes, in a phrase ("a whole number ≥ 0"). */
  read: z.ZodType<T, z.ZodTypeDef, string>;
  default: D;
}

const whole = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .regex(/^\d{1,15}$/, `must be a whole number ≥ ${min}${max < Number.MAX_SAFE_INTEGER ? ` and ≤ ${max}` : ''}`)
    .transform(Number)
    .refine((n) => n >= min && n <= max, `must be a whole number ≥ ${min}${max < Number.MAX_SAFE_INTEGER ? ` and ≤ ${max}` : ''}`);
/** A limit that is either set to a whole number ≥ 1 or left unset; 0 would refuse every run. */
const limit = (max?: { most: number; why: string }) => {
  const said = max ? `must be a whole number from 1 to ${max.most} (${max.why}; leave it unset for no limit)` : 'must be a whole number ≥ 1 (leave it unset for no limit)';
  return z
    .string()
    .regex(/^\d{1,15}$/, said)
    .transform(Number)
    .refine((n) => n >= 1 && (max === undefined || n <= max.most), said);
};
const text = z.string().min(1, 'must not be empty');
/** Days of retention: a whole number from 1 to 36,500, or `forever`. */
const days = z
  .string()
  .regex(/^(\d{1,5}|forever)$/, 'must be a whole number of days from 1 to 36500, or forever')
  .transform((v) => (v === 'forever' ? null : Number(v)))
  .refine((n) => n === null || (n >= 1 && n <= 36_500), 'must be a whole number of days from 1 to 36500, or forever');
const flag = z.enum(['true', 'false'], { errorMap: () => ({ message: 'must be true or false' }) }).transform((v) => v === 'true');
const oneOf = <T extends string>(...values: [T, ...T[]]) =>
  z.enum(values, { errorMap: () => ({ message: `must be one of ${values.join(', ')}` }) });
const list = z
  .string()
  .transform((v) => v.split(',').map((item) => item.trim()).filter((item) => item !== ''))
  .refine((items) => items.length > 0, 'must name at least one, separated by commas');

type Spec<T> = { env?: string; context?: string; read: z.ZodType<T, z.ZodTypeDef, string> };

function setting<T>(spec: Spec<T> & { default: T }): Setting<T, T>;
function setting<T>(spec: Spec<T>): Setting<T, undefined>;
function setting<T>(spec: Spec<T> & { default?: T }): Setting<T, T | undefined> {
  return { ...spec, default: spec.default };
}

/** The gateway's own behaviour: the same on one machine and on AWS, handed to the functions by the stack. */
export const GATEWAY_SETTINGS = {
  /**
   * Runs that may wait `queued` per thread, beside the one running; the next is refused with
   * 429 thread_queue_full. 0: no run waits, one arriving while another runs is refused.
   */
  threadQueueLimit: setting({ env: 'FUNDUQ_THREAD_QUEUE_LIMIT', context: 'threadQueueLimit', read: whole(0), default: 8 }),
  /** Runs a tenant may start per clock minute (429 tenant_rate_limited); unset: no limit. */
  tenantRunsPerMinute: setting({ env: 'FUNDUQ_TENANT_RUNS_PER_MINUTE', context: 'tenantRunsPerMinute', read: limit() }),
  /** Runs a tenant may have queued or running at once (429 tenant_concurrency_limited); unset: no limit. */
  // Each run holding one of a tenant's places is named on the tenant's item (so a place is given
  // back once), and a DynamoDB item holds 400 KB: 1,000 run ids of up to 256 characters fit.
  tenantConcurrentRuns: setting({
    env: 'FUNDUQ_TENANT_CONCURRENT_RUNS',
    context: 'tenantConcurrentRuns',
    read: limit({ most: 1000, why: "each run holding a place is named on its tenant's record" }),
  }),
  /**
   * The budget of every tenant without one of its own (429 tenant_budget_exhausted once spent):
   * tokens and/or a cost in `tenantBudgetCurrency`, per `tenantBudgetPeriod`. Unset: no default budget.
   */
  tenantBudgetTokens: setting({ env: 'FUNDUQ_TENANT_BUDGET_TOKENS', context: 'tenantBudgetTokens', read: limit() }),
  tenantBudgetCost: setting({
    env: 'FUNDUQ_TENANT_BUDGET_COST',
    context: 'tenantBudgetCost',
    read: z
      .string()
      .regex(/^\d{1,12}(\.\d{1,6})?$/, 'must be an amount > 0 such as 25 or 12.50 (leave it unset for no cost budget)')
      .transform(Number)
      .refine((n) => n > 0, 'must be an amount > 0 such as 25 or 12.50 (leave it unset for no cost budget)'),
  }),
  tenantBudgetCurrency: setting({
    env: 'FUNDUQ_TENANT_BUDGET_CURRENCY',
    context: 'tenantBudgetCurrency',
    read: z.string().regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code such as USD'),
    default: 'USD',
  }),
  tenantBudgetPeriod: setting({ env: 'FUNDUQ_TENANT_BUDGET_PERIOD', context: 'tenantBudgetPeriod', read: oneOf('day', 'month'), default: 'month' as const }),
  /**
   * A provider whose link closed keeps the runs it holds this long, for a reconnect that resumes
   * them; then they fail `provider_left_holding_it`. API Gateway closes every WebSocket at 2 hours,
   * so a provider reconnects at least that often. Unset: 60.
   */
  linkGraceSeconds: setting({ env: 'FUNDUQ_LINK_GRACE_SECONDS', context: 'linkGraceSeconds', read: whole(1, 86_400) }),
  /** A run of a `link` agent that no provider took this long fails `no_provider_took_it`. Unset: 45. */
  linkUnclaimedSeconds: setting({ env: 'FUNDUQ_LINK_UNCLAIMED_SECONDS', context: 'linkUnclaimedSeconds', read: whole(1, 86_400) }),
  /**
   * Retention (docs/audit.md), for every tenant with no policy of its own: days a thread (its runs
   * and events) is kept after its last activity (unset: for ever), days a usage record is kept
   * (unset: for ever), and days an audit record is kept (the gateway's alone; unset: 400).
   */
  retentionContentDays: setting({ env: 'FUNDUQ_RETENTION_CONTENT_DAYS', context: 'retentionContentDays', read: days }),
  retentionUsageDays: setting({ env: 'FUNDUQ_RETENTION_USAGE_DAYS', context: 'retentionUsageDays', read: days }),
  retentionAuditDays: setting({ env: 'FUNDUQ_RETENTION_AUDIT_DAYS', context: 'retentionAuditDays', read: days }),
  /** The console (`/console`) leaves message text and tool arguments out of its pages: for operators who must not read conversations. */
  consoleHideContent: setting({ env: 'FUNDUQ_CONSOLE_HIDE_CONTENT', context: 'consoleHideContent', read: flag }),
};

/** The provider link's clocks the gateway settings set, in the core's words; each left unset keeps the core's default. */
export function linkSettings(settings: Partial<Pick<GatewaySettings, 'linkGraceSeconds' | 'linkUnclaimedSeconds'>>): Partial<LinkSettings> {
  return {
    ...(settings.linkGraceSeconds !== undefined ? { graceMs: settings.linkGraceSeconds * 1000 } : {}),
    ...(settings.linkUnclaimedSeconds !== undefined ? { unclaimedMs: settings.linkUnclaimedSeconds * 1000 } : {}),
  };
}

/** The gateway's retention the settings describe, in the core's words; each left unset keeps the core's default. */
export function retentionSettings(settings: Partial<Pick<GatewaySettings, 'retentionContentDays' | 'retentionUsageDays' | 'retentionAuditDays'>>): Partial<RetentionPolicy> {
  return {
    ...(settings.retentionContentDays !== undefined ? { contentDays: settings.retentionContentDays } : {}),
    ...(settings.retentionUsageDays !== undefined ? { usageDays: settings.retentionUsageDays } : {}),
    ...(settings.retentionAuditDays !== undefined ? { auditDays: settings.retentionAuditDays } : {}),
  };
}

/** The default budget the gateway settings describe, in the core's words; undefined when they set none. */
export function defaultBudget(settings: GatewaySettings): Budget | undefined {
  if (settings.tenantBudgetTokens === undefined && settings.tenantBudgetCost === undefined) return undefined;
  return {
    period: settings.tenantBudgetPeriod,
    ...(settings.tenantBudgetTokens !== undefined ? { tokens: settings.tenantBudgetTokens } : {}),
    ...(settings.tenantBudgetCost !== undefined ? { cost: { amount: settings.tenantBudgetCost, currency: settings.tenantBudgetCurrency } } : {}),
  };
}

/** `npm start` only. */
export const LOCAL_SETTINGS = {
  dataDir: setting({ env: 'FUNDUQ_DATA_DIR', read: text, default: '.funduq' }),
  /** Where the record is kept: `sqlite` (one file in the data dir), or `dynamodb`: the AWS adapter on dynalite, to see the AWS data model on one machine. */
  store: setting({ env: 'FUNDUQ_STORE', read: oneOf('sqlite', 'dynamodb'), default: 'sqlite' as const }),
  host: setting({ env: 'HOST', read: text, default: '127.0.0.1' }),
  port: setting({ env: 'PORT', read: whole(0, 65535), default: 8787 }),
  heartbeatMs: setting({ env: 'FUNDUQ_HEARTBEAT_MS', read: whole(100), default: 10_000 }),
  /**
   * Admission: requests with a body in flight at once (until their responses end), and the bytes
   * they declare; the next waits for room with its body unread, for at most the wait, then is
   * refused with 503 gateway_busy and Retry-After, rather than taking the process's memory.
   */
  maxInflightRequests: setting({ env: 'FUNDUQ_MAX_INFLIGHT_REQUESTS', read: whole(1), default: 512 }),
  maxInflightMb: setting({ env: 'FUNDUQ_MAX_INFLIGHT_MB', read: whole(1), default: 16 }),
  admissionWaitMs: setting({ env: 'FUNDUQ_ADMISSION_WAIT_MS', read: whole(0, 60_000), default: 2_000 }),
  /**
   * Runs handed from the threads' queues to their agents at once (the dispatcher's concurrency on
   * AWS); more wait queued, in arrival order. A restart that finds many queued runs starts them so.
   */
  maxRunningRuns: setting({ env: 'FUNDUQ_MAX_RUNNING_RUNS', read: whole(1), default: 256 }),
  apiKeysFile: setting({ env: 'FUNDUQ_API_KEYS', read: text }),
  adminToken: setting({ env: 'FUNDUQ_ADMIN_TOKEN', read: text }),
  /** A second token that signs in to the console read-only (its pages, never its acts); needs FUNDUQ_ADMIN_TOKEN. */
  consoleReadToken: setting({ env: 'FUNDUQ_CONSOLE_READ_TOKEN', read: text }),
  agentsFile: setting({ env: 'FUNDUQ_AGENTS_FILE', read: text }),
  publicUrl: setting({ env: 'FUNDUQ_PUBLIC_URL', read: z.string().url('must be a URL (http://host:port)') }),
  /**
   * Push notifications may go to this machine's own addresses (loopback), which are otherwise
   * refused as any private address is (a caller could make the gateway call local services).
   * For trying push on one machine; `npm start` warns while it is on.
   */
  pushAllowLoopback: setting({ env: 'FUNDUQ_PUSH_ALLOW_LOOPBACK', read: flag, default: false }),
  /**
   * Push notifications may go to `http:` targets, which are otherwise refused: a notification
   * carries the config's credentials and a signed token, readable on the way in plain http.
   * For trying push on one machine; `npm start` warns while it is on.
   */
  pushAllowHttp: setting({ env: 'FUNDUQ_PUSH_ALLOW_HTTP', read: flag, default: false }),
};

/** `cdk deploy` only (some reach the functions through their environment, by the stack). */
export const DEPLOY_SETTINGS = {
  /** `apiKey` (a usage plan and one generated key), `jwt` (a Cognito user pool) or `none` (demo only). */
  apiAuth: setting({ env: 'FUNDUQ_API_AUTH', context: 'apiAuth', read: oneOf('none', 'apiKey', 'jwt'), default: 'apiKey' as const }),
  /** The Cognito user pool whose tokens `apiAuth=jwt` accepts. */
  jwtUserPoolArn: setting({ context: 'jwtUserPoolArn', read: text }),
  /** With `apiAuth=jwt`, the claim that names the caller's tenant; unset, each subject is its own tenant. */
  jwtTenantClaim: setting({ env: 'FUNDUQ_JWT_TENANT_CLAIM', context: 'jwtTenantClaim', read: text }),
  /** An existing Secrets Manager secret holding the admin token; unset, the stack generates one. */
  adminTokenSecretName: setting({ context: 'adminTokenSecretName', read: text }),
  /** `true`: the stack generates a second token, in a secret of its own, that signs in to the console read-only. */
  consoleReadToken: setting({ context: 'consoleReadToken', read: flag }),
  stageName: setting({ context: 'stageName', read: z.string().regex(/^[A-Za-z0-9_-]{1,128}$/, 'may hold letters, digits, - and _ only'), default: 'v1' }),
  /** Retention of every function's and the state machine's logs, in days (one CloudWatch Logs offers). */
  logRetentionDays: setting({ context: 'logRetentionDays', read: whole(1), default: 30 }),
  /**
   * At most this many runs are dispatched from the thread queue at once: the queue's event source
   * maximum concurrency (SQS allows 2 to 1,000). Nothing is reserved for it.
   */
  dispatcherConcurrency: setting({ context: 'dispatcherConcurrency', read: whole(2, 1000), default: 10 }),
  /**
   * Opt-in: concurrency reserved for the dispatcher, so other functions of the account cannot take
   * it; more than dispatcherConcurrency (interjections are invoked beside the queue's dispatches).
   * Unset by default: Lambda keeps 100 of an account's concurrency unreserved, so a reservation is
   * refused at deploy on an account whose quota is below 100 plus it (a new account's is 10).
   */
  dispatcherReservedConcurrency: setting({ context: 'dispatcherReservedConcurrency', read: whole(3, 1000) }),
  /**
   * Minutes between two sweeps of requests whose door died before recording their run (their
   * places and the asks they closed go back): a leaked place is given back within this plus the
   * doors' 15-minute timeout and a minute. Each sweep is one invocation and a few index queries.
   */
  arrivalSweepMinutes: setting({ context: 'arrivalSweepMinutes', read: whole(1, 1440), default: 5 }),
  /**
   * A dispatcher renews its run's lease this often while it relays (a write of a few hundred
   * bytes), and a lease not renewed for `leaseLapseSeconds` has lapsed: the sweep (every
   * `arrivalSweepMinutes`) fails its run `dispatch_lost` and lets its thread's message go. A
   * thread waits at most the lapse and a sweep's period (1 + 5 minutes by default) after its
   * dispatcher died. The stack hands them to the functions (the environment names); one machine
   * takes no lease: its restart fails such runs `orphaned_by_restart`.
   */
  leaseRenewSeconds: setting({ env: 'FUNDUQ_LEASE_RENEW_SECONDS', context: 'leaseRenewSeconds', read: whole(1, 300), default: 20 }),
  leaseLapseSeconds: setting({ env: 'FUNDUQ_LEASE_LAPSE_SECONDS', context: 'leaseLapseSeconds', read: whole(10, 3600), default: 60 }),
  /**
   * A run admitted on an idle thread is relayed by the streaming door that admitted it (its message
   * is queued all the same, and held for it by a dispatcher): its first event waits for no queue
   * hand-off and its events for no reader's poll. The streaming doors then invoke agents, as the
   * dispatcher does. `false`: the thread queue hands every run to a dispatcher.
   */
  relayAtDoor: setting({ env: 'FUNDUQ_RELAY_AT_DOOR', context: 'relayAtDoor', read: flag, default: true }),
  /** Receives of a thread-queue message before it goes to the dead-letter queue. */
  maxReceiveCount: setting({ context: 'maxReceiveCount', read: whole(1, 1000), default: 3 }),
  /** Keep the tables when the stack is deleted. */
  retainData: setting({ context: 'retainData', read: flag, default: true }),
  domainName: setting({ context: 'domainName', read: text }),
  certificateArn: setting({ context: 'certificateArn', read: text }),
  alarmEmail: setting({ context: 'alarmEmail', read: text }),
  /**
   * The Lambda functions agents of the `lambda` kind may name (names or ARNs, comma-separated): the
   * dispatcher may invoke these and no others.
   */
  agentFunctions: setting({
    context: 'agentFunctions',
    read: list.refine(
      (names) => names.every((name) => FUNCTION_NAME.test(name)),
      'must name Lambda functions (names or ARNs, without a qualifier or a wildcard), separated by commas',
    ),
  }),
  /**
   * For tests only: push targets on loopback, over plain http (a receiver in the test's process).
   * Never on a real stage: it lifts the push sender's guard against requests to the function's own network.
   */
  pushToLoopbackForTests: setting({ env: 'FUNDUQ_PUSH_TO_LOOPBACK_FOR_TESTS', context: 'pushToLoopbackForTests', read: flag, default: false }),
  /**
   * Where every function sends its traces (an OTLP/HTTP collector's base URL): it reaches them as
   * the standard `OTEL_EXPORTER_OTLP_ENDPOINT` (read by `runtimes/tracing.ts`). Unset: no traces.
   */
  otlpEndpoint: setting({ env: 'OTEL_EXPORTER_OTLP_ENDPOINT', context: 'otlpEndpoint', read: z.string().url('must be a URL (https://collector.example:4318)') }),
  /**
   * A Secrets Manager secret (its name) holding the headers every function sends with its traces,
   * as `OTEL_EXPORTER_OTLP_HEADERS` writes them (`key=value,…`): a vendor's key stays out of the template.
   */
  otlpHeadersSecret: setting({ env: 'FUNDUQ_OTLP_HEADERS_SECRET', context: 'otlpHeadersSecret', read: text }),
  /**
   * Every function sends its traces to CloudWatch's own OTLP endpoint in the stack's region, signed
   * with SigV4 by its role (no collector, no layer; CloudWatch's Transaction Search must be on).
   * Instead of `otlpEndpoint`, never beside it.
   */
  otlpCloudWatch: setting({ env: 'FUNDUQ_OTLP_CLOUDWATCH', context: 'otlpCloudWatch', read: flag, default: false }),
};

type Group = Record<string, Setting<any, any>>;
type Values<G extends Group> = {
  [K in keyof G]: G[K] extends Setting<infer T, infer D> ? ([D] extends [undefined] ? T | undefined : T) : never;
};

/** A setting that cannot be used: the message names it as the user gave it, and what it takes. */
export class SettingsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SettingsError';
  }
}

/**
 * Reads a group of settings from the environment or from CDK context. Empty values are unset. The
 * first bad value throws `SettingsError`: "funduq: threadQueueLimit (FUNDUQ_THREAD_QUEUE_LIMIT or
 * -c threadQueueLimit) must be a whole number ≥ 0, got "-1"".
 */
export function readSettings<G extends Group>(
  group: G,
  from: 'env' | 'context',
  get: (name: string) => unknown,
  options: { defaults?: boolean } = {},
): Values<G> {
  const values: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(group)) {
    const name = from === 'env' ? spec.env : spec.context;
    const raw = name === undefined ? undefined : get(name);
    const given = raw === undefined || raw === null || String(raw).trim() === '' ? undefined : String(raw).trim();
    if (given === undefined) {
      if (spec.default !== undefined && options.defaults !== false) values[key] = spec.default;
      continue;
    }
    const parsed = spec.read.safeParse(given);
    if (!parsed.success) {
      throw new SettingsError(`funduq: ${settingName(key, spec)} ${parsed.error.issues[0]?.message ?? 'is not valid'}, got "${given}"`);
    }
    values[key] = parsed.data;
  }
  return values as Values<G>;
}

/** How a setting is named in messages: by its key, and where it is given. */
export function settingName(key: string, spec: Pick<Spec<unknown>, 'env' | 'context'>): string {
  const where = [spec.env, spec.context && `-c ${spec.context}`].filter(Boolean).join(' or ');
  return `${key} (${where})`;
}

/** Values back to the environment's text, for a function the stack configures. */
export function toEnvironment<G extends Group>(group: G, values: Partial<Values<G>>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, spec] of Object.entries(group)) {
    const value = (values as Record<string, unknown>)[key];
    if (spec.env !== undefined && value !== undefined) env[spec.env] = Array.isArray(value) ? value.join(',') : String(value);
  }
  return env;
}

/** The settings of a dispatcher's lease (deploy settings the stack hands to the functions, read there from the environment). */
export const LEASE_SETTINGS = { leaseRenewSeconds: DEPLOY_SETTINGS.leaseRenewSeconds, leaseLapseSeconds: DEPLOY_SETTINGS.leaseLapseSeconds };

/** The lease's settings in the core's words. */
export function leaseSettings(values: Values<typeof LEASE_SETTINGS>): LeaseSettings {
  return { renewMs: values.leaseRenewSeconds * 1000, lapseMs: values.leaseLapseSeconds * 1000 };
}

export type GatewaySettings = Values<typeof GATEWAY_SETTINGS>;
export type LocalSettingValues = Values<typeof LOCAL_SETTINGS>;
export type DeploySettings = Values<typeof DEPLOY_SETTINGS>;
