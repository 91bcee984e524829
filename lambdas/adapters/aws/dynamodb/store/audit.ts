import { BatchGetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { actorName, type AuditQuery, type AuditRecord } from '../../../../core/audit/record.js';
import type { AuditLog, SealedSegment } from '../../../../core/ports.js';
import { decodePageCursor, encodePageCursor } from '../../../page-cursor.js';
import { RUNS_TABLE } from '../tables.js';
import type { DynamoHandle } from './handle.js';
import type { Item } from './keys.js';

const RECORD_ITEM = 'audit';
const SEGMENT_ITEM = 'audit-segment';
const SEGMENTS_PARTITION = 'audit-segments';
/** Marks written at once when a segment is sealed: its records are updated in parallel, this many at a time. */
const MARKS_AT_ONCE = 25;
const DAY_MS = 24 * 60 * 60_000;


export function auditRecordKey(id: string): Item {
  return { pk: `audit#${id}`, sk: RECORD_ITEM };
}

function segmentKey(seq: number): Item {
  return { pk: `audit-segment#${seqSort(seq)}`, sk: SEGMENT_ITEM };
}

function seqSort(seq: number): string {
  return String(seq).padStart(12, '0');
}

/** A UTC day's `byKey` partition of audit records, sorted by id (their time first). */
function dayPartition(day: string): string {
  return `audit#${day}`;
}

/**
 * The audit log in the runs table: a record is an item of its own (`audit#<id>`), its JSON kept as
 * written (`body`: the bytes its hash is of), in `byKey` under its UTC day sorted by id, with the
 * attributes a listing filters on beside it; a segment is an item (`audit-segment#<seq>`), listed
 * under one `byKey` partition by seq. A record is written once, and its `segment` set once.
 */
export class DynamoAuditLog implements AuditLog {
  constructor(private readonly handle: DynamoHandle) {}

  async append(record: AuditRecord): Promise<void> {
    const { partitionKey, sortKey } = RUNS_TABLE.byKey;
    await this.handle.putNew({
      ...auditRecordKey(record.id),
      [partitionKey]: dayPartition(record.at.slice(0, 10)),
      [sortKey]: record.id,
      body: JSON.stringify(record),
      ...(record.tenant !== undefined ? { tenant: record.tenant } : {}),
      action: record.action,
      target: record.target,
      actor: actorName(record.actor),
    });
  }

  async list(query: AuditQuery): Promise<{ records: AuditRecord[]; cursor?: string }> {
    const after = query.cursor === undefined ? undefined : decodeAuditCursor(query.cursor, query.tenant ?? '', query.from, query.to);
    const records: AuditRecord[] = [];
    const filters: string[] = [];
    const names: Record<string, string> = {};
    const values: Item = {};
    for (const field of ['tenant', 'actor', 'action', 'target'] as const) {
      if (query[field] === undefined) continue;
      filters.push(`#${field} = :${field}`);
      names[`#${field}`] = field;
      values[`:${field}`] = query[field];
    }
    let day = (after ?? query.from).slice(0, 10);
    const lastDay = query.to.slice(0, 10);
    while (day <= lastDay && records.length < query.limit) {
      const page = await this.queryDay(day, after !== undefined && after.startsWith(day) ? { after } : { from: query.from }, query.to, query.limit - records.length, filters, names, values);
      records.push(...page.records);
      if (page.more) return { records, cursor: encodeAuditCursor(query.tenant ?? '', records[records.length - 1].id) };
      day = nextDay(day);
    }
    return records.length === query.limit && day <= lastDay ? { records, cursor: encodeAuditCursor(query.tenant ?? '', records[records.length - 1].id) } : { records };
  }

  async unsealed(limit: number, since: string, until: string): Promise<AuditRecord[]> {
    const records: AuditRecord[] = [];
    for (let day = since.slice(0, 10); day <= until.slice(0, 10) && records.length < limit; day = nextDay(day)) {
      const page = await this.queryDay(day, { from: since }, until, limit - records.length, ['attribute_not_exists(#segment)'], { '#segment': 'segment' }, {});
      records.push(...page.records);
      if (page.more) break;
    }
    return records;
  }

  async get(ids: readonly string[]): Promise<AuditRecord[]> {
    const records: AuditRecord[] = [];
    for (let i = 0; i < ids.length; i += 100) {
      let keys: Item[] | undefined = ids.slice(i, i + 100).map(auditRecordKey);
      while (keys && keys.length > 0) {
        this.handle.sent.readRequests++;
        const result = await this.handle.doc.send(new BatchGetCommand({ RequestItems: { [this.handle.tables.runs]: { Keys: keys, ConsistentRead: true, ProjectionExpression: 'body' } } }));
        for (const item of result.Responses?.[this.handle.tables.runs] ?? []) records.push(JSON.parse(item.body as string) as AuditRecord);
        keys = result.UnprocessedKeys?.[this.handle.tables.runs]?.Keys as Item[] | undefined;
      }
    }
    return records;
  }

  async lastSegment(): Promise<SealedSegment | undefined> {
    return (await this.querySegments({ last: true, limit: 1 }))[0];
  }

  async segment(seq: number): Promise<SealedSegment | undefined> {
    const item = await this.handle.get(segmentKey(seq));
    return item && segmentOfItem(item);
  }

  segments(fromSeq: number, limit: number): Promise<SealedSegment[]> {
    return this.querySegments({ fromSeq, limit });
  }

  /** Segments by seq from the index's partition: from one on, or the last. */
  private async querySegments(query: { fromSeq?: number; last?: boolean; limit: number }): Promise<SealedSegment[]> {
    const { indexName, partitionKey, sortKey } = RUNS_TABLE.byKey;
    this.handle.sent.readRequests++;
    const page = await this.handle.doc.send(
      new QueryCommand({
        TableName: this.handle.tables.runs,
        IndexName: indexName,
        KeyConditionExpression: query.fromSeq === undefined ? '#ix = :segments' : '#ix = :segments AND #sort >= :from',
        ExpressionAttributeNames: { '#ix': partitionKey, ...(query.fromSeq === undefined ? {} : { '#sort': sortKey }) },
        ExpressionAttributeValues: { ':segments': SEGMENTS_PARTITION, ...(query.fromSeq === undefined ? {} : { ':from': seqSort(query.fromSeq) }) },
        ScanIndexForward: !query.last,
        Limit: query.limit,
      }),
    );
    return (page.Items ?? []).map(segmentOfItem);
  }

  async putSegment(segment: SealedSegment): Promise<boolean> {
    const { partitionKey, sortKey } = RUNS_TABLE.byKey;
    // The ids are in the JWS's payload: the item keeps the JWS alone (a segment of 1,000 records is ~160 KB).
    return this.handle.putNew({ ...segmentKey(segment.seq), [partitionKey]: SEGMENTS_PARTITION, [sortKey]: seqSort(segment.seq), seq: segment.seq, jws: segment.jws, hash: segment.hash, from: segment.from, to: segment.to });
  }

  async markSealed(seq: number, ids: readonly string[]): Promise<void> {
    for (let i = 0; i < ids.length; i += MARKS_AT_ONCE) {
      await Promise.all(
        ids.slice(i, i + MARKS_AT_ONCE).map((id) =>
          this.handle.update({
            Key: auditRecordKey(id),
            UpdateExpression: 'SET #segment = :seq',
            ConditionExpression: 'attribute_exists(pk) AND attribute_not_exists(#segment)',
            ExpressionAttributeNames: { '#segment': 'segment' },
            ExpressionAttributeValues: { ':seq': seq },
          }),
        ),
      );
    }
  }

  async delete(ids: readonly string[]): Promise<void> {
    await this.handle.deleteKeys(this.handle.tables.runs, ids.map(auditRecordKey));
  }

  async deleteSegment(seq: number): Promise<void> {
    await this.handle.deleteKeys(this.handle.tables.runs, [segmentKey(seq)]);
  }

  /** One day's records in id order from `from` (or after `after`) to before `to`, at most `limit`, those the filters pass. */
  private async queryDay(day: string, start: { from?: string; after?: string }, to: string, limit: number, filters: string[], names: Record<string, string>, values: Item): Promise<{ records: AuditRecord[]; more: boolean }> {
    const { indexName, partitionKey, sortKey } = RUNS_TABLE.byKey;
    const records: AuditRecord[] = [];
    let exclusiveStart: Item | undefined;
    do {
      this.handle.sent.readRequests++;
      const page = await this.handle.doc.send(
        new QueryCommand({
          TableName: this.handle.tables.runs,
          IndexName: indexName,
          // BETWEEN is inclusive at both ends: the open ends ([from, to), after `after`) are checked below.
          KeyConditionExpression: '#ix = :day AND #sort BETWEEN :from AND :to',
          ...(filters.length > 0 ? { FilterExpression: filters.join(' AND ') } : {}),
          ExpressionAttributeNames: { '#ix': partitionKey, '#sort': sortKey, ...names },
          ExpressionAttributeValues: { ':day': dayPartition(day), ':from': start.after ?? start.from, ':to': to, ...values },
          ExclusiveStartKey: exclusiveStart,
        }),
      );
      for (const item of page.Items ?? []) {
        const id = item[sortKey] as string;
        if (id >= to || id === start.after) continue;
        if (records.length === limit) return { records, more: true };
        records.push(JSON.parse(item.body as string) as AuditRecord);
      }
      exclusiveStart = page.LastEvaluatedKey;
    } while (exclusiveStart);
    return { records, more: false };
  }
}

function segmentOfItem(item: Item): SealedSegment {
  const jws = item.jws as string;
  const payload = JSON.parse(Buffer.from(jws.split('.')[1], 'base64url').toString('utf8')) as { ids: string[] };
  return { seq: Number(item.seq), jws, hash: item.hash as string, ids: payload.ids, from: item.from as string, to: item.to as string };
}

function nextDay(day: string): string {
  return new Date(Date.parse(`${day}T00:00:00.000Z`) + DAY_MS).toISOString().slice(0, 10);
}

function encodeAuditCursor(tenant: string, id: string): string {
  return encodePageCursor({ tenant, id });
}

/** A cursor as `list` issued it: the same tenant's listing, and a record id within the query's range. */
function decodeAuditCursor(cursor: string, tenant: string, from: string, to: string): string {
  const place = decodePageCursor(cursor) as { tenant?: unknown; id?: unknown } | null;
  if (place?.tenant !== tenant || typeof place.id !== 'string' || place.id < from || place.id >= to) throw new RangeError('invalid page cursor');
  return place.id;
}
