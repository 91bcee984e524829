#!/usr/bin/env node
/**
 * The audit log's offline verifier: `npm run audit -- verify <export.ndjson> --key <key>`.
 * `<key>` is funduq's public key (`GET /admin/audit/key`): the base64url of its 32 bytes, a JWK,
 * or a file holding either. Checks every segment's signature and chain and every record's hash
 * and order, with no network and no gateway. Exit 0: verified (pending records listed); 1: the
 * export is broken (each problem with its code); 2: the command or its input is wrong.
 */
import * as nodeCrypto from 'node:crypto';
import { createReadStream, existsSync, readFileSync } from 'node:fs';
import { ExportLineError, readExportLine } from '../lambdas/core/audit/lines.js';
import { verifyExport, type ExportLine } from '../lambdas/core/audit/verify.js';
import { auditPublicKey, sha256Hex, verifierDeps } from '../lambdas/adapters/crypto/audit-seal.js';

const USAGE = 'usage: npm run audit -- verify <export.ndjson> --key <public key: base64url, JWK, or a file holding one> [--json]';

/** A problem with the command or its input (exit 2), with its stable code. */
class BadInput extends Error {
  readonly code: string;
  constructor(given: { code: string; message: string }) {
    super(given.message);
    this.code = given.code;
  }
}

async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command !== 'verify') throw new BadInput({ code: 'audit_usage', message: command === undefined ? USAGE : `unknown command "${command}": ${USAGE}` });
  const json = rest.includes('--json');
  const keyAt = rest.indexOf('--key');
  const keyGiven = keyAt >= 0 ? rest[keyAt + 1] : undefined;
  const path = rest.filter((arg, i) => arg !== '--json' && (keyAt < 0 || (i !== keyAt && i !== keyAt + 1)))[0];
  if (path === undefined) throw new BadInput({ code: 'audit_usage', message: `name the export to verify: ${USAGE}` });
  if (keyGiven === undefined) throw new BadInput({ code: 'audit_key_invalid', message: `give funduq's public key with --key (GET /admin/audit/key answers it): ${USAGE}` });
  const keyText = existsSync(keyGiven) ? readFileSync(keyGiven, 'utf8') : keyGiven;
  const key = auditPublicKey(keyText);
  if (!key) throw new BadInput({ code: 'audit_key_invalid', message: '--key is no Ed25519 public key: give the base64url of its 32 bytes or its JWK ({"kty":"OKP","crv":"Ed25519","x":…}), as GET /admin/audit/key answers it' });
  if (!existsSync(path)) throw new BadInput({ code: 'audit_export_unreadable', message: `no file ${path}: export the log with GET /admin/audit/export first` });

  const started = performance.now();
  const verification = await verifyExport(readExport(path), verifierDeps(key));
  const seconds = (performance.now() - started) / 1000;
  if (json) {
    process.stdout.write(`${JSON.stringify(verification)}\n`);
  } else {
    const { verified, pending, segments, head, problems } = verification;
    for (const problem of problems) process.stdout.write(`${problem.code}: ${problem.message}\n`);
    for (const { id, line } of pending.slice(0, 20)) process.stdout.write(`pending: record ${id} (line ${line}) is not sealed yet: export again after the next seal (a minute) to prove it\n`);
    if (pending.length > 20) process.stdout.write(`pending: ${pending.length - 20} more records not sealed yet\n`);
    const headText = head ? `; the last segment is ${head.seq}, hash ${head.hash}: compare it with GET /admin/audit/head` : '';
    const verdict = problems.length === 0 ? 'verified' : `BROKEN (${problems.length} problem${problems.length === 1 ? '' : 's'})`;
    process.stdout.write(`${verdict}: ${verified} records in ${segments} segments${pending.length ? `, ${pending.length} pending` : ''}${headText} (${seconds.toFixed(2)} s)\n`);
  }
  return verification.problems.length === 0 ? 0 : 1;
}

/**
 * The export's lines as they are read (an export of any size is never held whole), each checked
 * for its shape: a line that is none of the kinds is bad input, named by its number.
 */
async function* readExport(path: string): AsyncGenerator<ExportLine[]> {
  let number = 0;
  for await (const chunk of byteLines(path)) {
    const lines: ExportLine[] = [];
    for (const bytes of chunk) {
      number++;
      lines.push(exportLineOf(bytes, number, path));
    }
    yield lines;
  }
  if (number === 0) throw new BadInput({ code: 'audit_export_unreadable', message: `${path} is empty: export the log with GET /admin/audit/export` });
}

