import { ApiGatewayManagementApiClient } from '@aws-sdk/client-apigatewaymanagementapi';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SFNClient } from '@aws-sdk/client-sfn';
import { SQSClient } from '@aws-sdk/client-sqs';
import { ApiGatewayLinkTransport } from '../../adapters/aws/link/api-gateway-transport.js';
import { DynamoLinkRoster } from '../../adapters/aws/link/roster.js';
import { SqsLinkTimer } from '../../adapters/aws/link/sqs-timer.js';
import { actorProofsFromSecret, linkKeysFromSecret } from '../../adapters/crypto/link-keys.js';
import { auditSealFromSecret } from '../../adapters/crypto/audit-seal.js';
import type { AuditSeal } from '../../core/audit/seal.js';
import type { Gateway } from '../../core/gateway.js';
import type { LinkDeps } from '../../core/deps.js';
import type { ActorProofs, Clock, IdSource } from '../../core/ports.js';
import { linkChannels, linkDoor } from '../../doors/link/door.js';
import type { Part } from '../../../packages/provider/src/wire.js';
import { awsClients, type Clients, type Environment } from '../aws.js';
import { ENV } from '../environment.js';

/** What the link's functions are given beside the record: the link-timer queue, the connections API, the key secret. */
export interface LinkClients extends Clients {
  connections: NonNullable<Clients['connections']>;
  sqs: NonNullable<Clients['sqs']>;
  secretsManager: NonNullable<Clients['secretsManager']>;
}

/** The link's ports, and the adapters behind them its own functions use as well. */
export interface AwsLink {
  deps: LinkDeps;
  /** Actor chains' hops signed with the same key: verifying a chain adds no AWS request. */
  proofs: ActorProofs;
  /** The audit log's seal with the same key (the doors publish its public half at `/admin/audit/key`). */
  seal: AuditSeal;
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
        proofs: actorProofsFromSecret(SecretString),
        seal: auditSealFromSecret(SecretString),
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
  return awsClients(env, { dynamodb: DynamoDBClient, sqs: SQSClient, sfn: SFNClient, secretsManager: SecretsManagerClient, connections: ApiGatewayManagementApiClient });
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

/**
 * The link's door on AWS, over a gateway wired with the link: frames go out over `@connections`,
 * and the parts of a larger frame wait in the record (each message is an invocation of its own).
 */
export function awsLinkDoor(gateway: Gateway, link: AwsLink) {
  const parts = { take: (connectionId: string, part: Part) => link.roster.takePart(connectionId, part), forget: async () => {} };
  return linkDoor(gateway, link.transport, parts);
}
