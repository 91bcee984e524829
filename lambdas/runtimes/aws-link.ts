import { ApiGatewayManagementApiClient } from '@aws-sdk/client-apigatewaymanagementapi';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SFNClient } from '@aws-sdk/client-sfn';
import { SQSClient } from '@aws-sdk/client-sqs';
import { ApiGatewayLinkTransport } from '../adapters/aws/api-gateway-link-transport.js';
import { DynamoLinkRoster } from '../adapters/aws/dynamodb/link-roster.js';
import { SqsLinkTimer } from '../adapters/aws/sqs-link-timer.js';
import { linkKeysFromSecret } from '../adapters/crypto/link-keys.js';
import type { LinkDeps } from '../core/link/deps.js';
import type { Clock, IdSource } from '../core/ports.js';
import { linkChannels } from '../doors/link.js';
import { logger } from './powertools.js';
import type { Context } from 'aws-lambda';
import { systemClock } from '../adapters/system-clock.js';
import { linkDoor } from '../doors/link.js';
import { LINK_PROOF_HEADER, type Part } from '../link/wire.js';
import { createWiring, sqsThreadQueue, stepFunctionsAskTimer, type Clients, type Environment, type WiringOptions } from './aws.js';
import { ENV } from './environment.js';

/** What the link's functions are given beside the record: the link-timer queue, the connections API, the key secret. */
export interface LinkClients extends Clients {
  connections: NonNullable<Clients['connections']>;
  sqs: NonNullable<Clients['sqs']>;
  secretsManager: NonNullable<Clients['secretsManager']>;
}

/** The link's ports, and the adapters behind them its own functions use as well. */
export interface AwsLink {
  deps: LinkDeps;
  roster: DynamoLinkRoster;
  transport: ApiGatewayLinkTransport;
  timer: SqsLinkTimer;
}

/**
 * The provider link on AWS, where the stack deploys it (it names the link's key secret): the
 * roster in the runs table, frames over API Gateway's `@connections`, the timers as delayed
 * messages on the link-timer queue, funduq's key derived from the secret's random string (the same
 * key in every function, as LINK.md decided), and no dispatcher held for a run. The secret is read
 * on first use (a failed read is tried again on the next); undefined where the stack deploys no link.
 */
export function awsLink(env: Environment, clients: Clients, clock: Pick<Clock, 'now'>, ids: IdSource): (() => Promise<AwsLink>) | undefined {
  const secretArn = env[ENV.linkKeySecretArn];
  if (!secretArn) return undefined;
  const given = linkClients(clients);
  let link: Promise<AwsLink> | undefined;
  return () =>
    (link ??= (async (): Promise<AwsLink> => {
      const { SecretString } = await given.secretsManager.send(new GetSecretValueCommand({ SecretId: secretArn }));
      if (!SecretString) throw new Error(`the link key secret ${secretArn} holds no string`);
      const roster = new DynamoLinkRoster({ client: given.dynamodb, table: required(env, ENV.runsTable), now: () => clock.now() });
      const transport = new ApiGatewayLinkTransport(given.connections);
      const timer = new SqsLinkTimer({ client: given.sqs, queueUrl: required(env, ENV.linkTimerQueueUrl), now: () => clock.now() });
      return {
        deps: { roster, channels: linkChannels(transport, () => ids.newId()), timer, keys: linkKeysFromSecret(SecretString), holdUntilSettled: false },
        roster,
        transport,
        timer,
      };
    })().catch((error: unknown) => {
      link = undefined;
      throw error;
    }));
}

/** The clients of the link's own functions (its routes, its timers): what they call, and no more. */
export function linkFunctionClients(env: Environment): Clients {
  return {
    dynamodb: new DynamoDBClient({}),
    sqs: new SQSClient({}),
    sfn: new SFNClient({}),
    secretsManager: new SecretsManagerClient({}),
    connections: connectionsClient(env),
  };
}

/** The `@connections` API of the stack's WebSocket API, where the stack deploys the link. */
export function connectionsClient(env: Environment): ApiGatewayManagementApiClient | undefined {
  const endpoint = env[ENV.linkConnectionsUrl];
  return endpoint ? new ApiGatewayManagementApiClient({ endpoint }) : undefined;
}

