import { randomUUID } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { SFNClient } from '@aws-sdk/client-sfn';
import { SQSClient } from '@aws-sdk/client-sqs';
import { Hono, type Context } from 'hono';
import { createGateway, type Gateway } from '../core/gateway.js';
import { ANONYMOUS, type Principal } from '../core/model.js';
import type { AskTimer, Clock, IdSource, Provider } from '../core/ports.js';
import { createApp } from '../doors/app.js';
import { errorResponse } from '../doors/http-errors.js';
import type { PrincipalResolver } from '../doors/principal.js';
import { DynamoRunStore } from '../adapters/aws/dynamodb/run-store.js';
import type { TableNames } from '../adapters/aws/dynamodb/tables.js';
import { HttpPushSender, type PushSenderSettings } from '../adapters/http/push-sender.js';
import { PollingChangeFeed } from '../adapters/aws/polling-change-feed.js';
import { SqsThreadQueue } from '../adapters/aws/sqs-thread-queue.js';
import { StepFunctionsAskTimer } from '../adapters/aws/step-functions-ask-timer.js';
import { AgUiHttpProvider } from '../providers/agui-http.js';
import { DemoProvider } from '../providers/demo.js';
import { ENV } from './environment.js';
import { logger, tracer } from './powertools.js';
import { PUSH_SENDER_SETTINGS } from './push-delivery.js';

export type Environment = Record<string, string | undefined>;

export interface Clients {
  dynamodb: DynamoDBClient;
  sqs: SQSClient;
  sfn: SFNClient;
  lambda: LambdaClient;
}

export interface WiringOptions {
  env: Environment;
  /** Defaults: clients for the function's region, traced by X-Ray. */
  clients?: Partial<Clients>;
  /** The ask expirer keeps the re-arm for its state machine instead of starting an execution. */
  timer?: AskTimer;
  /**
   * When a run must have ended (epoch ms): the dispatcher's Lambda deadline less the time to
   * settle. A run's time limit is cut to it, so a run that would outlive the function fails
   * `provider_timeout` instead of being killed and later failed `dispatch_lost`.
   */
  runDeadline?: () => number | undefined;
  clock?: Clock;
  ids?: IdSource;
}

/**
 * The gateway with its AWS adapters: the store on DynamoDB, the thread queue on SQS FIFO, the
 * ask timer on Step Functions and the change feed by polling the store. Built once per container.
 */
export function createWiring(options: WiringOptions): { gateway: Gateway } {
  const { env } = options;
  const clock = options.clock ?? { now: () => Date.now() };
  const ids = options.ids ?? { newId: () => randomUUID() };
  const store = createStore(options);
  const gateway = createGateway({
    store,
    queue: new SqsThreadQueue({
      client: options.clients?.sqs ?? tracer.captureAWSv3Client(new SQSClient({})),
      queueUrl: required(env, ENV.threadQueueUrl),
      // Only the doors accept interjections; the other functions are not given the dispatcher.
      beside: env[ENV.dispatcherFunction]
        ? {
            client: options.clients?.lambda ?? tracer.captureAWSv3Client(new LambdaClient({})),
            functionName: env[ENV.dispatcherFunction]!,
          }
        : undefined,
    }),
    timer:
      options.timer ??
      new StepFunctionsAskTimer({
        client: options.clients?.sfn ?? tracer.captureAWSv3Client(new SFNClient({})),
        stateMachineArn: required(env, ENV.askWaiterArn),
      }),
    feed: new PollingChangeFeed(store, {
      onError: (error) => logger.warn('polling the record for changes failed', { error: error as Error }),
    }),
    providers: boundedBy(options.runDeadline, clock, {
      demo: new DemoProvider({ clock, ids }),
      'agui-http': new AgUiHttpProvider({ clock }),
    }),
    clock,
    ids,
    settings: {
      threadQueueLimit: wholeNumber(env, ENV.threadQueueLimit),
      ...(env[ENV.tenantRunsPerMinute] ? { tenantRunsPerMinute: wholeNumber(env, ENV.tenantRunsPerMinute) } : {}),
      ...(env[ENV.tenantConcurrentRuns] ? { tenantConcurrentRuns: wholeNumber(env, ENV.tenantConcurrentRuns) } : {}),
    },
  });
  return { gateway };
}

/** The record's tables, as the stack named them. */
export function tableNames(env: Environment): TableNames {
  return { runs: required(env, ENV.runsTable), runEvents: required(env, ENV.runEventsTable) };
}

