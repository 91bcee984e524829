import { execFile } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { auditSealFromSecret } from '../../lambdas/adapters/crypto/audit-seal.js';
import { createSqliteStore } from '../../lambdas/adapters/local/sqlite/store.js';
import { recordProjections } from '../../lambdas/core/a2a/task-state.js';
import { recordLineText } from '../../lambdas/core/audit/lines.js';
import { auditId, type AuditRecord } from '../../lambdas/core/audit/record.js';
import { sealSegment, SEGMENT_MAX_RECORDS } from '../../lambdas/core/audit/seal.js';
import type { Bench, Row } from '../support/bench.js';
import { row } from '../support/bench.js';
import { now } from '../support/sse-reader.js';
import { spread } from '../support/stats.js';

const MILLION = 1_000_000;

/** A record as the doors write one for a run's submission. */
function recordAt(at: number, n: number): AuditRecord {
  const time = new Date(at).toISOString();
  return {
    id: auditId(time, randomUUID()),
    at: time,
    tenant: `tenant-${n % 50}`,
    actor: { kind: 'principal', principal: `user-${n % 1000}`, credentialId: '0123456789abcdef' },
    action: 'run.submitted',
    target: `run:${randomUUID()}`,
    outcome: 'ok',
    requestId: randomUUID(),
    traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
    detail: { threadId: `thread-${n % 5000}`, agentId: 'travel' },
  };
}

/** An export of `count` records, sealed in segments of 1,000 as the sealer seals them, written to `path` as the gateway writes one. */
export async function writeExport(path: string, count: number): Promise<string> {
  const seal = auditSealFromSecret('the bench identity secret');
  const out = createWriteStream(path);
  const write = (line: unknown) => new Promise<void>((resolve) => (out.write(`${typeof line === 'string' ? line : JSON.stringify(line)}\n`) ? resolve() : out.once('drain', resolve)));
  await write({ kind: 'audit-export', version: 1, publicKey: seal.publicKey });
  const clock = { now: () => Date.parse('2026-12-03T00:00:00.000Z') };
  let prev: { seq: number; hash: string } | undefined;
  let at = clock.now();
  for (let made = 0; made < count; made += SEGMENT_MAX_RECORDS) {
    const records = Array.from({ length: Math.min(SEGMENT_MAX_RECORDS, count - made) }, (_, i) => recordAt((at += 3), made + i));
    const segment = await sealSegment({ seal, clock }, records, prev);
    for (const record of records) await write(recordLineText(record, segment.seq));
    await write({ kind: 'segment', seq: segment.seq, jws: segment.jws });
    prev = segment;
  }
  await new Promise<void>((resolve) => out.end(resolve));
  return seal.publicKey;
}

/**
 * The audit log's costs (issue 27). The offline verifier over an export of 1,000,000 records
 * (250,000 with --quick, its time scaled to a million), run as a user runs it
 * (`npm run audit -- verify`, a process of its own), beside the floor measured on the same file in
 * the same run: reading its lines and parsing each (what any verifier of NDJSON does), and the
 * SHA-256 of its bytes alone. And what writing a run's audit record adds to its admission: one
 * append to the record (SQLite, as `npm start` keeps it, on a file), beside the admission itself
 * (a POST to the AG-UI door until its response's head).
 */
export async function audit(bench: Bench): Promise<Row[]> {
  const count = bench.quick ? 250_000 : MILLION;
  const scale = MILLION / count;
  const dir = mkdtempSync(join(tmpdir(), 'funduq-bench-audit-'));
  try {
    const file = join(dir, 'export.ndjson');
    const madeAt = now();
    const key = await writeExport(file, count);
    bench.log(`  an export of ${count.toLocaleString('en')} records made in ${((now() - madeAt) / 1000).toFixed(1)} s`);
    const verify: number[] = [];
    const parse: number[] = [];
    const hash: number[] = [];
    for (let rep = 0; rep < 3; rep++) {
      let started = now();
      const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'bin/audit.ts', 'verify', file, '--key', key, '--json'], { maxBuffer: 64 * 1024 * 1024 });
      verify.push(((now() - started) / 1000) * scale);
      const result = JSON.parse(stdout) as { verified: number; problems: unknown[] };
      if (result.verified !== count || result.problems.length > 0) throw new Error(`the verifier proved ${result.verified} of ${count} records, with ${result.problems.length} problems`);
      started = now();
      for await (const line of createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity })) JSON.parse(line);
      parse.push(((now() - started) / 1000) * scale);
      started = now();
      const digest = createHash('sha256');
      for await (const chunk of createReadStream(file)) digest.update(chunk as Buffer);
      digest.digest();
      hash.push(((now() - started) / 1000) * scale);
      bench.log(`  rep ${rep + 1}: verified in ${verify[rep].toFixed(2)} s, lines parsed in ${parse[rep].toFixed(2)} s, bytes hashed in ${hash[rep].toFixed(2)} s (per million records)`);
    }

    // A run's admission, and the audit record written with it.
    const gateway = await bench.startGateway('local', 'scenario-12');
    const admission: number[] = [];
    try {
      await gateway.registerAgent('audited', { events: 2, intervalMs: 0, deltaChars: 4 });
      for (let i = 0; i < (bench.quick ? 60 : 200); i++) {
        const started = now();
        const response = await fetch(`${gateway.url}/agui/audited`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ threadId: `t-${i}`, runId: `r-${i}`, messages: [{ id: `m-${i}`, role: 'user', content: 'go' }], tools: [], context: [], state: {}, forwardedProps: {} }),
        });
        admission.push(now() - started);
        await response.arrayBuffer();
      }
    } finally {
      await gateway.stop();
    }
    const store = createSqliteStore(join(dir, 'record.db'), { projections: recordProjections });
    const append: number[] = [];
    try {
      for (let i = 0; i < 2_000; i++) {
        const record = recordAt(Date.now(), i);
        const started = now();
        await store.audit.append(record);
        append.push(now() - started);
      }
    } finally {
      await store.close();
    }
    const p50 = (samples: number[]) => [...samples].sort((a, b) => a - b)[Math.floor(samples.length / 2)];
    const admitted = p50(admission);
    return [
      row({ scenario: 12, name: 'audit verifier', metric: `npm run audit -- verify over ${count.toLocaleString('en')} records, s per 1,000,000`, unit: 's', reference: spread(parse).median, referenceIs: 'the same lines read and JSON-parsed, nothing else', target: '≤ 10 s' }, spread(verify), (v) => v <= 10),
      row({ scenario: 12, name: 'audit verifier', metric: 'the export\'s bytes hashed (SHA-256) alone, s per 1,000,000', unit: 's', reference: null, target: null }, spread(hash)),
      row({ scenario: 12, name: 'audit at admission', metric: "a run's audit record written (one append, SQLite file), p50 of 2,000", unit: 'ms', reference: admitted, referenceIs: "a run's admission (POST /agui until the response's head), p50", target: '≤ 1 ms' }, spread([p50(append)]), (v) => v <= 1),
    ];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
