import type { Clock } from '../ports.js';
import type { AuditLog, SealedSegment } from '../record/port.js';
import { canonicalJson, recordHash, type AuditRecord } from './record.js';

/**
 * Sealing (the CloudTrail model): records are gathered, in the order the log lists them, into
 * segments of at most `SEGMENT_MAX_RECORDS` records written within `SEGMENT_MAX_MS` of the first;
 * each segment holds its records' ids and hashes in order and the hash of the segment before it,
 * and is signed by funduq's identity key. Writers never touch the chain: one sealer at a time
 * extends it (a segment is written only if its seq is new), so records are written at the rate
 * of any single-item write, and an edit, a deletion, an insertion or a reordering shows against
 * the segment that sealed it.
 */
export const SEGMENT_MAX_RECORDS = 1000;
export const SEGMENT_MAX_MS = 60_000;
/**
 * How far before the last segment's last record a sealer looks for records not sealed yet: a record
 * is listed moments after its time (an index's lag, a writer's clock); one later than this stays
 * unsealed, and an export shows it pending.
 */
export const SEAL_LATE_MS = 5 * 60_000;
/** Where the first seal looks back to. */
export const FIRST_SEAL_MS = 7 * 24 * 60 * 60_000;

/** A segment's signed content (the JWS payload, as canonical JSON). */
export interface AuditSegment {
  /** 1, 2, …: the chain's order. */
  seq: number;
  /** The first and last sealed record's times. */
  from: string;
  to: string;
  /** The records' ids and hashes, in the log's order. */
  ids: string[];
  hashes: string[];
  /** The hash (SHA-256 hex of the JWS) of segment seq − 1; null for the first. */
  prev: string | null;
  sealedAt: string;
}

/** funduq's identity key, as the sealer needs it: a compact JWS (EdDSA) of a payload, the key's public half, and the hash. */
export interface AuditSeal {
  /** The Ed25519 public key (base64url of its 32 bytes): what the verifier is given. */
  publicKey: string;
  sign(payload: string): Promise<string>;
  sha256Hex(text: string): string;
}

export interface SealDeps {
  log: AuditLog;
  seal: AuditSeal;
  clock: Pick<Clock, 'now'>;
}

/** The records not sealed yet, as a sealer and an export look for them: from a little before the last segment's last (or a week back), to now. */
export function unsealedAfter(log: AuditLog, head: Pick<SealedSegment, 'to'> | undefined, now: number, limit: number): Promise<AuditRecord[]> {
  const since = head ? Date.parse(head.to) - SEAL_LATE_MS : now - FIRST_SEAL_MS;
  return log.unsealed(limit, new Date(since).toISOString(), new Date(now + SEAL_LATE_MS).toISOString());
}

/** The records a segment takes from the front of `pending`: at most the limit, written within the window of the first. */
export function segmentOf(pending: readonly AuditRecord[], maxRecords = SEGMENT_MAX_RECORDS, maxMs = SEGMENT_MAX_MS): AuditRecord[] {
  if (pending.length === 0) return [];
  const until = Date.parse(pending[0].at) + maxMs;
  let end = 1;
  while (end < pending.length && end < maxRecords && Date.parse(pending[end].at) < until) end++;
  return pending.slice(0, end);
}

/** A segment of `records` after `prev`, signed: what the log stores. */
export async function sealSegment(deps: Pick<SealDeps, 'seal' | 'clock'>, records: readonly AuditRecord[], prev: Pick<SealedSegment, 'seq' | 'hash'> | undefined): Promise<SealedSegment> {
  const segment: AuditSegment = {
    seq: (prev?.seq ?? 0) + 1,
    from: records[0].at,
    to: records[records.length - 1].at,
    ids: records.map((record) => record.id),
    hashes: records.map((record) => recordHash(record, deps.seal.sha256Hex)),
    prev: prev?.hash ?? null,
    sealedAt: new Date(deps.clock.now()).toISOString(),
  };
  const jws = await deps.seal.sign(canonicalJson(segment));
  return { seq: segment.seq, jws, hash: deps.seal.sha256Hex(jws), ids: segment.ids, from: segment.from, to: segment.to };
}

/**
 * Seals every record not sealed yet (at most `maxSegments` segments a call). The last segment's
 * records are marked sealed first: a sealer that died between writing a segment and marking its
 * records is finished by the next. A segment another sealer wrote first (the same seq) is taken
 * as the chain's head, and its records are left to it. Returns how many records were sealed.
 */
export async function sealAudit(deps: SealDeps, maxSegments = 100): Promise<number> {
  let head = await deps.log.lastSegment();
  if (head) await deps.log.markSealed(head.seq, head.ids);
  let sealed = 0;
  for (let n = 0; n < maxSegments; n++) {
    const taken = new Set(head?.ids);
    const pending = (await unsealedAfter(deps.log, head, deps.clock.now(), SEGMENT_MAX_RECORDS)).filter((record) => !taken.has(record.id));
    const records = segmentOf(pending);
    if (records.length === 0) break;
    const segment = await sealSegment(deps, records, head);
    if (!(await deps.log.putSegment(segment))) {
      // Another sealer took this seq: its segment is the head now (read by key, not from a listing that may lag).
      head = await deps.log.segment(segment.seq);
      if (head) await deps.log.markSealed(head.seq, head.ids);
      continue;
    }
    await deps.log.markSealed(segment.seq, segment.ids);
    sealed += records.length;
    head = segment;
  }
  return sealed;
}
