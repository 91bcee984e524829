import { PutCommand } from '@aws-sdk/lib-dynamodb';
import type { RunLease } from '../../../../core/model.js';
import type { RunLeases } from '../../../../core/ports.js';
import { RUNS_TABLE } from '../tables.js';
import { copiesOf, listShards, unitsOf, type DynamoHandle } from './handle.js';
import { domain, fitsKey, LEASE_PREFIX, leaseKey, leasePartition, leaseSort } from './keys.js';

/**
 * Leases: an item each beside its run's (`run#<runId>`, `lease`), listed by their end from `byKey`
 * partitions spread by the run id's hash. A renewal and a sweep's end are each one conditional
 * write on that item: the renewal only while it exists, the end only while its end is as listed.
 */
export class DynamoRunLeases implements RunLeases {
  constructor(private readonly handle: DynamoHandle) {}

  async take(lease: RunLease): Promise<void> {
    const item = { ...leaseKey(lease.runId), ...lease, [RUNS_TABLE.byKey.partitionKey]: leasePartition(lease.runId), [RUNS_TABLE.byKey.sortKey]: leaseSort(lease.until) };
    const { sent, doc, tables } = this.handle;
    sent.writeRequests++;
    sent.writeUnits += unitsOf(item) * copiesOf(item);
    await doc.send(new PutCommand({ TableName: tables.runs, Item: item }));
  }

  async renew(runId: string, until: number): Promise<boolean> {
    if (!fitsKey(leaseKey(runId))) return false;
    // One unit for the item and one for its entry in byKey (`update` counts the first).
    this.handle.sent.writeUnits += 1;
    const renewed = await this.handle.update({
      Key: leaseKey(runId),
      UpdateExpression: 'SET #until = :until, #sort = :sort',
      ConditionExpression: 'attribute_exists(#until)',
      ExpressionAttributeNames: { '#until': 'until', '#sort': RUNS_TABLE.byKey.sortKey },
      ExpressionAttributeValues: { ':until': until, ':sort': leaseSort(until) },
    });
    return renewed !== undefined;
  }

  async lapsed(before: number, limit: number): Promise<RunLease[]> {
    return (await listShards(this.handle, LEASE_PREFIX, leaseSort(before), limit))
      .map((item) => domain<RunLease>(item))
      .sort((a, b) => a.until - b.until || (a.runId < b.runId ? -1 : 1))
      .slice(0, limit);
  }

  async end(runId: string, until?: number): Promise<boolean> {
    if (!fitsKey(leaseKey(runId))) return false;
    return until === undefined
      ? this.handle.deleteWhere(leaseKey(runId), 'attribute_exists(#until)', { '#until': 'until' }, {})
      : this.handle.deleteWhere(leaseKey(runId), '#until = :until', { '#until': 'until' }, { ':until': until });
  }
}
