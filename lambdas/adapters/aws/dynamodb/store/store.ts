import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { RecordProjections, RunStore } from '../../../../core/ports.js';
import type { TableNames } from '../tables.js';
import { DynamoAgents } from './agents.js';
import { DynamoAuditLog } from './audit.js';
import { DynamoArrivals } from './arrivals.js';
import { DynamoMessageClaims } from './claims.js';
import { DynamoRunLeases } from './leases.js';
import { DynamoEventLog } from './events.js';
import { DynamoHandle, type StoreUsage } from './handle.js';
import { DynamoPrincipals } from './principals.js';
import { DynamoProviders } from './providers.js';
import { DynamoPushConfigs } from './push-configs.js';
import { DynamoRetention } from './retention.js';
import { DynamoRunRecords } from './runs.js';
import { DynamoTaskIndex } from './tasks.js';
import { DynamoTenants } from './tenants.js';
import { DynamoThreads } from './threads.js';
import { DynamoUsageRecords } from './usage.js';

export type { StoreUsage } from './handle.js';

export interface DynamoStoreOptions {
  client: DynamoDBClient;
  tables: TableNames;
  /** What the store computes beside each run it writes (the task index's entries). */
  projections: RecordProjections;
}

/**
 * The record on DynamoDB (and on dynalite locally). One runs table holds threads, runs with their
 * asks, agents and the rest, each kind under keys of its own (`keys.ts`); run_events holds each
 * event as a JSON string under (`runId`, `seq`). Its parts share one client (`DynamoHandle`).
 */
export class DynamoStore implements RunStore {
  readonly threads: DynamoThreads;
  readonly arrivals: DynamoArrivals;
  readonly tenants: DynamoTenants;
  readonly usage: DynamoUsageRecords;
  readonly runs: DynamoRunRecords;
  readonly tasks: DynamoTaskIndex;
  readonly events: DynamoEventLog;
  readonly agents: DynamoAgents;
  readonly pushConfigs: DynamoPushConfigs;
  readonly claims: DynamoMessageClaims;
  readonly providers: DynamoProviders;
  readonly principals: DynamoPrincipals;
  readonly leases: DynamoRunLeases;
  readonly audit: DynamoAuditLog;
  readonly retention: DynamoRetention;
  /** What the store has sent, for the cost model. */
  readonly sent: StoreUsage;

  constructor({ client, tables, projections }: DynamoStoreOptions) {
    const handle = new DynamoHandle(client, tables, projections);
    this.sent = handle.sent;
    this.threads = new DynamoThreads(handle);
    this.arrivals = new DynamoArrivals(handle);
    this.tenants = new DynamoTenants(handle);
    this.usage = new DynamoUsageRecords(handle);
    this.tasks = new DynamoTaskIndex(handle);
    this.audit = new DynamoAuditLog(handle);
    this.runs = new DynamoRunRecords(handle, this.tasks, this.audit);
    this.events = new DynamoEventLog(handle);
    this.agents = new DynamoAgents(handle);
    this.pushConfigs = new DynamoPushConfigs(handle);
    this.claims = new DynamoMessageClaims(handle);
    this.providers = new DynamoProviders(handle);
    this.principals = new DynamoPrincipals(handle);
    this.leases = new DynamoRunLeases(handle);
    this.retention = new DynamoRetention(handle, this.audit);
  }
}

/** The record on DynamoDB's tables `tables`. */
export function createDynamoStore(options: DynamoStoreOptions): DynamoStore {
  return new DynamoStore(options);
}
