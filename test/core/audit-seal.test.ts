import { beforeAll, describe, expect, it } from 'vitest';
import { auditPublicKey, auditSealFromSecret, sha256Hex, verifierDeps } from '../../lambdas/adapters/crypto/audit-seal.js';
import { exportAudit } from '../../lambdas/core/audit/export.js';
import { auditId, canonicalJson, type AuditRecord } from '../../lambdas/core/audit/record.js';
import { sealAudit, SEGMENT_MAX_MS } from '../../lambdas/core/audit/seal.js';
import { readExportLine, recordLineText } from '../../lambdas/core/audit/lines.js';
import { verifyExport } from '../../lambdas/core/audit/verify.js';
import type { RunStore } from '../../lambdas/core/ports.js';
import { useStore } from '../support/stores.js';

const { freshStore } = useStore();
const seal = auditSealFromSecret('the gateway identity secret of this test');
const verify = (lines: readonly string[], key = seal.publicKey) => verifyExport(lines.map((text) => readExportLine(text, sha256Hex)), verifierDeps(auditPublicKey(key)!));
/** A line as JSON (its record, its segment's seq and JWS). */
const parsed = (text: string) => JSON.parse(text) as { kind: string; segment?: number; seq?: number; jws?: string; record?: AuditRecord };

/** A clock the test moves. */
const clock = { at: Date.parse('2026-12-03T08:00:00.000Z'), now() { return this.at; } };
let n = 0;
function record(over: Partial<AuditRecord> = {}): AuditRecord {
  n += 1;
  const at = new Date(clock.at).toISOString();
  return { id: auditId(at, `r${String(n).padStart(4, '0')}`), at, tenant: 'acme', actor: { kind: 'principal', principal: 'alice', credentialId: 'c0ffee' }, action: 'run.submitted', target: `run:r${n}`, outcome: 'ok', ...over };
}

async function exported(store: RunStore): Promise<string[]> {
  const lines: string[] = [];
  for await (const line of exportAudit(store.audit, { publicKey: seal.publicKey }, clock.now())) lines.push(line);
  return lines;
}

