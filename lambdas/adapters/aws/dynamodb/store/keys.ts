import { createHash } from 'node:crypto';
import { threadKey, type ThreadRef } from '../../../../core/model.js';
import { RUNS_TABLE } from '../tables.js';

/**
 * The runs table's key layout: which item a thing of the record is, and the attributes an item
 * carries for the table and its indexes rather than for its domain object. One list, used by the
 * store's reads and by the decoders of the tables' stream records (`changes.ts`).
 */
export type Item = Record<string, unknown>;

/** DynamoDB's limits on a key attribute, in UTF-8 bytes (partition key, sort key). */
const PARTITION_KEY_BYTES = 2048;
const SORT_KEY_BYTES = 1024;
const THREAD_ITEM = 'thread';
export const RUN_ITEM = 'run';
export const AGENT_PARTITION = 'agent';
export const PROVIDER_PARTITION = 'provider';
export const PUSH_CONFIG_PREFIX = 'push#';
const MESSAGE_CLAIM_ITEM = 'msg';
export const TENANT_ITEM = 'tenant';
const PRINCIPAL_ITEM = 'keys';
export const TASK_INDEX_ITEM = 'index';
export const ARRIVAL_PREFIX = 'arrival#';
const ARRIVAL_ITEM = 'arrival';
/**
 * Partitions of the `byKey` index the arrival notes are spread over: every run's note is written
 * and deleted there, and one index partition takes about 1,000 writes a second.
 */
export const ARRIVAL_PARTITIONS = 4;

/** Attributes that exist for the table and its indexes, not for the domain object. */
export const KEY_ATTRIBUTES: readonly string[] = [
  RUNS_TABLE.partitionKey,
  RUNS_TABLE.sortKey,
  RUNS_TABLE.byThread.partitionKey,
  RUNS_TABLE.byTenant.partitionKey,
  RUNS_TABLE.byKey.partitionKey,
  RUNS_TABLE.byKey.sortKey,
  RUNS_TABLE.timeToLive,
  // Who holds a thread's or a tenant's places (a string set of run ids): the store's, for giving each back once.
  'holders',
  // A thread's deletion under way (retention): what it takes and its audit record's id, for a repeat to finish it.
  'purging',
];

/** An item as its domain object: without the attributes of its keys and indexes. */
export function domain<T>(item: Item): T {
  const object: Item = {};
  for (const key of Object.keys(item)) {
    if (!KEY_ATTRIBUTES.includes(key)) object[key] = item[key];
  }
  return object as T;
}

export function threadItemKey(thread: ThreadRef): Item {
  return { pk: `thread#${threadKey(thread)}`, sk: THREAD_ITEM };
}

export const IDLE_PREFIX = 'idle#';

/**
 * A thread's place in `byKey` by its last activity (retention's listing): one of `idle#0` … by its
 * key's hash (every run writes its thread twice, so one partition would cap them), sorted
 * `<lastActivityAt>/<threadKey>`.
 */
export function idleIndex(thread: ThreadRef, at: string): Item {
  const key = threadKey(thread);
  return {
    [RUNS_TABLE.byKey.partitionKey]: `${IDLE_PREFIX}${createHash('sha256').update(key).digest()[0] % ARRIVAL_PARTITIONS}`,
    [RUNS_TABLE.byKey.sortKey]: `${at}/${key}`,
  };
}

export function retentionKey(tenant: string): Item {
  return { pk: `retention#${digest(tenant)}`, sk: 'retention' };
}

/** The `byKey` partition listing every tenant's own retention (few: those an admin set). */
export const RETENTION_PARTITION = 'retention';

export function arrivalKey(runId: string): Item {
  return { pk: `${ARRIVAL_PREFIX}${runId}`, sk: ARRIVAL_ITEM };
}

/** A run's arrival note goes to one of the `byKey` partitions `arrival#0` … by its id's hash: a burst of arrivals is spread over them. */
export function arrivalPartition(runId: string): string {
  return `${ARRIVAL_PREFIX}${createHash('sha256').update(runId).digest()[0] % ARRIVAL_PARTITIONS}`;
}

export const LEASE_PREFIX = 'lease#';
const LEASE_ITEM = 'lease';

/** A run's lease: an item of its own beside the run's (`run#<runId>`, `lease`), a renewal writes a few hundred bytes. */
export function leaseKey(runId: string): Item {
  return { pk: `run#${runId}`, sk: LEASE_ITEM };
}

/** A lease's `byKey` partition (`lease#0` …, by its run id's hash, as arrivals are spread): every renewal moves its entry. */
export function leasePartition(runId: string): string {
  return `${LEASE_PREFIX}${createHash('sha256').update(runId).digest()[0] % ARRIVAL_PARTITIONS}`;
}

/** A lease's end as `byKey` sorts it: epoch ms, zero-padded, so string order is time order. */
export function leaseSort(until: number): string {
  return String(Math.max(0, Math.floor(until))).padStart(16, '0');
}

export function tenantKey(tenant: string): Item {
  return { pk: `tenant#${tenant}`, sk: TENANT_ITEM };
}

export function usageKey(runId: string): Item {
  return { pk: `usage#${runId}`, sk: 'usage' };
}

/** A tenant in a sort key before a "/": its own "%" and "/" escaped, as `threadKey` does. */
export function escapeTenant(tenant: string): string {
  return tenant.replaceAll('%', '%25').replaceAll('/', '%2F');
}

/** The partition of the `byKey` index that holds the usage records of a UTC month. */
export function usagePartition(month: string): string {
  return `usage#${month}`;
}

export function runKey(runId: string): Item {
  return { pk: `run#${runId}`, sk: RUN_ITEM };
}

export function providerKey(providerId: string): Item {
  return { pk: PROVIDER_PARTITION, sk: providerId };
}

/** A principal's keys: under a digest of its tenant and id (both may be long; the key may not). */
export function principalKey(tenant: string, principal: string): Item {
  return { pk: `principal#${digest(JSON.stringify([tenant, principal]))}`, sk: PRINCIPAL_ITEM };
}

export function agentKey(agentId: string): Item {
  return { pk: AGENT_PARTITION, sk: agentId };
}

export function taskPartition(taskId: string): string {
  return `task#${taskId}`;
}

/** The `byKey` partition of a tenant's tasks at an agent in one state (hashed: the ids may be long, the key may not). */
export function taskStatePartition(tenant: string, agentId: string, state: number): string {
  return `tasks#${digest(JSON.stringify([tenant, agentId]))}#${state}`;
}

export function digest(text: string): string {
  return createHash('sha256').update(text).digest('base64url');
}

export function pushConfigKey(taskId: string, configId: string): Item {
  return { pk: taskPartition(taskId), sk: `${PUSH_CONFIG_PREFIX}${configId}` };
}

export function messageClaimKey(key: string): Item {
  // The claim's key quotes caller ids: past DynamoDB's limit it is stored under its SHA-256.
  const pk = `msg#${key}`;
  return { pk: fits(pk, PARTITION_KEY_BYTES) ? pk : `msg#sha256:${createHash('sha256').update(key).digest('hex')}`, sk: MESSAGE_CLAIM_ITEM };
}

function fits(value: string, bytes: number): boolean {
  return Buffer.byteLength(value) <= bytes;
}

/** Whether DynamoDB takes the key: no item can be stored under one it refuses, so an id that long names nothing. */
export function fitsKey(key: Item): boolean {
  return fits(key.pk as string, PARTITION_KEY_BYTES) && fits(key.sk as string, SORT_KEY_BYTES);
}
