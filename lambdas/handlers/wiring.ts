import { randomUUID } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SFNClient } from '@aws-sdk/client-sfn';
import { SQSClient } from '@aws-sdk/client-sqs';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { Tracer } from '@aws-lambda-powertools/tracer';
import type { Context } from 'hono';
import { createGateway, type Gateway } from '../core/gateway.js';
import type { Principal } from '../core/model.js';
import { ANONYMOUS } from '../core/model.js';
import type { AskTimer, Clock, IdSource, Provider } from '../core/ports.js';
import type { PrincipalResolver } from '../doors/principal.js';
import { DynamoRunStore } from '../adapters/aws/dynamodb/run-store.js';
import { PollingChangeFeed } from '../adapters/aws/polling-change-feed.js';
import { SqsThreadQueue } from '../adapters/aws/sqs-thread-queue.js';
import { StepFunctionsAskTimer } from '../adapters/aws/step-functions-ask-timer.js';
import { AgUiHttpProvider } from '../providers/agui-http.js';
import { DemoProvider } from '../providers/demo.js';
import { ENV } from './environment.js';

/** Powertools, configured by the POWERTOOLS_* variables the stack sets. */
export const logger = new Logger();
export const metrics = new Metrics();
export const tracer = new Tracer();

export type Environment = Record<string, string | undefined>;

export interface Clients {
  dynamodb: DynamoDBClient;
  sqs: SQSClient;
  sfn: SFNClient;
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
export function createWiring(options: WiringOptions): { gateway: Gateway; store: DynamoRunStore } {
  const { env } = options;
  const clock = options.clock ?? { now: () => Date.now() };
  const ids = options.ids ?? { newId: () => randomUUID() };
  const dynamodb = options.clients?.dynamodb ?? tracer.captureAWSv3Client(new DynamoDBClient({}));
  const store = new DynamoRunStore({
    client: dynamodb,
    tables: { runs: required(env, ENV.runsTable), runEvents: required(env, ENV.runEventsTable) },
  });
  const gateway = createGateway({
    store,
    queue: new SqsThreadQueue({
      client: options.clients?.sqs ?? tracer.captureAWSv3Client(new SQSClient({})),
      queueUrl: required(env, ENV.threadQueueUrl),
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
    settings: { threadQueueLimit: threadQueueLimit(env) },
  });
  return { gateway, store };
}

/**
 * Who is asking, from what API Gateway established before the request reached the door: the API
 * key (each key is a tenant of its own) or the JWT's subject. `none` serves everyone as anonymous.
 */
export function principalResolver(env: Environment): PrincipalResolver {
  const mode = env[ENV.apiAuth] ?? 'none';
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
      return subject ? principal(`jwt:${subject}`) : undefined;
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

function threadQueueLimit(env: Environment): number {
  const value = Number(required(env, ENV.threadQueueLimit));
  if (!Number.isInteger(value) || value < 1) throw new Error(`${ENV.threadQueueLimit} must be a whole number from 1`);
  return value;
}

function required(env: Environment, name: string): string {
  const value = env[name];
  if (!value) throw new Error(`the environment variable ${name} is not set`);
  return value;
}