/** The record on DynamoDB. */
export function createStore(options: Pick<WiringOptions, 'env' | 'clients'>): DynamoRunStore {
  return new DynamoRunStore({
    client: options.clients?.dynamodb ?? tracer.captureAWSv3Client(new DynamoDBClient({})),
    tables: tableNames(options.env),
  });
}

/**
 * Who is asking, from what API Gateway established before the request reached the door: the API
 * key (each key is a tenant of its own) or the JWT's subject, in the tenant its tenant claim names
 * (FUNDUQ_JWT_TENANT_CLAIM). `none` serves everyone as anonymous.
 */
export function principalResolver(env: Environment): PrincipalResolver {
  const mode = env[ENV.apiAuth] ?? 'none';
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
    throw new Error(`${ENV.apiAuth} must be none, apiKey or jwt, got "${mode}"`);
  };
}

interface ApiGatewayContext {
  identity?: { apiKeyId?: string };
  authorizer?: { claims?: Record<string, unknown> };
}

function boundedBy(
  deadline: (() => number | undefined) | undefined,
  clock: Clock,
  providers: Record<string, Provider>,
): Record<string, Provider> {
  if (!deadline) return providers;
  const bounded: Record<string, Provider> = {};
  for (const [kind, provider] of Object.entries(providers)) {
    bounded[kind] = {
      run(input, context) {
        const end = deadline();
        if (end === undefined) return provider.run(input, context);
        const left = Math.max(1, Math.floor((end - clock.now()) / 1000));
        const timeoutSeconds = Math.min(context.agent.timeoutSeconds, left);
        return provider.run(input, { ...context, agent: { ...context.agent, timeoutSeconds } });
      },
    };
  }
  return bounded;
}

function principal(id: string): Principal {
  return { id, tenant: id };
}

function wholeNumber(env: Environment, name: string): number {
  const value = Number(required(env, name));
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a whole number from 1`);
  return value;
}

function required(env: Environment, name: string): string {
  const value = env[name];
  if (!value) throw new Error(`the environment variable ${name} is not set`);
  return value;
}

/**
 * A response stream may last 15 minutes (Lambda and API Gateway); the SSE framing ends it
 * cleanly before that, and the caller resumes with Last-Event-ID.
 */
export const SSE_MAX_DURATION_MS = 13 * 60_000 + 30_000;
/** API Gateway drops a stream idle for 5 minutes; the design asks for a comment every 15 s at most. */
export const SSE_HEARTBEAT_MS = 10_000;

export interface DoorsOptions extends WiringOptions {
  /** Reads a secret by ARN; by default through the AWS Parameters and Secrets extension. */
  readSecret?: (secretId: string) => Promise<string>;
  /** Over `PUSH_SENDER_SETTINGS`: tests allow their loopback receiver. */
  push?: Partial<PushSenderSettings>;
}

/**
 * The doors as one Hono app over the AWS adapters, for both door functions. The A2A door vets push
 * targets and announces push notifications, which the stream handler delivers. The admin token is
 * read on the first request, since the secrets extension answers only once the function is
 * invoked (never during its init); a failed read is tried again on the next request. Without a
 * token secret there are no admin routes: open ones are for a gateway on one machine only.
 */
export function doorsApp(options: DoorsOptions) {
  const { gateway } = createWiring(options);
  const secretArn = options.env[ENV.adminTokenSecretArn];
  const readSecret = options.readSecret ?? ((secretId: string) => readSecretFromExtension(secretId, options.env));
  const build = async () =>
    createApp({
      gateway,
      principal: principalResolver(options.env),
      admin: secretArn ? { token: await readSecret(secretArn) } : undefined,
      a2a: { publicUrl: options.env[ENV.publicUrl], push: new HttpPushSender({ ...PUSH_SENDER_SETTINGS, ...options.push }) },
      sse: { heartbeatMs: SSE_HEARTBEAT_MS, maxDurationMs: SSE_MAX_DURATION_MS },
      onError: (error) => logger.error('a door failed to answer', { error: error as Error }),
    });
  let app: ReturnType<typeof build> | undefined;
  const outer = new Hono();
  outer.all('*', async (c) => {
    app ??= build().catch((error: unknown) => {
      app = undefined;
      throw error;
    });
    return (await app).fetch(c.req.raw, c.env);
  });
  outer.onError((error, c) => {
    logger.error('the doors could not be set up', { error });
    return errorResponse(c, 'internal_error', 'the gateway failed to answer; the error was logged');
  });
  return outer;
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
