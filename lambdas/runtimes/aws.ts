import { randomUUID } from 'node:crypto';
import type { ApiGatewayManagementApiClient } from '@aws-sdk/client-apigatewaymanagementapi';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { LambdaClient } from '@aws-sdk/client-lambda';
import type { SFNClient } from '@aws-sdk/client-sfn';
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { Context } from 'hono';
import type { AuditSeal } from '../core/audit/seal.js';
import { recordProjections } from '../core/a2a/task-state.js';
import { createGateway, type Gateway } from '../core/gateway.js';
import type { LinkDeps } from '../core/deps.js';
import { ANONYMOUS, type Principal } from '../core/model.js';
import type { ActorProofs, AskTimer, Clock, DoorRelay, IdSource, LinkedProvider, Provider, ThreadQueue } from '../core/ports.js';
import { composeRunLife, type RunLife } from '../core/run-life.js';
import { telemetryObservers } from '../adapters/otel/observers.js';
import type { Tracing } from '../adapters/otel/tracing.js';
import type { PrincipalResolver } from '../doors/principal.js';
import { createDynamoStore, type DynamoStore } from '../adapters/aws/dynamodb/store/store.js';
import type { TableNames } from '../adapters/aws/dynamodb/tables.js';
import { DEFAULT_PUSH_SENDER_SETTINGS, HttpPushSender, type PushSenderSettings } from '../adapters/http/push-sender.js';
import type { PushKeys } from '../adapters/http/push-signing.js';
import { PollingChangeFeed, type PollingOptions } from '../adapters/aws/polling-change-feed.js';
import { lambdaDispatchBeside } from '../adapters/aws/lambda-dispatch-beside.js';
import { SqsThreadQueue, type ThreadMessage } from '../adapters/aws/sqs-thread-queue.js';
import { StepFunctionsAskTimer } from '../adapters/aws/step-functions-ask-timer.js';
import { systemClock } from '../adapters/system-clock.js';
import { stockClientRules } from '../adapters/agui/stock-client-rules.js';
import type { ProviderRuntime } from '../providers/definition.js';
import { ENV } from './environment.js';
import { logger, metrics } from './powertools.js';
import { PUSH_SENDER_SETTINGS } from './push-delivery.js';
import { secretPushKeys } from './push-keys.js';
import { defaultBudget, DEPLOY_SETTINGS, GATEWAY_SETTINGS, LEASE_SETTINGS, leaseSettings, linkSettings, readSettings, retentionSettings } from './settings.js';
import { runMetrics } from './run-metrics.js';
import { usageMetrics } from './usage-metrics.js';

export type Environment = Record<string, string | undefined>;

/** The AWS clients of one function: its handler makes them (`awsClients`), tests give their own. */
export interface Clients {
  dynamodb: DynamoDBClient;
  sqs?: SQSClient;
  sfn?: SFNClient;
  lambda?: LambdaClient;
  secretsManager?: SecretsManagerClient;
  /** API Gateway's `@connections` of the provider link's WebSocket API. */
  connections?: ApiGatewayManagementApiClient;
}

/**
 * The classes of a function's clients. A function names the ones it calls and no others: its
 * bundle then carries no client it never uses (a cold start imports every module bundled).
 */
export type ClientClasses = { dynamodb: ClientClass<DynamoDBClient> } & { [K in Exclude<keyof Clients, 'dynamodb'>]?: ClientClass<NonNullable<Clients[K]>> };
type ClientClass<T> = new (config: { endpoint?: string }) => T;

/**
 * A function's clients, in its region, from the classes it names. The `@connections` client is
 * made only where the stack deploys the provider link (it names the WebSocket API's endpoint).
 */
export function awsClients(env: Environment, classes: ClientClasses): Clients {
  const { dynamodb, connections, ...others } = classes;
  const endpoint = env[ENV.linkConnectionsUrl];
  return {
    ...Object.fromEntries(Object.entries(others).map(([name, Client]) => [name, new Client({})])),
    dynamodb: new dynamodb({}),
    ...(connections && endpoint ? { connections: new connections({ endpoint }) } : {}),
  };
}