describe('the sealed audit log', () => {
  let store: RunStore;
  let lines: string[];
  beforeAll(async () => {
    store = await freshStore();
    // Three minutes of records, one every 20 s: segments hold at most a minute each.
    for (let i = 0; i < 9; i++) {
      await store.audit.append(record(i === 4 ? { action: 'tenant.budget_changed', actor: { kind: 'admin', principal: 'admin' }, before: null, after: { period: 'day', tokens: 10 } } : {}));
      clock.at += 20_000;
    }
    expect(await sealAudit({ log: store.audit, seal, clock })).toBe(9);
    // Written after the seal: pending.
    await store.audit.append(record());
    lines = await exported(store);
  });

  it('seals records into signed, chained segments of at most a minute, in the order written', async () => {
    const segments = await store.audit.segments(1, 10);
    expect(segments.map((s) => s.seq)).toEqual([1, 2, 3]);
    for (const segment of segments) expect(Date.parse(segment.to) - Date.parse(segment.from)).toBeLessThan(SEGMENT_MAX_MS);
    expect(segments.flatMap((s) => s.ids)).toEqual(lines.map(parsed).filter((l) => l.kind === 'record' && l.segment !== undefined).map((l) => l.record!.id));
    expect(await store.audit.unsealed(10, '2026-12-01T00:00:00.000Z', '2026-12-04T00:00:00.000Z')).toHaveLength(1);
    // A second seal finds nothing new sealed twice.
    expect(await sealAudit({ log: store.audit, seal, clock })).toBe(1);
    expect((await store.audit.lastSegment())?.seq).toBe(4);
  });

  it('verifies an untouched export, with the records written after the last seal pending', async () => {
    const result = await verify(lines);
    expect(result.problems).toEqual([]);
    expect(result).toMatchObject({ verified: 9, segments: 3, head: { seq: 3 } });
    expect(result.pending.map((p) => p.id)).toEqual([parsed(lines.at(-1)!).record!.id]);
  });

  it('proves a record whose line was re-spaced or its keys re-ordered: the canonical record is what was sealed', async () => {
    const respaced = lines.map((text) => {
      const line = parsed(text);
      return line.kind === 'record' ? JSON.stringify({ record: Object.fromEntries(Object.entries(line.record!).reverse()), segment: line.segment, kind: 'record' }, null, 0) : text;
    });
    expect(respaced).not.toEqual(lines);
    expect(await verify(respaced)).toMatchObject({ verified: 9, problems: [] });
  });

  const recordLines = () => lines.flatMap((line, index) => (parsed(line).kind === 'record' && parsed(line).segment !== undefined ? [index] : []));
  const idAt = (index: number) => parsed(lines[index]).record!.id;

  it('names an edited record, where it is', async () => {
    const tampered = [...lines];
    const at = recordLines()[4];
    const line = parsed(lines[at]);
    tampered[at] = recordLineText({ ...line.record!, after: { period: 'day', tokens: 1_000_000 } }, line.segment);
    const result = await verify(tampered);
    expect(result.problems).toHaveLength(1);
    expect(result.problems[0]).toMatchObject({ code: 'audit_record_edited', line: at + 1, recordId: idAt(at) });
  });

  it('names a deleted record', async () => {
    const at = recordLines()[2];
    const tampered = lines.filter((_, index) => index !== at);
    const result = await verify(tampered);
    expect(result.problems.map((p) => [p.code, p.recordId])).toEqual([['audit_record_deleted', idAt(at)]]);
  });

  it('names an inserted record, even one copied from another', async () => {
    const at = recordLines()[1];
    const forged = recordLineText(record({ actor: { kind: 'principal', principal: 'mallory' } }), parsed(lines[at]).segment);
    const copied = lines[at];
    const result = await verify([...lines.slice(0, at + 1), forged, copied, ...lines.slice(at + 1)]);
    expect(result.problems.map((p) => [p.code, p.line])).toEqual([
      ['audit_record_inserted', at + 2],
      ['audit_record_inserted', at + 3],
    ]);
  });

  it('names a reordered pair', async () => {
    const [first, second] = recordLines();
    const tampered = [...lines];
    [tampered[first], tampered[second]] = [tampered[second], tampered[first]];
    const result = await verify(tampered);
    expect(result.problems.map((p) => p.code)).toEqual(['audit_record_reordered']);
    expect(result.problems[0].recordId).toBe(idAt(first));
  });

  it('names a dropped segment, and the records it sealed are not taken as proven', async () => {
    const dropped = lines.findIndex((line) => parsed(line).kind === 'segment' && parsed(line).seq === 2);
    const result = await verify(lines.filter((_, index) => index !== dropped));
    expect(result.problems.map((p) => [p.code, p.seq])).toEqual([['audit_segment_missing', 2]]);
    expect(result.verified).toBeLessThan(9);
  });

  it('names a segment signed by another key, and one that does not chain', async () => {
    const other = auditSealFromSecret('someone else');
    const at = lines.findIndex((line) => parsed(line).kind === 'segment' && parsed(line).seq === 2);
    const payload = Buffer.from(parsed(lines[at]).jws!.split('.')[1], 'base64url').toString('utf8');
    const segmentLine = async (jws: string) => JSON.stringify({ kind: 'segment', seq: 2, jws });
    const resigned = [...lines];
    resigned[at] = await segmentLine(await other.sign(payload));
    const result = await verify(resigned);
    expect(result.problems.map((p) => [p.code, p.seq])).toEqual([['audit_segment_signature_invalid', 2]]);

    // Signed by the right key but naming another predecessor: a replaced segment.
    const forged = JSON.parse(payload) as { prev: string };
    forged.prev = '0'.repeat(64);
    const replaced = [...lines];
    replaced[at] = await segmentLine(await seal.sign(canonicalJson(forged)));
    // Segment 2 names no segment 1, and segment 3 names a segment 2 that is not this one.
    expect((await verify(replaced)).problems.map((p) => [p.code, p.seq])).toEqual([
      ['audit_segment_chain_broken', 2],
      ['audit_segment_chain_broken', 3],
    ]);
  });

  it('checks every signature against the key it is given', async () => {
    const result = await verify(lines, auditSealFromSecret('not the gateway').publicKey);
    expect(result.problems.map((p) => p.code)).toEqual(['audit_segment_signature_invalid', 'audit_segment_signature_invalid', 'audit_segment_signature_invalid']);
    expect(result.verified).toBe(0);
  });

  it('takes over a segment another sealer wrote first, and finishes marking a segment whose sealer died', async () => {
    const shared = await freshStore();
    for (let i = 0; i < 3; i++) await shared.audit.append(record());
    // A sealer wrote segment 1 and died before marking its records.
    const pending = await shared.audit.unsealed(10, '2026-12-01T00:00:00.000Z', '2026-12-10T00:00:00.000Z');
    const { sealSegment } = await import('../../lambdas/core/audit/seal.js');
    const first = await sealSegment({ seal, clock }, pending.slice(0, 2), undefined);
    expect(await shared.audit.putSegment(first)).toBe(true);
    expect(await shared.audit.putSegment(first)).toBe(false);
    // The next seal marks them and seals only the third.
    expect(await sealAudit({ log: shared.audit, seal, clock })).toBe(1);
    const result = await verify(await exported(shared));
    expect(result).toMatchObject({ verified: 3, segments: 2, pending: [], problems: [] });
  });
});
