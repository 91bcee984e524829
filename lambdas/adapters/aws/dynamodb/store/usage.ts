import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import type { UsageQuery, UsageRecords } from '../../../../core/ports.js';
import type { UsageRecord } from '../../../../core/usage.js';
import { decodePageCursor, encodePageCursor } from '../../../page-cursor.js';
import { RUNS_TABLE } from '../tables.js';
import { copiesOf, unitsOf, type DynamoHandle } from './handle.js';
import { domain, escapeTenant, usageKey, usagePartition, type Item } from './keys.js';

/** Usage records: an item each (`usage#<runId>`), in `byKey` under a partition per UTC month, sorted by tenant, end and run. */
export class DynamoUsageRecords implements UsageRecords {
  constructor(private readonly handle: DynamoHandle) {}

  async put(record: UsageRecord): Promise<boolean> {
    const { partitionKey, sortKey } = RUNS_TABLE.byKey;
    const item = {
      ...usageKey(record.runId),
      ...record,
      [partitionKey]: usagePartition(record.endedAt.slice(0, 7)),
      [sortKey]: `${escapeTenant(record.tenant)}/${record.endedAt}/${record.runId}`,
    };
    this.handle.sent.usageRecordUnits += unitsOf(item) * copiesOf(item);
    return this.handle.putNew(item);
  }

  async delete(runIds: readonly string[]): Promise<void> {
    await this.handle.deleteKeys(this.handle.tables.runs, runIds.map(usageKey));
  }

  async list(query: UsageQuery): Promise<{ records: UsageRecord[]; cursor?: string }> {
    const { indexName, partitionKey, sortKey } = RUNS_TABLE.byKey;
    const lastMonth = query.to.slice(0, 7);
    const start = query.cursor === undefined ? { month: query.from.slice(0, 7) } : decodeUsageCursor(query.cursor, query.tenant ?? '', query.from.slice(0, 7), lastMonth);
    const records: UsageRecord[] = [];
    let month = start.month;
    let after = start.after;
    const prefix = query.tenant === undefined ? undefined : `${escapeTenant(query.tenant)}/`;
    while (month <= lastMonth) {
      let exclusiveStart: Item | undefined = after;
      do {
        this.handle.sent.readRequests++;
        const page = await this.handle.doc.send(
          new QueryCommand({
            TableName: this.handle.tables.runs,
            IndexName: indexName,
            KeyConditionExpression: prefix ? '#month = :month AND #key BETWEEN :from AND :to' : '#month = :month',
            FilterExpression: 'endedAt >= :fromAt AND endedAt < :toAt',
            ExpressionAttributeNames: { '#month': partitionKey, ...(prefix ? { '#key': sortKey } : {}) },
            ExpressionAttributeValues: {
              ':month': usagePartition(month),
              ':fromAt': query.from,
              ':toAt': query.to,
              ...(prefix ? { ':from': `${prefix}${query.from}`, ':to': `${prefix}${query.to}` } : {}),
            },
            Limit: query.limit - records.length,
            ExclusiveStartKey: exclusiveStart,
          }),
        );
        for (const item of page.Items ?? []) records.push(domain<UsageRecord>(item));
        exclusiveStart = page.LastEvaluatedKey;
        if (records.length >= query.limit) {
          const tenant = query.tenant ?? '';
          if (exclusiveStart) return { records, cursor: encodeUsageCursor({ tenant, month, after: exclusiveStart }) };
          return month < lastMonth ? { records, cursor: encodeUsageCursor({ tenant, month: nextMonth(month) }) } : { records };
        }
      } while (exclusiveStart);
      month = nextMonth(month);
      after = undefined;
    }
    return { records };
  }
}

function nextMonth(month: string): string {
  const [year, number] = month.split('-').map(Number);
  return new Date(Date.UTC(year, number, 1)).toISOString().slice(0, 7);
}

/** A usage listing's place: whose listing (a tenant, or '' for every tenant's), the month it is on, and DynamoDB's key within it. */
function encodeUsageCursor(place: { tenant: string; month: string; after?: Item }): string {
  return encodePageCursor(place);
}

/** A cursor comes back from a caller: only the shape we issue, for the listing asking. */
/**
 * A usage listing's place, as `list` issued it: the tenant's, a month of the listing's range,
 * and, within the month, the last key a Query read (the usage record's keys and its index keys,
 * all strings, in that month's partition and, for a tenant, under its prefix). Anything else is
 * a cursor this listing did not issue: DynamoDB would refuse a start key of another shape (a
 * ValidationException), and a month outside the range would cost a Query per month on the way.
 */
function decodeUsageCursor(cursor: string, tenant: string, firstMonth: string, lastMonth: string): { month: string; after?: Item } {
  const place = decodePageCursor(cursor) as { tenant?: unknown; month?: unknown; after?: unknown } | null;
  const { partitionKey, sortKey } = RUNS_TABLE.byKey;
  const month = typeof place?.month === 'string' && /^\d{4}-\d{2}$/.test(place.month) ? place.month : undefined;
  const after = place?.after as Record<string, unknown> | undefined;
  const afterValid =
    after === undefined ||
    (typeof after === 'object' &&
      after !== null &&
      Object.keys(after).sort().join() === ['pk', 'sk', partitionKey, sortKey].sort().join() &&
      Object.values(after).every((value) => typeof value === 'string') &&
      after[partitionKey] === usagePartition(month ?? '') &&
      after.sk === 'usage' &&
      String(after.pk).startsWith('usage#') &&
      (tenant === '' || String(after[sortKey]).startsWith(`${escapeTenant(tenant)}/`)));
  if (place?.tenant !== tenant || month === undefined || month < firstMonth || month > lastMonth || !afterValid) throw new RangeError('invalid page cursor');
  return { month, ...(after ? { after: after as Item } : {}) };
}
