import { DeleteCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import type { Arrival } from '../../../../core/model.js';
import type { ArrivalNotes } from '../../../../core/ports.js';
import { RUNS_TABLE } from '../tables.js';
import { copiesOf, isConditionFailure, listShards, unitsOf, type DynamoHandle } from './handle.js';
import { ARRIVAL_PREFIX, arrivalKey, arrivalPartition, domain, fitsKey } from './keys.js';

const ARRIVAL_RETENTION_SECONDS = 14 * 24 * 3600;

/** Arrival notes: an item each (`arrival#<runId>`), listed by time from `byKey` partitions spread by the run id's hash. */
export class DynamoArrivals implements ArrivalNotes {
  constructor(private readonly handle: DynamoHandle) {}

  async note(arrival: Arrival): Promise<boolean> {
    const item = {
      ...arrivalKey(arrival.runId),
      ...arrival,
      [RUNS_TABLE.byKey.partitionKey]: arrivalPartition(arrival.runId),
      [RUNS_TABLE.byKey.sortKey]: arrival.at,
      // A note the sweep never reached (it is off, or failing) is not kept for ever.
      [RUNS_TABLE.timeToLive]: Math.floor(Date.parse(arrival.at) / 1000) + ARRIVAL_RETENTION_SECONDS,
    };
    const { sent, doc, tables } = this.handle;
    sent.writeRequests++;
    sent.writeUnits += unitsOf(item) * copiesOf(item);
    try {
      await doc.send(new PutCommand({ TableName: tables.runs, Item: item, ConditionExpression: 'attribute_not_exists(#claimed)', ExpressionAttributeNames: { '#claimed': 'claimed' } }));
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      throw err;
    }
  }

  async claim(arrival: Arrival): Promise<boolean> {
    if (!fitsKey(arrivalKey(arrival.runId))) return false;
    const claimed = await this.handle.update({
      Key: arrivalKey(arrival.runId),
      UpdateExpression: 'SET #claimed = :yes',
      ConditionExpression: '#at = :at',
      ExpressionAttributeNames: { '#claimed': 'claimed', '#at': 'at' },
      ExpressionAttributeValues: { ':yes': true, ':at': arrival.at },
    });
    return claimed !== undefined;
  }

  async forget(runId: string): Promise<void> {
    if (!fitsKey(arrivalKey(runId))) return;
    const { sent, doc, tables } = this.handle;
    sent.writeRequests++;
    sent.writeUnits += 2;
    await doc.send(new DeleteCommand({ TableName: tables.runs, Key: arrivalKey(runId) }));
  }

  async list(before: string, limit: number): Promise<Arrival[]> {
    return (await listShards(this.handle, ARRIVAL_PREFIX, before, limit))
      .map(({ claimed: _claimed, ...item }) => domain<Arrival>(item))
      .sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0))
      .slice(0, limit);
  }
}
