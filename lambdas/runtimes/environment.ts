import { DEPLOY_SETTINGS, GATEWAY_SETTINGS, LOCAL_SETTINGS } from './settings.js';

/**
 * The names of the environment variables the stack sets and the AWS runtime reads: the one
 * contract between `lib/` and `lambdas/runtimes/aws.ts`. Names only. The settings' own names are
 * the settings schema's (`settings.ts`).
 */
export const ENV = {
  runsTable: 'FUNDUQ_RUNS_TABLE',
  runEventsTable: 'FUNDUQ_RUN_EVENTS_TABLE',
  threadQueueUrl: 'FUNDUQ_THREAD_QUEUE_URL',
  askWaiterArn: 'FUNDUQ_ASK_WAITER_ARN',
  threadQueueLimit: GATEWAY_SETTINGS.threadQueueLimit.env!,
  adminTokenSecretArn: 'FUNDUQ_ADMIN_TOKEN_SECRET_ARN',
  /** The secret of the console's read-only token, when the stack has one (`consoleReadToken`). */
  consoleReadTokenSecretArn: 'FUNDUQ_CONSOLE_READ_TOKEN_SECRET_ARN',
  /** How API Gateway authenticates callers (`none` | `apiKey` | `jwt`): the doors take the principal from it. */
  apiAuth: DEPLOY_SETTINGS.apiAuth.env!,
  /**
   * The base URL callers reach the doors at (the custom domain, or the stage's URL): agent cards
   * name their endpoints by it, since a request reaching the function no longer carries the stage.
   */
  publicUrl: LOCAL_SETTINGS.publicUrl.env!,
  /** Per-tenant limits; unset means none. */
  tenantRunsPerMinute: GATEWAY_SETTINGS.tenantRunsPerMinute.env!,
  tenantConcurrentRuns: GATEWAY_SETTINGS.tenantConcurrentRuns.env!,
  /** The JWT claim naming the caller's tenant (e.g. `custom:tenant`); unset, each subject is a tenant of its own. */
  jwtTenantClaim: DEPLOY_SETTINGS.jwtTenantClaim.env!,
  /** Test-only: push targets on loopback over http are allowed (doors and stream handler). */
  pushToLoopbackForTests: DEPLOY_SETTINGS.pushToLoopbackForTests.env!,
  /** The dispatcher function's name: the doors invoke it asynchronously for interjections. */
  dispatcherFunction: 'FUNDUQ_DISPATCHER_FUNCTION',
  /** The secret push signing keys are derived from: the stream handler signs with them, the doors publish them. */
  pushSigningSecretArn: 'FUNDUQ_PUSH_SIGNING_SECRET_ARN',
  /** The secret funduq's link key (Ed25519) is derived from: set where the stack deploys the provider link. */
  linkKeySecretArn: 'FUNDUQ_LINK_KEY_SECRET_ARN',
  /** The WebSocket API's `@connections` endpoint (`https://{api}.execute-api.{region}.amazonaws.com/{stage}`). */
  linkConnectionsUrl: 'FUNDUQ_LINK_CONNECTIONS_URL',
  /** The standard queue the link's timers are delayed messages on. */
  linkTimerQueueUrl: 'FUNDUQ_LINK_TIMER_QUEUE_URL',
} as const;