/** Line `number` of the export: a record's by its bytes where the gateway wrote it, else by its text. */
function exportLineOf(bytes: Buffer, number: number, path: string): ExportLine {
  const fast = number === 1 ? undefined : recordLineOf(bytes);
  if (fast) return fast;
  let line: ExportLine;
  try {
    line = readExportLine(bytes.toString('utf8'), sha256Hex);
  } catch (error) {
    if (error instanceof ExportLineError) throw new BadInput({ code: 'audit_export_unreadable', message: `line ${number} of ${path} ${error.message}` });
    throw error;
  }
  if (number === 1 && line.kind !== 'audit-export') throw new BadInput({ code: 'audit_export_unreadable', message: `${path} does not begin with an export's header line ({"kind":"audit-export",…}): is it an export of GET /admin/audit/export?` });
  return line;
}

const RECORD_PREFIX = Buffer.from('{"kind":"record",');
const SEGMENT_KEY = Buffer.from('"segment":');
const ID_KEY = Buffer.from('"id":"');
const RECORD_KEY = Buffer.from('","record":{');
/** SHA-256 (hex) of bytes: Node's one-shot `crypto.hash` where it has one (20.12, 21.7), else a Hash. */
const oneShot = (nodeCrypto as { hash?: (algorithm: string, data: Uint8Array, encoding: 'hex') => string }).hash;
const hashBytes = (bytes: Uint8Array): string => (oneShot ? oneShot('sha256', bytes, 'hex') : nodeCrypto.createHash('sha256').update(bytes).digest('hex'));

/**
 * A record's line as the gateway writes it (`recordLineText`), read from its bytes: the record's
 * bytes hashed as they are, no UTF-8 decoded, nothing parsed. Undefined for any other line, which
 * `readExportLine` reads.
 */
function recordLineOf(bytes: Buffer): ExportLine | undefined {
  if (bytes.length < RECORD_PREFIX.length || bytes.compare(RECORD_PREFIX, 0, RECORD_PREFIX.length, 0, RECORD_PREFIX.length) !== 0 || bytes[bytes.length - 1] !== 0x7d) return undefined;
  let at = RECORD_PREFIX.length;
  let segment: number | undefined;
  if (bytes.compare(SEGMENT_KEY, 0, SEGMENT_KEY.length, at, at + SEGMENT_KEY.length) === 0) {
    const comma = bytes.indexOf(0x2c, at + SEGMENT_KEY.length);
    segment = Number(bytes.toString('latin1', at + SEGMENT_KEY.length, comma));
    if (!Number.isSafeInteger(segment) || segment < 1) return undefined;
    at = comma + 1;
  }
  if (bytes.compare(ID_KEY, 0, ID_KEY.length, at, at + ID_KEY.length) !== 0) return undefined;
  const idStart = at + ID_KEY.length;
  const idEnd = bytes.indexOf(RECORD_KEY, idStart);
  if (idEnd < 0) return undefined;
  const id = bytes.toString('latin1', idStart, idEnd);
  // An id is a time and an id funduq made (ASCII): anything to unescape is no line of its writing.
  if (/[\\"\x80-\xff]/.test(id)) return undefined;
  const record = bytes.subarray(idEnd + RECORD_KEY.length - 1, bytes.length - 1);
  return { kind: 'record', ...(segment !== undefined ? { segment } : {}), id, hash: hashBytes(record), text: record };
}

/** A file's lines (LF or CRLF) as bytes, read in large chunks and given a chunk's lines at a time. */
async function* byteLines(path: string): AsyncGenerator<Buffer[]> {
  let rest: Buffer | undefined;
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) {
    const bytes = rest ? Buffer.concat([rest, chunk as Buffer]) : (chunk as Buffer);
    const lines: Buffer[] = [];
    let start = 0;
    for (let end = bytes.indexOf(0x0a); end >= 0; end = bytes.indexOf(0x0a, start)) {
      lines.push(bytes.subarray(start, end > start && bytes[end - 1] === 0x0d ? end - 1 : end));
      start = end + 1;
    }
    rest = start < bytes.length ? bytes.subarray(start) : undefined;
    yield lines;
  }
  if (rest) yield [rest];
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    if (error instanceof BadInput) {
      process.stderr.write(`${error.code}: ${error.message}\n`);
      process.exitCode = 2;
      return;
    }
    process.stderr.write(`audit_verify_failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 2;
  },
);
