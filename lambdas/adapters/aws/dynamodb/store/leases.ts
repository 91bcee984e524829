import { PutCommand } from '@aws-sdk/lib-dynamodb';
import type { RunLease } from '../../../../core/model.js';
import type { LeaseAs, RunLeases } from '../../../../core/ports.js';
import { RUNS_TABLE } from '../tables.js';
import { copiesOf, isConditionFailure, listShards, unitsOf, type DynamoHandle } from './handle.js';
import { domain, fitsKey, LEASE_PREFIX, leaseKey, leasePartition, leaseSort } from './keys.js';

/**
 * Leases: an item each beside its run's (`run#<runId>`, `lease`), listed by their end from `byKey`
 * partitions spread by the run id's hash. A take, a renewal and a sweep's end are each one
 * conditional write on that item: the take never over a door's lease, the renewal only while it
 * exists (and is its dispatch's), the end only while it is as the caller saw it (its end as
 * listed, its delivery's receipt).
 */
export class DynamoRunLeases implements RunLeases {
  constructor(private readonly handle: DynamoHandle) {}

  async take(lease: RunLease): Promise<boolean> {
    const item = { ...leaseKey(lease.runId), ...lease, [RUNS_TABLE.byKey.partitionKey]: leasePartition(lease.runId), [RUNS_TABLE.byKey.sortKey]: leaseSort(lease.until) };
    const { sent, doc, tables } = this.handle;
    sent.writeRequests++;
    sent.writeUnits += unitsOf(item) * copiesOf(item);
    // A door's lease only where none is held; a dispatcher's over any but a door's.
    const condition = lease.door ? 'attribute_not_exists(#until)' : 'attribute_not_exists(#door)';
    const names: Record<string, string> = lease.door ? { '#until': 'until' } : { '#door': 'door' };
    try {
      await doc.send(new PutCommand({ TableName: tables.runs, Item: item, ConditionExpression: condition, ExpressionAttributeNames: names }));
      return true;
    } catch (error) {
      if (isConditionFailure(error)) return false;
      throw error;
    }
  }

  async renew(runId: string, until: number, receipt?: string): Promise<boolean> {
    if (!fitsKey(leaseKey(runId))) return false;
    // One unit for the item and one for its entry in byKey (`update` counts the first).
    this.handle.sent.writeUnits += 1;
    const renewed = await this.handle.update({
      Key: leaseKey(runId),
      UpdateExpression: 'SET #until = :until, #sort = :sort',
      ConditionExpression: receipt === undefined ? 'attribute_exists(#until)' : 'attribute_exists(#until) AND #receipt = :receipt',
      ExpressionAttributeNames: { '#until': 'until', '#sort': RUNS_TABLE.byKey.sortKey, ...(receipt === undefined ? {} : { '#receipt': 'receipt' }) },
      ExpressionAttributeValues: { ':until': until, ':sort': leaseSort(until), ...(receipt === undefined ? {} : { ':receipt': receipt }) },
    });
    return renewed !== undefined;
  }

  async get(runId: string): Promise<RunLease | undefined> {
    if (!fitsKey(leaseKey(runId))) return undefined;
    const item = await this.handle.get(leaseKey(runId));
    return item && domain<RunLease>(item);
  }

  async lapsed(before: number, limit: number): Promise<RunLease[]> {
    return (await listShards(this.handle, LEASE_PREFIX, leaseSort(before), limit))
      .map((item) => domain<RunLease>(item))
      .sort((a, b) => a.until - b.until || (a.runId < b.runId ? -1 : 1))
      .slice(0, limit);
  }

  async end(runId: string, as: LeaseAs = {}): Promise<boolean> {
    if (!fitsKey(leaseKey(runId))) return false;
    const conditions = ['attribute_exists(#until)'];
    const values: Record<string, unknown> = {};
    if (as.until !== undefined) conditions.push('#until = :until'), (values[':until'] = as.until);
    if (as.receipt !== undefined) conditions.push('#receipt = :receipt'), (values[':receipt'] = as.receipt);
    return this.handle.deleteWhere(leaseKey(runId), conditions.join(' AND '), { '#until': 'until', ...(as.receipt !== undefined ? { '#receipt': 'receipt' } : {}) }, values);
  }
}
