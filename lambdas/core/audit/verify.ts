import type { AuditSegment } from './seal.js';

/**
 * The offline verifier's judgement of an export (`export.ts` writes one): every segment's
 * signature against funduq's public key, the chain of segment hashes, and every record against the
 * hash its segment sealed, in the segment's order. It says what is wrong and where (the line, the
 * record, the segment); records no segment sealed yet are pending: neither valid nor broken.
 */

/**
 * One line of an export, as read (`lines.ts`): a record by its id and the hash of its text as the
 * export gave it; where that differs from the sealed one, its text is hashed again in canonical
 * form (`canonicalHash`): a record whose text was re-spaced or re-ordered is still the record sealed.
 */
export type ExportLine =
  | { kind: 'audit-export'; version: number; [more: string]: unknown }
  | { kind: 'record'; segment?: number; id: string; hash: string; text?: string | Uint8Array }
  | { kind: 'segment'; seq: number; jws: string };

export type AuditProblemCode =
  | 'audit_record_edited'
  | 'audit_record_deleted'
  | 'audit_record_inserted'
  | 'audit_record_reordered'
  | 'audit_segment_missing'
  | 'audit_segment_signature_invalid'
  | 'audit_segment_chain_broken';

export interface AuditProblem {
  code: AuditProblemCode;
  message: string;
  /** The export's line (1-based) the problem was found on, when it is one line's. */
  line?: number;
  recordId?: string;
  seq?: number;
}

export interface Verification {
  /** Records whose hash a validly signed, chained segment holds, in its order. */
  verified: number;
  /** Records no segment holds yet (written after the last seal): not proven, not broken. */
  pending: { id: string; line: number }[];
  segments: number;
  /** The last segment verified: compare it with the gateway's (`GET /admin/audit/head`) to know nothing was cut off the end. */
  head?: { seq: number; hash: string };
  problems: AuditProblem[];
}

export interface VerifyDeps {
  sha256Hex(text: string): string;
  /** The hash of a record's text (or its UTF-8 bytes) in its canonical form ('' for no JSON). */
  canonicalHash(text: string | Uint8Array): string;
  /** The JWS's payload when its signature is funduq's (the key the verifier was given), else undefined. */
  verifySignature(jws: string): Promise<string | undefined>;
}

/** A record waiting for the segment that seals it (an export lists a segment's records before it). */
interface Waiting {
  id: string;
  hash: string;
  line: number;
  text?: string | Uint8Array;
}

/** A segment as the chain check needs it: its hash, the hash it names, where it was. */
interface Seen {
  hash?: string;
  prev?: string | null;
  line: number;
}

/**
 * Verifies an export read line by line (a file of any size: what is held is one segment's records
 * at a time, and a few fields of each segment).
 */
