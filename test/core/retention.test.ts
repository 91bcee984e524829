import { describe, expect, it } from 'vitest';
import { auditSealFromSecret } from '../../lambdas/adapters/crypto/audit-seal.js';
import type { AuditAction, AuditRecord } from '../../lambdas/core/audit/record.js';
import { ANONYMOUS } from '../../lambdas/core/model.js';
import { DAY_MS } from '../../lambdas/core/retention/policy.js';
import { eventually, Gate, harness, lastText, replyEvents, TEST_AGENT, type Harness } from '../support/core-harness.js';
import { useStore } from '../support/stores.js';

const { freshStore, kind } = useStore();
const CALLER = { agentId: TEST_AGENT.id, principal: ANONYMOUS };

/** The audit records of `action` written in the harness's clock's last days (listings are by day: keep the range narrow). */
async function audits(h: Harness, action: AuditAction, days = 2): Promise<AuditRecord[]> {
  const to = new Date(h.clock.now() + DAY_MS).toISOString();
  const from = new Date(h.clock.now() - days * DAY_MS).toISOString();
  return (await h.store.audit.list({ from, to, action, limit: 100 })).records;
}

/** A thread of its own, one run sent and settled on it; the run's id. */
async function settledRun(h: Harness, threadId: string, text = 'hello'): Promise<string> {
  const started = await h.gateway.startRun({ agentId: TEST_AGENT.id, input: h.input(text, { threadId }), door: 'agui', principal: ANONYMOUS });
  if (!started.ok) throw new Error(started.message);
  await h.settled();
  return started.value.run.runId;
}

/** What every read says of a thread and its run: the thread view, the run, its A2A task and the tenant's task list. */
async function reads(h: Harness, threadId: string, runId: string) {
  const view = await h.gateway.threadView(threadId, ANONYMOUS);
  const task = await h.gateway.tasks.getTask(CALLER, runId);
  const listed = await h.gateway.tasks.listTasks(CALLER, { pageSize: 100, view: {} });
  return {
    thread: view.ok,
    run: (await h.gateway.getRun(runId, ANONYMOUS)) !== undefined,
    task: task.ok,
    listed: listed.ok && listed.value.tasks.some((t) => t.id === runId),
  };
}

const SEEN = { thread: true, run: true, task: true, listed: true };
const GONE = { thread: false, run: false, task: false, listed: false };

