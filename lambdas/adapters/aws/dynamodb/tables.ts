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
  /**
   * One index for the record's other listings, each in partitions of its own (`ixKey`), so a new
   * listing needs no new index (CloudFormation adds one GSI per stack update): usage records under
   * `usage#<UTC month>`, sorted `<tenant>/<endedAt>/<runId>` (a tenant's listing is a key condition
   * per month, the export across tenants a query per month).
   */
  byKey: { indexName: 'byKey', partitionKey: 'ixKey', sortKey: 'ixSort' },
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
