import { canonicalJson, type AuditRecord } from './record.js';
import type { ExportLine } from './verify.js';

/**
 * An export's lines as text (NDJSON). A record's line carries its id beside the record's canonical
 * JSON, so a verifier hashes the record's bytes as they stand, without parsing them: the text a
 * segment sealed is the text on the line.
 */
export function recordLineText(record: AuditRecord, segment?: number): string {
  return `{"kind":"record",${segment === undefined ? '' : `"segment":${segment},`}"id":${JSON.stringify(record.id)},"record":${canonicalJson(record)}}`;
}

/** A line that is none of an export's kinds: bad input, with what it is. */
export class ExportLineError extends Error {}

/**
 * One line of an export as the verifier takes it, its record hashed in canonical form (the CLI
 * reads the gateway's own record lines from their bytes, faster); throws `ExportLineError` for a
 * line of no known kind.
 */
export function readExportLine(text: string, sha256Hex: (text: string) => string): ExportLine {
  let line: unknown;
  try {
    line = JSON.parse(text);
  } catch {
    throw new ExportLineError('is not JSON: an export is NDJSON, one JSON object a line (GET /admin/audit/export)');
  }
  const object = typeof line === 'object' && line !== null ? (line as Record<string, unknown>) : {};
  if (object.kind === 'audit-export' && typeof object.version === 'number') return object as ExportLine;
  if (object.kind === 'segment' && Number.isInteger(object.seq) && typeof object.jws === 'string') return { kind: 'segment', seq: object.seq as number, jws: object.jws };
  const record = object.record as Partial<AuditRecord> | undefined;
  if (object.kind === 'record' && typeof record === 'object' && record !== null && typeof record.id === 'string' && (object.segment === undefined || Number.isInteger(object.segment))) {
    const hash = sha256Hex(canonicalJson(record));
    return { kind: 'record', ...(object.segment !== undefined ? { segment: object.segment as number } : {}), id: record.id, hash };
  }
  throw new ExportLineError('is no export line (a header, a record with its id, or a segment with its seq and jws)');
}

/** The hash of a record's canonical form, from its text as a line gave it (re-spaced, re-ordered); '' for text that is no JSON. */
export function canonicalHashOf(text: string | Uint8Array, sha256Hex: (text: string) => string): string {
  try {
    return sha256Hex(canonicalJson(JSON.parse(typeof text === 'string' ? text : new TextDecoder().decode(text))));
  } catch {
    return '';
  }
}