describe('retention, on a clock the test moves', () => {
  it('ends a thread past its tenant’s content days: gone from every read at once, refused a new run, then deleted with an audit record of what went', async () => {
    const store = await freshStore();
    const h = await harness(store);
    expect(await h.gateway.retention.set(ANONYMOUS.tenant, { contentDays: 30 })).toMatchObject({ ok: true, value: { policy: { contentDays: 30, usageDays: null, auditDays: 400 }, own: { contentDays: 30 } } });
    const old = await settledRun(h, 't-old');
    h.clock.advance(20 * DAY_MS);
    const recent = await settledRun(h, 't-recent');
    h.clock.advance(11 * DAY_MS);
    // Thirty-one days since t-old's last activity, eleven since t-recent's.
    expect(await reads(h, 't-old', old)).toEqual(GONE);
    expect(await reads(h, 't-recent', recent)).toEqual(SEEN);
    expect(await h.gateway.startRun({ agentId: TEST_AGENT.id, input: h.input('again', { threadId: 't-old' }), door: 'agui', principal: ANONYMOUS })).toMatchObject({ ok: false, code: 'thread_expired' });
    expect(await h.gateway.cancelRun(old, ANONYMOUS)).toMatchObject({ ok: false, code: 'run_not_found' });

    const events = (await h.events(old)).length;
    expect(events).toBeGreaterThan(2);
    expect(await h.gateway.retention.apply()).toMatchObject({ threads: 1, runs: 1, events });
    expect(await store.threads.get({ tenant: ANONYMOUS.tenant, threadId: 't-old' })).toBeUndefined();
    expect(await store.runs.get(old)).toBeUndefined();
    expect(await store.events.read(old, 0)).toEqual([]);
    expect(await store.threads.get({ tenant: ANONYMOUS.tenant, threadId: 't-recent' })).toBeDefined();
    expect(await audits(h, 'retention.deleted')).toEqual([
      expect.objectContaining({ tenant: ANONYMOUS.tenant, actor: { kind: 'funduq' }, target: 'thread:t-old', outcome: 'ok', detail: expect.objectContaining({ kind: 'content', runs: 1, events, contentDays: 30 }) }),
    ]);
    // A second pass finds nothing more; the thread's id is free again, for a new conversation.
    expect(await h.gateway.retention.apply()).toMatchObject({ threads: 0 });
    expect(await settledRun(h, 't-old', 'a new start')).toBeDefined();
    expect((await h.gateway.threadView('t-old', ANONYMOUS)).ok).toBe(true);
  });

  it('runs one pass at a time: a pass that finds another under way does nothing, and one that died holds none up past its bound', async () => {
    const store = await freshStore();
    const h = await harness(store, { settings: { retention: { contentDays: 1 } } });
    const runId = await settledRun(h, 't-1');
    h.clock.advance(2 * DAY_MS);
    const nowSeconds = Math.floor(h.clock.now() / 1000);
    // Another process's pass, under way (or dead before it let go).
    await store.claims.take({ key: 'funduq:retention-pass', runId: 'another-pass', threadId: '', expiresAt: nowSeconds + 15 * 60 }, nowSeconds);
    expect(await h.gateway.retention.apply()).toEqual({ threads: 0, runs: 0, events: 0, usageRecords: 0, auditRecords: 0 });
    expect(await store.runs.get(runId)).toBeDefined();
    h.clock.advance(15 * 60_000);
    expect(await h.gateway.retention.apply()).toMatchObject({ threads: 1 });
    expect(await store.runs.get(runId)).toBeUndefined();
  });

  it('keeps a held thread and every thread of a held tenant until the hold is lifted', async () => {
    const store = await freshStore();
    const h = await harness(store, { settings: { retention: { contentDays: 7 } } });
    const held = await settledRun(h, 't-held');
    const other = await settledRun(h, 't-other');
    expect(await h.gateway.retention.holdThread({ tenant: ANONYMOUS.tenant, threadId: 't-held' }, { at: '2026-01-01T00:00:00.000Z', by: 'admin', reason: 'case 42' })).toMatchObject({ ok: true, value: { hold: { reason: 'case 42' } } });
    expect(await h.gateway.retention.holdThread({ tenant: ANONYMOUS.tenant, threadId: 't-none' }, { at: '2026-01-01T00:00:00.000Z', by: 'admin' })).toMatchObject({ ok: false, code: 'thread_not_found' });
    await h.gateway.retention.holdTenant(ANONYMOUS.tenant, { at: '2026-01-01T00:00:00.000Z', by: 'admin' });
    h.clock.advance(8 * DAY_MS);
    expect(await reads(h, 't-other', other)).toEqual(SEEN);
    expect(await h.gateway.retention.apply()).toMatchObject({ threads: 0 });
    // The tenant's hold lifted: its threads go, but the held one.
    await h.gateway.retention.holdTenant(ANONYMOUS.tenant, undefined);
    expect(await reads(h, 't-other', other)).toEqual(GONE);
    expect(await reads(h, 't-held', held)).toEqual(SEEN);
    expect(await h.gateway.retention.apply()).toMatchObject({ threads: 1 });
    expect(await store.runs.get(held)).toBeDefined();
    await h.gateway.retention.holdThread({ tenant: ANONYMOUS.tenant, threadId: 't-held' }, undefined);
    expect(await h.gateway.retention.apply()).toMatchObject({ threads: 1 });
    expect(await store.runs.get(held)).toBeUndefined();
  });

  it('never ends a thread with a run still going on or waiting for an answer', async () => {
    const store = await freshStore();
    const gate = new Gate();
    const h = await harness(store, { settings: { retention: { contentDays: 1 } } });
    h.provider.script = async function* (input) {
      if (lastText(input) === 'slow') await gate.wait;
      if (lastText(input) === 'ask') {
        yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
        yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId, outcome: { type: 'interrupt', interrupts: [{ id: 'approve', reason: 'approval' }] } };
        return;
      }
      yield* replyEvents(input, `echo: ${lastText(input)}`);
    };
    const asking = await settledRun(h, 't-waiting', 'ask');
    const slow = await h.gateway.startRun({ agentId: TEST_AGENT.id, input: h.input('slow', { threadId: 't-running' }), door: 'agui', principal: ANONYMOUS });
    expect(slow.ok).toBe(true);
    h.clock.advance(3 * DAY_MS);
    expect(await reads(h, 't-waiting', asking)).toEqual(SEEN);
    expect((await h.gateway.threadView('t-running', ANONYMOUS)).ok).toBe(true);
    expect(await h.gateway.retention.apply()).toMatchObject({ threads: 0 });
    // Once the run settles its thread is active again: counted from then.
    gate.open();
    await h.settled();
    expect((await h.gateway.threadView('t-running', ANONYMOUS)).ok).toBe(true);
    h.clock.advance(2 * DAY_MS);
    expect((await h.gateway.threadView('t-running', ANONYMOUS)).ok).toBe(false);
    expect(await h.gateway.retention.apply()).toMatchObject({ threads: 1 });
    expect(await store.runs.get(asking)).toBeDefined();
  });

  it('ends usage records past their usage days: gone from the listings, then deleted with an audit record', async () => {
    const store = await freshStore();
    const h = await harness(store, { settings: { retention: { usageDays: 10 } } });
    await settledRun(h, 't-1');
    const usage = (from: number) => h.gateway.usage.page({ from: new Date(from).toISOString(), to: new Date(h.clock.now() + DAY_MS).toISOString(), limit: 50 });
    const start = h.clock.now() - DAY_MS;
    await eventually(async () => expect(await usage(start)).toMatchObject({ ok: true, value: { records: [expect.anything()] } }));
    h.clock.advance(11 * DAY_MS);
    // A hold on the tenant keeps them, read and stored, until it is lifted.
    await h.gateway.retention.holdTenant(ANONYMOUS.tenant, { at: '2026-01-12T00:00:00.000Z', by: 'admin' });
    expect(await usage(start)).toMatchObject({ ok: true, value: { records: [expect.anything()] } });
    expect(await h.gateway.retention.apply()).toMatchObject({ usageRecords: 0 });
    await h.gateway.retention.holdTenant(ANONYMOUS.tenant, undefined);
    expect(await usage(start)).toMatchObject({ ok: true, value: { records: [] } });
    expect(await h.gateway.retention.apply()).toMatchObject({ usageRecords: 1 });
    expect((await store.usage.list({ from: new Date(start).toISOString(), to: new Date(h.clock.now()).toISOString(), limit: 10 })).records).toEqual([]);
    expect(await audits(h, 'retention.deleted')).toEqual([expect.objectContaining({ tenant: ANONYMOUS.tenant, target: `tenant:${ANONYMOUS.tenant}`, detail: { kind: 'usage', records: 1, usageDays: 10 } })]);
  });

  it('ends sealed audit segments past the audit days, whole and oldest first, keeping the newest the chain goes on from', async () => {
    const store = await freshStore();
    const h = await harness(store, { settings: { retention: { auditDays: 30 } } });
    const seal = await auditSealFromSecret('a test secret of the audit log');
    await settledRun(h, 't-1');
    expect(await h.gateway.audit.seal(seal)).toBe(1);
    h.clock.advance(DAY_MS);
    await settledRun(h, 't-2');
    expect(await h.gateway.audit.seal(seal)).toBe(1);
    h.clock.advance(30 * DAY_MS);
    await settledRun(h, 't-3');
    expect(await h.gateway.audit.seal(seal)).toBe(1);
    const listed = async () => (await h.gateway.audit.list({ from: '2025-12-31T00:00:00.000Z', to: new Date(h.clock.now() + DAY_MS).toISOString(), limit: 100 })).records.map((r) => r.target);
    // Thirty-one days on, the first record is past the audit days: no listing shows it.
    expect(await listed()).toEqual(['run:run-2', 'run:run-3']);
    expect(await h.gateway.retention.apply()).toMatchObject({ auditRecords: 1 });
    expect((await store.audit.segments(0, 10)).map((s) => s.seq)).toEqual([2, 3]);
    expect(await store.audit.get(['2026-01-01T00:00:00.000Z/run-1#submitted'])).toEqual([]);
    expect(await audits(h, 'retention.deleted')).toEqual([expect.objectContaining({ target: 'audit', detail: expect.objectContaining({ kind: 'audit', records: 1, segments: 1, auditDays: 30 }) })]);
  });

  it.runIf(kind === 'dynamodb')('finishes a DynamoDB deletion cut short, at its record or at its first delete, under one record', async () => {
    for (const cut of ['record', 'delete'] as const) {
      const store = await freshStore();
      const h = await harness(store, { settings: { retention: { contentDays: 1 } } });
      const runId = await settledRun(h, `t-${cut}`);
      h.clock.advance(2 * DAY_MS);
      // The deletion dies once where `cut` says, as a killed function would, after the thread was marked.
      const target = cut === 'record' ? (store.audit as unknown as Record<string, unknown>) : ((store.retention as unknown as { handle: Record<string, unknown> }).handle);
      const method = cut === 'record' ? 'append' : 'deleteKeys';
      const real = target[method] as (...args: unknown[]) => Promise<unknown>;
      target[method] = async () => {
        target[method] = real;
        throw new Error('killed');
      };
      await expect(h.gateway.retention.apply()).rejects.toThrow('killed');
      // Marked, not deleted: still gone for every read, and no run can join it.
      expect(await store.runs.get(runId)).toBeDefined();
      expect(await reads(h, `t-${cut}`, runId)).toEqual(GONE);
      expect(await h.gateway.startRun({ agentId: TEST_AGENT.id, input: h.input('late', { threadId: `t-${cut}` }), door: 'agui', principal: ANONYMOUS })).toMatchObject({ ok: false, code: 'thread_expired' });
      expect(await h.gateway.retention.apply()).toMatchObject({ threads: 1, runs: 1 });
      expect(await store.runs.get(runId)).toBeUndefined();
      expect(await store.threads.get({ tenant: ANONYMOUS.tenant, threadId: `t-${cut}` })).toBeUndefined();
      expect({ cut, records: (await audits(h, 'retention.deleted')).map((r) => r.detail) }).toEqual({ cut, records: [expect.objectContaining({ kind: 'content', runs: 1 })] });
    }
  });
});