export interface WiringOptions {
  env: Environment;
  clients: Clients;
  /** The ask timer made by the caller, in place of the ports' one: the expirer's hand-back of a re-arm to its own execution. */
  timer?: AskTimer;
  /** The thread queue made by the caller, in place of the ports' one: the bench's stand-in in one process. */
  queue?: ThreadQueue;
  /** The record, made by the caller to count its requests (the bench's cost model). */
  store?: DynamoStore;
  /**
   * Who watches runs' lives; by default the usage meter and the runs' metrics, on CloudWatch
   * through Powertools' embedded metric format (`defaultObservers`).
   */
  observers?: readonly RunLife[];
  /** The providers runs are dispatched to: the dispatcher's, and the streaming doors' (which relay runs on idle threads). */
  providers?: (runtime: ProviderRuntime) => Readonly<Record<string, Provider | LinkedProvider>>;
  /** Where this function relays the runs it admits on idle threads itself (the streaming doors: `DoorRelays`); absent, a dispatcher runs every run. */
  doorRelay?: DoorRelay;
  /** Over `PUSH_SENDER_SETTINGS`: tests allow their loopback receiver. */
  push?: Partial<PushSenderSettings>;
  /** Another reading of time (tests); the timers stay the machine's. */
  clock?: Pick<Clock, 'now'>;
  ids?: IdSource;
  /** The provider link's ports (`awsLink`), in the functions that take links; absent, a link run fails `provider_unknown`. */
  link?: LinkDeps;
  /** Actor chains checked and relayed with funduq's link key (`awsLink`); absent, a request with a chain is refused `invalid_chain`. */
  proofs?: ActorProofs;
  /** funduq's identity key for sealing the audit log (the sweep's); absent, records are written and left to the sweep to seal. */
  auditSeal?: AuditSeal;
  /** Traces runs' lives (and, at the doors, requests): `tracingOf(env)`; absent or disabled, nothing is traced. */
  tracing?: Tracing;
  /** How the function's subscriptions poll the record (the doors': `READER_POLLING`); absent, `DEFAULT_POLLING`. */
  polling?: Partial<PollingOptions>;
}

/**
 * The ports a function takes beside the record, each made from its clients when it is wired:
 * `sqsThreadQueue`, `stepFunctionsAskTimer`. A function names only those it calls, so its bundle
 * leaves out the others' adapters and SDK commands. A port it is not given stays unwired: using it
 * there is a defect, and throws.
 */
export interface AwsPorts {
  queue?: (env: Environment, clients: Clients) => ThreadQueue;
  timer?: (env: Environment, clients: Clients) => AskTimer;
}

/**
 * The gateway with its AWS adapters: the store on DynamoDB, the ports the function takes (the
 * thread queue on SQS FIFO, the ask timer on Step Functions) and the change feed by polling the
 * store. Built once per container; the gateway's settings are read from the environment with the
 * one settings schema, so a bad value fails the function's start with the message `cdk synth`
 * would have given.
 */
export function createWiring(options: WiringOptions, ports: AwsPorts = {}): { gateway: Gateway; queue: ThreadQueue; pushKeys?: () => Promise<PushKeys> } {
  const { env, clients } = options;
  const settings = readSettings(GATEWAY_SETTINGS, 'env', (name) => env[name]);
  const clock: Clock = options.clock ? { ...systemClock, now: () => options.clock!.now() } : systemClock;
  const ids = options.ids ?? { newId: () => randomUUID() };
  const store = options.store ?? createStore(options);
  const queue = options.queue ?? ports.queue?.(env, clients) ?? NO_QUEUE;
  const push = awsPushSender(options, clock);
  const gateway = createGateway(
    {
      store,
      queue,
      timer: options.timer ?? ports.timer?.(env, clients) ?? NO_TIMER,
      feed: new PollingChangeFeed(store, {
        ...options.polling,
        onError: (error) => logger.warn('polling the record for changes failed', { error: error as Error }),
      }),
      providers: options.providers?.({ clock, ids, lambda: clients.lambda }) ?? {},
      rules: stockClientRules,
      clock,
      ids,
      ...(options.link ? { link: options.link } : {}),
      ...(options.doorRelay ? { doorRelay: options.doorRelay } : {}),
      ...(options.proofs ? { proofs: options.proofs } : {}),
      ...(options.auditSeal ? { auditSeal: options.auditSeal } : {}),
      auditLost: (entry, error) => logger.error('audit_write_failed: an audit record of funduq\'s own act was not written; keep it from this line', { error: error as Error, record: entry }),
      settings: {
        threadQueueLimit: settings.threadQueueLimit,
        tenantRunsPerMinute: settings.tenantRunsPerMinute,
        tenantConcurrentRuns: settings.tenantConcurrentRuns,
        tenantBudget: defaultBudget(settings),
        link: linkSettings(settings),
        lease: leaseSettings(readSettings(LEASE_SETTINGS, 'env', (name) => env[name])),
        retention: retentionSettings(settings),
      },
      life: composeRunLife([...(options.observers ?? defaultObservers()), ...telemetryObservers(options.tracing)], (error, moment) =>
        logger.error('an observer of runs failed; the run goes on', { error: error as Error, moment }),
      ),
    },
    { a2a: { push: push.sender } },
  );
  return { gateway, queue, ...(push.keys ? { pushKeys: push.keys } : {}) };
}