export async function verifyExport(lines: AsyncIterable<ExportLine | readonly ExportLine[]> | Iterable<ExportLine>, deps: VerifyDeps): Promise<Verification> {
  const problems: AuditProblem[] = [];
  const waiting = new Map<number, Waiting[]>();
  const seen = new Map<number, Seen>();
  const pending: Verification['pending'] = [];
  let verified = 0;
  let number = 0;
  // Lines come one at a time or a batch at a time (a reader's chunk: a million awaits cost seconds).
  for await (const given of lines) {
    for (const line of Array.isArray(given) ? (given as readonly ExportLine[]) : [given as ExportLine]) {
      number++;
      if (line.kind === 'record') {
        const { id } = line;
        if (line.segment === undefined) {
          pending.push({ id, line: number });
        } else if (seen.has(line.segment)) {
          problems.push({ code: 'audit_record_reordered', recordId: id, line: number, seq: line.segment, message: `record ${id} (line ${number}) comes after segment ${line.segment} (line ${seen.get(line.segment)!.line}), whose records come before it: it was moved, or inserted` });
        } else {
          let list = waiting.get(line.segment);
          if (!list) waiting.set(line.segment, (list = []));
          list.push(line.text === undefined ? { id, hash: line.hash, line: number } : { id, hash: line.hash, line: number, text: line.text });
        }
      } else if (line.kind === 'segment') {
        const records = waiting.get(line.seq) ?? [];
        waiting.delete(line.seq);
        if (seen.has(line.seq)) {
          problems.push({ code: 'audit_segment_chain_broken', seq: line.seq, line: number, message: `segment ${line.seq} appears a second time (line ${number}): one of the two was inserted` });
          continue;
        }
        const payload = await deps.verifySignature(line.jws);
        if (payload === undefined) {
          seen.set(line.seq, { line: number });
          problems.push({ code: 'audit_segment_signature_invalid', seq: line.seq, line: number, message: `segment ${line.seq} (line ${number}) is not signed by the key given: it was re-signed, or edited; its records are not proven` });
          continue;
        }
        const segment = JSON.parse(payload) as AuditSegment;
        seen.set(line.seq, { hash: deps.sha256Hex(line.jws), prev: segment.prev, line: number });
        if (segment.seq !== line.seq) {
          problems.push({ code: 'audit_segment_chain_broken', seq: line.seq, line: number, message: `the segment on line ${number} is listed as ${line.seq} but signed as ${segment.seq}` });
        }
        verified += checkSealed(segment, records, problems, deps);
      }
    }
  }

  // Records whose segment never came, and segments missing from the chain: each missing seq once.
  const seqs = [...seen.keys()].sort((a, b) => a - b);
  const missing = new Set<number>(waiting.keys());
  for (let i = 1; i < seqs.length; i++) for (let gone = seqs[i - 1] + 1; gone < seqs[i]; gone++) missing.add(gone);
  for (const seq of [...missing].sort((a, b) => a - b)) {
    const named = waiting.get(seq)?.length ?? 0;
    problems.push({ code: 'audit_segment_missing', seq, message: `segment ${seq} is missing${named ? ` (${named} records name it)` : ''}: it was dropped from the log or the export${named ? ', or those records were inserted' : ''}` });
  }
  for (let i = 1; i < seqs.length; i++) {
    const before = seen.get(seqs[i - 1])!;
    const after = seen.get(seqs[i])!;
    if (seqs[i] === seqs[i - 1] + 1 && before.hash !== undefined && after.hash !== undefined && after.prev !== before.hash) {
      problems.push({ code: 'audit_segment_chain_broken', seq: seqs[i], line: after.line, message: `segment ${seqs[i]} does not name segment ${seqs[i - 1]}'s hash: one of them was replaced` });
    }
  }
  const top = seqs.length > 0 ? seen.get(seqs[seqs.length - 1]) : undefined;
  return { verified, pending, segments: seqs.filter((seq) => seen.get(seq)!.hash !== undefined).length, ...(top?.hash ? { head: { seq: seqs[seqs.length - 1], hash: top.hash } } : {}), problems };
}

/** A signed segment's records as the export gave them, against its ids and hashes in order; returns how many it proves. */
function checkSealed(segment: AuditSegment, records: readonly Waiting[], problems: AuditProblem[], deps: VerifyDeps): number {
  const positions = new Map<string, number>();
  segment.ids.forEach((id, position) => positions.set(id, position));
  const found = new Uint8Array(segment.ids.length);
  let proven = 0;
  let last = -1;
  let lastId: string | undefined;
  for (const { id, hash, line, text } of records) {
    const at = `record ${id} (line ${line})`;
    const position = positions.get(id);
    if (position === undefined) {
      problems.push({ code: 'audit_record_inserted', recordId: id, line, seq: segment.seq, message: `${at} is not one segment ${segment.seq} sealed: it was inserted` });
      continue;
    }
    if (found[position]) {
      problems.push({ code: 'audit_record_inserted', recordId: id, line, seq: segment.seq, message: `${at} appears a second time: the copy was inserted` });
      continue;
    }
    found[position] = 1;
    if (hash !== segment.hashes[position] && (text === undefined || deps.canonicalHash(text) !== segment.hashes[position])) {
      problems.push({ code: 'audit_record_edited', recordId: id, line, seq: segment.seq, message: `${at} was changed since segment ${segment.seq} sealed it (its record ${position + 1})` });
    } else {
      proven++;
    }
    if (position < last) {
      problems.push({ code: 'audit_record_reordered', recordId: id, line, seq: segment.seq, message: `${at} comes after ${lastId}, which segment ${segment.seq} sealed after it: the two were reordered` });
    } else {
      last = position;
      lastId = id;
    }
  }
  found.forEach((was, position) => {
    if (!was) problems.push({ code: 'audit_record_deleted', recordId: segment.ids[position], seq: segment.seq, message: `record ${segment.ids[position]} (segment ${segment.seq}'s record ${position + 1}) is missing: it was deleted` });
  });
  return proven;
}
