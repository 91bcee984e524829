/**
 * The two tables' shapes, shared by the store adapter, the local runtime (which creates them
 * on dynalite) and the CDK construct (which declares them), so the three cannot drift.
 */
export const RUNS_TABLE = {
  partitionKey: 'pk',
  sortKey: 'sk',
  /** Runs of a thread in arrival order. */
  byThread: { indexName: 'byThread', partitionKey: 'threadKey', sortKey: 'arrival' },
  /** Root runs (A2A tasks) of a tenant, by creation time. */
  byTenant: { indexName: 'byTenant', partitionKey: 'tenantKey', sortKey: 'createdAt' },
  timeToLive: 'ttl',
} as const;

export const RUN_EVENTS_TABLE = {
  partitionKey: 'runId',
  sortKey: 'seq',
  timeToLive: 'ttl',
} as const;

export interface TableNames {
  runs: string;
  runEvents: string;
}
