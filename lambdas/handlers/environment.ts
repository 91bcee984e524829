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
} as const;
