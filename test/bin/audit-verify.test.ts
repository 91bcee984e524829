import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { auditSealFromSecret } from '../../lambdas/adapters/crypto/audit-seal.js';
import { createSqliteStore } from '../../lambdas/adapters/local/sqlite/store.js';
import { recordProjections } from '../../lambdas/core/a2a/task-state.js';
import { exportAudit } from '../../lambdas/core/audit/export.js';
import { auditId, type AuditRecord } from '../../lambdas/core/audit/record.js';
import { sealAudit } from '../../lambdas/core/audit/seal.js';

/** `npm run audit -- verify …` as a user runs it: a child process, its exit code and what it printed. */
function verify(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', 'bin/audit.ts', ...args], { cwd: process.cwd() }, (error, stdout, stderr) => {
      resolve({ code: error ? Number((error as { code?: number }).code) : 0, stdout, stderr });
    });
  });
}

const seal = auditSealFromSecret('the identity secret of the verifier test');
const dir = mkdtempSync(join(tmpdir(), 'funduq-verify-'));
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};
let lines: string[];

beforeAll(async () => {
  const store = createSqliteStore(':memory:', { projections: recordProjections });
  const clock = { at: Date.parse('2026-12-03T09:00:00.000Z'), now() { return this.at; } };
  for (let i = 0; i < 5; i++) {
    const at = new Date(clock.at).toISOString();
    const record: AuditRecord = { id: auditId(at, `n${i}`), at, tenant: 'acme', actor: { kind: 'principal', principal: 'bob' }, action: 'run.cancel_requested', target: `run:r${i}`, outcome: 'ok' };
    await store.audit.append(record);
    clock.at += 1000;
  }
  await sealAudit({ log: store.audit, seal, clock });
  const at = new Date(clock.at).toISOString();
  await store.audit.append({ id: auditId(at, 'late'), at, tenant: 'acme', actor: { kind: 'funduq' }, action: 'ask.expired', target: 'run:r9', outcome: 'ok' });
  lines = [];
  for await (const line of exportAudit(store.audit, { publicKey: seal.publicKey }, clock.now())) lines.push(line);
  await store.close();
});

describe('npm run audit -- verify', () => {
  it('verifies an untouched export (exit 0) and lists what is pending', async () => {
    const { code, stdout } = await verify('verify', file('good.ndjson', `${lines.join('\n')}\n`), '--key', seal.publicKey);
    expect(stdout).toMatch(/^pending: record .*\/late \(line 8\) is not sealed yet/m);
    expect(stdout).toMatch(/^verified: 5 records in 1 segments, 1 pending; the last segment is 1, hash [0-9a-f]{64}/m);
    expect(code).toBe(0);
  });

  it('fails an edited export (exit 1), naming the record and its line', async () => {
    const edited = lines.map((line, index) => (index === 3 ? line.replace('"principal":"bob"', '"principal":"eve"') : line));
    const { code, stdout } = await verify('verify', file('edited.ndjson', edited.join('\n')), '--key', seal.publicKey, '--json');
    expect(code).toBe(1);
    const result = JSON.parse(stdout) as { problems: { code: string; line: number }[] };
    expect(result.problems).toEqual([expect.objectContaining({ code: 'audit_record_edited', line: 4 })]);
  });

  it('fails an export re-signed with another key', async () => {
    const { code, stdout } = await verify('verify', file('good2.ndjson', lines.join('\n')), '--key', auditSealFromSecret('another').publicKey);
    expect(code).toBe(1);
    expect(stdout).toMatch(/^audit_segment_signature_invalid: segment 1 \(line 7\)/m);
    expect(stdout).toMatch(/^BROKEN \(1 problem\)/m);
  });

  it('says what to do with bad input (exit 2), each with its code', async () => {
    const notNdjson = await verify('verify', file('bad.ndjson', 'this is no export'), '--key', seal.publicKey);
    expect([notNdjson.code, notNdjson.stderr]).toEqual([2, expect.stringMatching(/^audit_export_unreadable: line 1 of .* is not JSON/)]);
    const noHeader = await verify('verify', file('headless.ndjson', lines.slice(1).join('\n')), '--key', seal.publicKey);
    expect([noHeader.code, noHeader.stderr]).toEqual([2, expect.stringMatching(/^audit_export_unreadable: .* does not begin with an export's header/)]);
    const wrongShape = await verify('verify', file('shape.ndjson', `${lines[0]}\n{"kind":"record"}`), '--key', seal.publicKey);
    expect([wrongShape.code, wrongShape.stderr]).toEqual([2, expect.stringMatching(/^audit_export_unreadable: line 2 of .* is no export line/)]);
    const badKey = await verify('verify', file('good3.ndjson', lines.join('\n')), '--key', 'not-a-key');
    expect([badKey.code, badKey.stderr]).toEqual([2, expect.stringMatching(/^audit_key_invalid: --key is no Ed25519 public key/)]);
    const noKey = await verify('verify', file('good4.ndjson', lines.join('\n')));
    expect([noKey.code, noKey.stderr]).toEqual([2, expect.stringMatching(/^audit_key_invalid: give funduq's public key with --key/)]);
    const missing = await verify('verify', join(dir, 'nowhere.ndjson'), '--key', seal.publicKey);
    expect([missing.code, missing.stderr]).toEqual([2, expect.stringMatching(/^audit_export_unreadable: no file/)]);
    const usage = await verify('check');
    expect([usage.code, usage.stderr]).toEqual([2, expect.stringMatching(/^audit_usage: unknown command "check"/)]);
  });
});
