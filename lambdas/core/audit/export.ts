import type { AuditLog } from '../record/port.js';
import { unsealedAfter } from './seal.js';
import { recordLineText } from './lines.js';

/** Segments read at once while exporting. */
const SEGMENTS_AT_ONCE = 20;
/** Pending records are a minute's or so: more means the sealer is behind, and the rest waits for the next export. */
const PENDING_AT_MOST = 10_000;

/**
 * The log as an export's lines (NDJSON text, one line each, as `lines.ts` writes them): a header, then each segment's records in
 * its order followed by the segment, and last the records not sealed yet (a line without
 * `segment`: the verifier reports them pending).
 */
export async function* exportAudit(log: AuditLog, header: Record<string, unknown>, now: number): AsyncGenerator<string> {
  yield JSON.stringify({ kind: 'audit-export', version: 1, ...header });
  let next = 1;
  let last: { to: string } | undefined;
  for (;;) {
    const segments = await log.segments(next, SEGMENTS_AT_ONCE);
    for (const segment of segments) {
      const byId = new Map((await log.get(segment.ids)).map((record) => [record.id, record]));
      for (const id of segment.ids) {
        const record = byId.get(id);
        if (record) yield recordLineText(record, segment.seq);
      }
      yield JSON.stringify({ kind: 'segment', seq: segment.seq, jws: segment.jws });
      next = segment.seq + 1;
      last = segment;
    }
    if (segments.length < SEGMENTS_AT_ONCE) break;
  }
  for (const record of await unsealedAfter(log, last, now, PENDING_AT_MOST)) yield recordLineText(record);
}