function linkClients(clients: Clients): LinkClients {
  for (const name of ['connections', 'sqs', 'secretsManager'] as const) {
    if (!clients[name]) throw new Error(`the ${name} client is not given to this function, which takes provider links`);
  }
  return clients as LinkClients;
}

function required(env: Environment, name: string): string {
  const value = env[name];
  if (!value) throw new Error(`the environment variable ${name} is not set`);
  return value;
}

/** What API Gateway hands a WebSocket route's function (the Lambda proxy integration). */
export interface WebSocketEvent {
  requestContext: { routeKey: string; connectionId: string; eventType?: string };
  headers?: Record<string, string | undefined>;
  body?: string | null;
  isBase64Encoded?: boolean;
}

/**
 * The provider link's WebSocket API, one function for its three routes. `$connect` checks the
 * handshake's proof in the upgrade request's headers (a refusal is the upgrade's status: API
 * Gateway passes no reason on, so it is logged here) and keeps the welcome for the provider's
 * `hello`, since nothing can be sent before `$connect` returns; `$default` is one message, handled
 * and returned (messages of one connection may be handled concurrently, in any order: the core's
 * frames are made for that); `$disconnect` is the link's end. No invocation outlasts its message.
 */
export function createLinkRoutes(options: Omit<WiringOptions, 'providers' | 'link'>) {
  const { env, clients } = options;
  const link = awsLink(env, clients, options.clock ?? systemClock, options.ids ?? { newId: () => crypto.randomUUID() });
  if (!link) throw new Error('the link function needs the link key secret (FUNDUQ_LINK_KEY_SECRET_ARN)');
  let ready: Promise<{ door: ReturnType<typeof linkDoor>; taken: Awaited<ReturnType<typeof link>> }> | undefined;
  const setUp = () =>
    (ready ??= link().then((taken) => {
      const { gateway } = createWiring({
        ...options,
        queue: options.queue ?? sqsThreadQueue(env, clients),
        timer: options.timer ?? stepFunctionsAskTimer(env, clients),
        link: taken.deps,
      });
      const parts = { take: (connectionId: string, part: Part) => taken.roster.takePart(connectionId, part), forget: async () => {} };
      return { door: linkDoor(gateway, taken.transport, parts), taken };
    })).catch((error: unknown) => {
      ready = undefined;
      throw error;
    });
  return async (event: WebSocketEvent, context?: Context): Promise<{ statusCode: number }> => {
    if (context) logger.addContext(context);
    const { routeKey, connectionId } = event.requestContext;
    const { door, taken } = await setUp();
    switch (routeKey) {
      case '$connect': {
        const opened = await door.open(headerOf(event.headers, LINK_PROOF_HEADER), connectionId);
        if (!opened.ok) {
          logger.warn('a provider link was refused', { connectionId, code: opened.code, message: opened.message });
          return { statusCode: opened.status };
        }
        await taken.roster.keepWelcome(connectionId, opened.welcome);
        return { statusCode: 200 };
      }
      case '$disconnect':
        await door.closed(connectionId);
        return { statusCode: 200 };
      default: {
        const text = event.body == null ? '' : event.isBase64Encoded ? Buffer.from(event.body, 'base64').toString('utf8') : event.body;
        if (isHello(text)) {
          const welcome = await taken.roster.welcomeOf(connectionId);
          if (welcome !== undefined) await taken.transport.send(connectionId, welcome);
          return { statusCode: 200 };
        }
        await door.message(connectionId, text);
        return { statusCode: 200 };
      }
    }
  };
}

/** API Gateway keeps a header's case as sent. */
function headerOf(headers: WebSocketEvent['headers'], name: string): string | undefined {
  const found = Object.entries(headers ?? {}).find(([key]) => key.toLowerCase() === name);
  return found?.[1];
}

function isHello(text: string): boolean {
  if (text.length > 64) return false;
  try {
    return (JSON.parse(text) as { type?: unknown }).type === 'hello';
  } catch {
    return false;
  }
}