/** The observers of runs' lives on AWS: the usage meter and the runs' metrics. */
export function defaultObservers(): RunLife[] {
  return [usageMetrics(), runMetrics(metrics)];
}

/**
 * The push sender on AWS, with the settings it was made with (the stream handler bounds each
 * invocation's sends by them). Only a function given the Secrets Manager client signs or
 * publishes push keys (the stream handler, the doors).
 */
export function awsPushSender(
  options: Pick<WiringOptions, 'env' | 'clients' | 'push'>,
  clock: Pick<Clock, 'now'>,
): { sender: HttpPushSender; settings: PushSenderSettings; keys?: () => Promise<PushKeys> } {
  const settings = pushSettings(options.env, options.push);
  const keys = options.clients.secretsManager ? pushKeysOf(options, clock) : undefined;
  return { sender: new HttpPushSender(settings, keys), settings, ...(keys ? { keys } : {}) };
}

/** The keys push notifications are signed with, from the secret the stack names; none without one. */
function pushKeysOf(options: Pick<WiringOptions, 'env' | 'clients'>, clock: Pick<Clock, 'now'>): (() => Promise<PushKeys>) | undefined {
  const secretArn = options.env[ENV.pushSigningSecretArn];
  if (!secretArn) return undefined;
  return secretPushKeys({ client: client(options.clients, 'secretsManager'), secretArn, clock, issuer: options.env[ENV.publicUrl] });
}

/**
 * The thread queue on SQS FIFO. Interjections are taken only where `beside` says how (the doors:
 * `besideByLambda`); a function that takes no port of this kind never references it, so its
 * bundle leaves the SQS and Lambda clients out.
 */
export function sqsThreadQueue(env: Environment, clients: Clients, beside?: (message: ThreadMessage) => Promise<void>): SqsThreadQueue {
  return new SqsThreadQueue({ client: client(clients, 'sqs'), queueUrl: required(env, ENV.threadQueueUrl), beside });
}

/** The dispatcher's asynchronous invoke for interjections, where the stack names the dispatcher (the doors only). */
export function besideByLambda(env: Environment, clients: Clients): ((message: ThreadMessage) => Promise<void>) | undefined {
  const functionName = env[ENV.dispatcherFunction];
  return functionName && clients.lambda ? lambdaDispatchBeside({ client: clients.lambda, functionName }) : undefined;
}

/** The ask timer on Step Functions: one execution of the ask waiter per waiting run. */
export function stepFunctionsAskTimer(env: Environment, clients: Clients): AskTimer {
  return new StepFunctionsAskTimer({ client: client(clients, 'sfn'), stateMachineArn: required(env, ENV.askWaiterArn) });
}

function client<K extends keyof Clients>(clients: Clients, name: K): NonNullable<Clients[K]> {
  const found = clients[name];
  if (!found) throw new Error(`the ${name} client is not given to this function`);
  return found;
}

const notWired = (port: string) => async (): Promise<never> => {
  throw new Error(`this function has no ${port}: the stack grants it none, and nothing it does should need one`);
};
const NO_QUEUE: ThreadQueue = { enqueue: notWired('thread queue'), dispatchBeside: notWired('thread queue'), release: notWired('thread queue'), redeliver: notWired('thread queue') };
const NO_TIMER: AskTimer = { arm: notWired('ask timer'), disarm: notWired('ask timer') };

