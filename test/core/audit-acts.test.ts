import { describe, expect, it } from 'vitest';
import type { SqliteStore } from '../../lambdas/adapters/local/sqlite/store.js';
import { cancelAudit, submissionAudit } from '../../lambdas/core/audit/acts.js';
import type { AuditRecord } from '../../lambdas/core/audit/record.js';
import type { Principal } from '../../lambdas/core/model.js';
import type { RunStore } from '../../lambdas/core/ports.js';
import { Gate, harness, replyEvents, lastText, eventually } from '../support/core-harness.js';
import { useStore } from '../support/stores.js';

const { freshStore, kind } = useStore();
const ALICE: Principal = { id: 'alice', tenant: 'anonymous', credentialId: '00aa11bb22cc33dd' };

async function records(store: RunStore): Promise<AuditRecord[]> {
  // The harness's clock starts on 2026-01-01.
  return (await store.audit.list({ from: '2025-12-31T00:00:00.000Z', to: '2026-01-03T00:00:00.000Z', limit: 1000 })).records;
}

describe('the audit records a run holds the facts of', () => {
  it('are written with the run: its submission, and the cancel that changed it, naming who asked and by which request', async () => {
    const store = await freshStore();
    const gate = new Gate();
    const h = await harness(store);
    h.provider.script = async function* (input) {
      await gate.wait;
      yield* replyEvents(input, `echo: ${lastText(input)}`);
    };
    const started = await h.gateway.startRun({ agentId: 'scripted', input: h.input('hold'), door: 'agui', principal: ALICE, requestId: 'req-1' });
    expect(started.ok).toBe(true);
    const run = started.ok ? started.value.run : undefined!;
    expect(await records(store)).toEqual([
      { ...submissionAudit(run), actor: { kind: 'principal', principal: 'alice', credentialId: '00aa11bb22cc33dd' }, requestId: 'req-1', action: 'run.submitted', target: `run:${run.runId}` },
    ]);
    await eventually(async () => expect((await store.runs.get(run.runId))?.status).toBe('running'));
    const cancelled = await h.gateway.cancelRun(run.runId, ALICE, undefined, 'req-2');
    expect(cancelled).toMatchObject({ ok: true, value: { status: 'cancelling', cancelRequest: { principal: 'alice', requestId: 'req-2' } } });
    const cancel = (await records(store)).find((record) => record.action === 'run.cancel_requested');
    expect(cancel).toEqual(cancelAudit((await store.runs.get(run.runId))!));
    expect(cancel).toMatchObject({ actor: { principal: 'alice', credentialId: '00aa11bb22cc33dd' }, requestId: 'req-2', target: `run:${run.runId}` });
    // A second cancel changes nothing on the record, and writes no second record of its own here (its door's note does).
    await h.gateway.cancelRun(run.runId, ALICE, undefined, 'req-3');
    expect((await records(store)).filter((record) => record.action === 'run.cancel_requested')).toHaveLength(1);
    gate.open();
    await h.settled();
  });

  it.runIf(kind === 'sqlite')('are in the run’s own transaction on SQLite: a log that refuses the record refuses the run, and nothing is left', async () => {
    const store = await freshStore();
    const h = await harness(store);
    const db = (store as unknown as SqliteStore)['db'];
    db.exec("CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_records BEGIN SELECT RAISE(ABORT, 'the disk is full'); END");
    await expect(h.send('refused')).rejects.toThrow(/the disk is full/);
    expect(await store.runs.get('run-1')).toBeUndefined();
    db.exec('DROP TRIGGER refuse_audit');
    expect(await h.send('taken')).toMatchObject({ ok: true });
    expect((await records(store)).map((record) => record.target)).toEqual(['run:run-2']);
    await h.settled();
  });

  it.runIf(kind === 'dynamodb')('are written again by the repair of the run’s change on DynamoDB, where no transaction holds them with the run: once', async () => {
    const store = await freshStore();
    const h = await harness(store);
    // The function dies between the run's write and its record's: the record is not written.
    const append = store.audit.append.bind(store.audit);
    let refused = 0;
    store.audit.append = async (record) => {
      if (refused++ === 0) throw new Error('the function was killed');
      return append(record);
    };
    const started = await h.send('unrecorded');
    expect(started.ok).toBe(true);
    await h.settled();
    expect(await records(store)).toEqual([]);
    await h.gateway.repairRun('run-1');
    await h.gateway.repairRun('run-1');
    const run = (await store.runs.get('run-1'))!;
    expect(await records(store)).toEqual([submissionAudit(run)]);
  });
});
