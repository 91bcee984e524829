import { READER_POLLING } from '../adapters/aws/polling-change-feed.js';
import { ApiGatewayManagementApiClient } from '@aws-sdk/client-apigatewaymanagementapi';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SFNClient } from '@aws-sdk/client-sfn';
import { SQSClient } from '@aws-sdk/client-sqs';
import { Hono } from 'hono';
import { createApp } from '../doors/app.js';
import { errorResponse } from '../doors/http-errors.js';
import { agentCatalog } from '../providers/definition.js';
import {
  awsClients,
  createWiring,
  principalResolver,
  readSecretFromExtension,
  sqsThreadQueue,
  besideByLambda,
  stepFunctionsAskTimer,
  type Clients,
  type Environment,
  type WiringOptions,
} from './aws.js';
import { awsLink } from './link/aws.js';
import { ENV } from './environment.js';
import { GATEWAY_SETTINGS, readSettings } from './settings.js';
import { segmentCheck } from '../adapters/crypto/audit-seal.js';
import { systemClock } from '../adapters/system-clock.js';
import { logger } from './powertools.js';
import { createProviders, PROVIDER_KINDS } from './providers.js';
import type { DoorRelay } from '../core/ports.js';

/**
 * What the doors call: the record, the thread queue, the dispatcher (interjections, by an
 * asynchronous invoke), the ask waiter (stopped on an answer or a cancel) and the push signing
 * secret (its public keys are the JWKS), in the function's region; and the provider link's
 * `@connections` (a cancel is sent on to the provider holding the run), where the stack deploys it.
 */
export function doorsClients(env: Environment): Clients {
  const classes = { dynamodb: DynamoDBClient, sqs: SQSClient, sfn: SFNClient, lambda: LambdaClient, secretsManager: SecretsManagerClient, connections: ApiGatewayManagementApiClient };
  return awsClients(env, classes);
}

/**
 * A response stream may last 15 minutes (Lambda and API Gateway); the SSE framing ends it
 * cleanly before that, and the caller resumes with Last-Event-ID.
 */
export const SSE_MAX_DURATION_MS = 13 * 60_000 + 30_000;
/** API Gateway drops a stream idle for 5 minutes; the design asks for a comment every 15 s at most. */
export const SSE_HEARTBEAT_MS = 10_000;

/** The doors' thread queue: interjections are dispatched beside their thread's run, by an asynchronous invoke of the dispatcher. */
function interjectingQueue(env: Environment, clients: Clients) {
  return sqsThreadQueue(env, clients, besideByLambda(env, clients));
}

export interface DoorsOptions extends Omit<WiringOptions, 'providers'> {
  /**
   * The streaming doors relay the runs they admit on idle threads themselves (with the agents'
   * providers, as the dispatcher has them); the buffered doors hand every run to the thread queue.
   */
  doorRelay?: DoorRelay;
  /** Reads a secret by ARN; by default through the AWS Parameters and Secrets extension. */
  readSecret?: (secretId: string) => Promise<string>;
}

/**
 * The doors as one Hono app over the AWS adapters, for both door functions. The A2A door vets push
 * targets and announces push notifications, which the stream handler delivers. The admin token is
 * read on the first request, since the secrets extension answers only once the function is
 * invoked (never during its init); a failed read is tried again on the next request. Without a
 * token secret there are no admin routes: open ones are for a gateway on one machine only.
 */
export function doorsApp(options: DoorsOptions) {
  const { env, clients } = options;
  const link = awsLink(env, clients, options.clock ?? systemClock, options.ids ?? { newId: () => crypto.randomUUID() });
  const secretArn = options.env[ENV.adminTokenSecretArn];
  const readSecret = options.readSecret ?? ((secretId: string) => readSecretFromExtension(secretId, options.env));
  // The link's key is read with the admin token, on the first request: the wiring waits for it.
  const build = async () => {
    const linked = await link?.();
    // The doors' subscriptions are callers' readers: quick to a run's first event and to a queued run's start.
    const relaying = options.doorRelay ? { providers: createProviders } : {};
    const { gateway, pushKeys } = createWiring(
      { polling: READER_POLLING, ...options, ...relaying, ...(linked ? { link: linked.deps, proofs: linked.proofs, auditSeal: linked.seal } : {}) },
      { queue: interjectingQueue, timer: stepFunctionsAskTimer },
    );
    const token = secretArn ? await readSecret(secretArn) : undefined;
    const readTokenArn = options.env[ENV.consoleReadTokenSecretArn];
    const readToken = token !== undefined && readTokenArn ? await readSecret(readTokenArn) : undefined;
    const { consoleHideContent } = readSettings({ consoleHideContent: GATEWAY_SETTINGS.consoleHideContent }, 'env', (name) => options.env[name]);
    return createApp({
      gateway,
      principal: principalResolver(options.env),
      admin:
        token !== undefined
          ? { token, agents: agentCatalog(PROVIDER_KINDS), onAuditLost: (entry, error) => logger.error('audit_write_failed: an audit record was not written; keep it from this line', { error: error as Error, record: entry }) }
          : undefined,
      // The console is an admin surface: without the admin token there is none (never an open one on AWS).
      ...(token !== undefined ? { console: { adminToken: token, ...(readToken !== undefined ? { readToken } : {}), hideContent: consoleHideContent ?? false, ...segmentCheck(gateway.audit.publicKey) } } : {}),
      a2a: { publicUrl: options.env[ENV.publicUrl] },
      ...(pushKeys ? { pushKeys: async () => (await pushKeys()).published() } : {}),
      sse: { heartbeatMs: SSE_HEARTBEAT_MS, maxDurationMs: SSE_MAX_DURATION_MS },
      onError: (error) => logger.error('a door failed to answer', { error: error as Error }),
      onAuditLost: (entry, error) => logger.error('audit_write_failed: an audit record was not written; keep it from this line', { error: error as Error, record: entry }),
      ...(options.tracing?.enabled ? { tracing: options.tracing } : {}),
    });
  };
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