/**
 * The push sender's settings on AWS. `FUNDUQ_PUSH_TO_LOOPBACK_FOR_TESTS` (the stack sets it from
 * `-c pushToLoopbackForTests=true`) lets a test's receiver on loopback over plain http be a target.
 */
function pushSettings(env: Environment, over: Partial<PushSenderSettings> = {}): PushSenderSettings {
  const { pushToLoopbackForTests } = readSettings({ pushToLoopbackForTests: DEPLOY_SETTINGS.pushToLoopbackForTests }, 'env', (name) => env[name]);
  return { ...DEFAULT_PUSH_SENDER_SETTINGS, ...PUSH_SENDER_SETTINGS, ...(pushToLoopbackForTests ? { allowHttp: true, allowLoopback: true } : {}), ...over };
}

/** The record's tables, as the stack named them. */
export function tableNames(env: Environment): TableNames {
  return { runs: required(env, ENV.runsTable), runEvents: required(env, ENV.runEventsTable) };
}

/** The record on DynamoDB. */
export function createStore(options: { env: Environment; clients: Pick<Clients, 'dynamodb'> }): DynamoStore {
  return createDynamoStore({ client: options.clients.dynamodb, tables: tableNames(options.env), projections: recordProjections });
}

/**
 * Who is asking, from what API Gateway established before the request reached the door: the API
 * key (each key is a tenant of its own) or the JWT's subject, in the tenant its tenant claim names
 * (FUNDUQ_JWT_TENANT_CLAIM). `none` serves everyone as anonymous.
 */
export function principalResolver(env: Environment): PrincipalResolver {
  const mode = readSettings({ apiAuth: { ...DEPLOY_SETTINGS.apiAuth, default: 'none' as const } }, 'env', (name) => env[name]).apiAuth;
  // The JWT claim that names the caller's tenant (a Cognito attribute: `custom:tenant`); unset, each
  // subject is a tenant of its own.
  const tenantClaim = env[ENV.jwtTenantClaim] || undefined;
  return (c: Context) => {
    const context = (c.env as { requestContext?: ApiGatewayContext } | undefined)?.requestContext;
    if (mode === 'none') return ANONYMOUS;
    if (mode === 'apiKey') {
      const key = context?.identity?.apiKeyId;
      return key ? principal(`apikey:${key}`) : undefined;
    }
    if (mode === 'jwt') {
      const claims = context?.authorizer?.claims;
      const subject = typeof claims?.sub === 'string' ? claims.sub : undefined;
      if (!subject) return undefined;
      if (tenantClaim === undefined) return principal(`jwt:${subject}`);
      // A token without the claim speaks for no tenant: refused, never filed under a default one.
      const tenant = claims?.[tenantClaim];
      return typeof tenant === 'string' && tenant !== '' ? { id: `jwt:${subject}`, tenant } : undefined;
    }
    return undefined;
  };
}

interface ApiGatewayContext {
  identity?: { apiKeyId?: string };
  authorizer?: { claims?: Record<string, unknown> };
}

function principal(id: string): Principal {
  return { id, tenant: id };
}

function required(env: Environment, name: string): string {
  const value = env[name];
  if (!value) throw new Error(`the environment variable ${name} is not set`);
  return value;
}

/**
 * GET on the AWS Parameters and Secrets Lambda extension, authenticated by the function's own
 * session token (https://docs.aws.amazon.com/secretsmanager/latest/userguide/retrieving-secrets_lambda.html).
 */
export async function readSecretFromExtension(secretId: string, env: Environment): Promise<string> {
  const port = env.PARAMETERS_SECRETS_EXTENSION_HTTP_PORT ?? '2773';
  const response = await fetch(`http://localhost:${port}/secretsmanager/get?secretId=${encodeURIComponent(secretId)}`, {
    headers: { 'X-Aws-Parameters-Secrets-Token': required(env, 'AWS_SESSION_TOKEN') },
  });
  if (!response.ok) throw new Error(`the secret ${secretId} could not be read: HTTP ${response.status}`);
  const { SecretString } = (await response.json()) as { SecretString?: unknown };
  if (typeof SecretString !== 'string' || SecretString === '') throw new Error(`the secret ${secretId} holds no string`);
  return SecretString;
}
