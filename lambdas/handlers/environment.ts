/**
 * The names of the environment variables the stack sets and the handlers read: the one
 * contract between `lib/` and `lambdas/handlers/`. Names only; reading them is the handlers' job.
 */
export const ENV = {
  runsTable: 'FUNDUQ_RUNS_TABLE',
  runEventsTable: 'FUNDUQ_RUN_EVENTS_TABLE',
  threadQueueUrl: 'FUNDUQ_THREAD_QUEUE_URL',
  askWaiterArn: 'FUNDUQ_ASK_WAITER_ARN',
  threadQueueLimit: 'FUNDUQ_THREAD_QUEUE_LIMIT',
  adminTokenSecretArn: 'FUNDUQ_ADMIN_TOKEN_SECRET_ARN',
  /** How API Gateway authenticates callers (`none` | `apiKey` | `jwt`): the doors take the principal from it. */
  apiAuth: 'FUNDUQ_API_AUTH',
  /**
   * The base URL callers reach the doors at (the custom domain, or the stage's URL): agent cards
   * name their endpoints by it, since a request reaching the function no longer carries the stage.
   */
  publicUrl: 'FUNDUQ_PUBLIC_URL',
  /** Per-tenant limits; unset means none. */
  tenantRunsPerMinute: 'FUNDUQ_TENANT_RUNS_PER_MINUTE',
  tenantConcurrentRuns: 'FUNDUQ_TENANT_CONCURRENT_RUNS',
  /** The JWT claim naming the caller's tenant (e.g. `custom:tenant`); unset, each subject is a tenant of its own. */
  jwtTenantClaim: 'FUNDUQ_JWT_TENANT_CLAIM',
  /** The dispatcher function's name: the doors invoke it asynchronously for interjections. */
  dispatcherFunction: 'FUNDUQ_DISPATCHER_FUNCTION',
} as const;
