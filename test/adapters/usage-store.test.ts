import { describe, expect, it } from 'vitest';
import type { UsageRecord } from '../../lambdas/core/usage.js';
import { useStore } from '../support/stores.js';

const dynamo = useStore();

function record(runId: string, tenant: string, endedAt: string, fields: Partial<UsageRecord> = {}): UsageRecord {
  return {
    runId,
    tenant,
    principal: 'p',
    agentId: 'a',
    threadId: 't',
    rootRunId: runId,
    door: 'agui',
    outcome: 'success',
    acceptedAt: endedAt,
    endedAt,
    queuedMs: 0,
    runningMs: 0,
    events: 2,
    bytes: 100,
    ...fields,
  };
}

describe('the store: usage records', () => {
  it('writes a run’s record once', async () => {
    const store = await dynamo.freshStore();
    expect(await store.usage.put(record('r1', 'acme', '2026-03-01T10:00:00.000Z'))).toBe(true);
    expect(await store.usage.put(record('r1', 'acme', '2026-03-01T10:00:00.000Z', { events: 99 }))).toBe(false);
    const { records } = await store.usage.list({ tenant: 'acme', from: '2026-03-01T00:00:00.000Z', to: '2026-04-01T00:00:00.000Z', limit: 10 });
    expect(records).toEqual([record('r1', 'acme', '2026-03-01T10:00:00.000Z')]);
  });

  it('lists a tenant’s records of a range oldest first, across months, page by page, and no other tenant’s', async () => {
    const store = await dynamo.freshStore();
    const mine = ['2026-01-31T23:59:59.999Z', '2026-02-01T00:00:00.000Z', '2026-02-15T12:00:00.000Z', '2026-03-01T00:00:00.000Z'].map((at, i) => record(`r${i}`, 'acme/eu', at));
    for (const r of mine) await store.usage.put(r);
    await store.usage.put(record('other', 'acme', '2026-02-10T00:00:00.000Z'));
    await store.usage.put(record('late', 'acme/eu', '2026-03-02T00:00:00.000Z'));

    const range = { tenant: 'acme/eu', from: '2026-01-31T00:00:00.000Z', to: '2026-03-02T00:00:00.000Z' };
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await store.usage.list({ ...range, limit: 3, cursor });
      seen.push(...page.records.map((r) => r.runId));
      cursor = page.cursor;
      pages += 1;
    } while (cursor !== undefined);
    expect(seen).toEqual(['r0', 'r1', 'r2', 'r3']);
    expect(pages).toBeGreaterThan(1);
    // Every tenant's, for the admin.
    const all = await store.usage.list({ from: '2026-02-01T00:00:00.000Z', to: '2026-03-01T00:00:00.000Z', limit: 100 });
    expect(all.records.map((r) => r.runId).sort()).toEqual(['other', 'r1', 'r2']);
  });

  it('refuses a cursor of another tenant’s listing, or one it never issued', async () => {
    const store = await dynamo.freshStore();
    for (let i = 0; i < 3; i++) await store.usage.put(record(`r${i}`, 'acme', `2026-05-0${i + 1}T00:00:00.000Z`));
    const range = { from: '2026-05-01T00:00:00.000Z', to: '2026-06-01T00:00:00.000Z', limit: 1 };
    const { cursor } = await store.usage.list({ ...range, tenant: 'acme' });
    expect(cursor).toBeDefined();
    await expect(store.usage.list({ ...range, tenant: 'globex', cursor })).rejects.toBeInstanceOf(RangeError);
    await expect(store.usage.list({ ...range, tenant: 'acme', cursor: 'bm90IGEgY3Vyc29y' })).rejects.toBeInstanceOf(RangeError);
  });

  it('takes a cursor shaped like its own with any field of it changed as a cursor it never issued, or as a place in the range: never a store error', async () => {
    const store = await dynamo.freshStore();
    for (let i = 0; i < 3; i++) await store.usage.put(record(`r${i}`, 'acme', `2026-05-0${i + 1}T00:00:00.000Z`));
    const range = { from: '2026-05-01T00:00:00.000Z', to: '2026-06-01T00:00:00.000Z', limit: 1, tenant: 'acme' };
    const issued = JSON.parse(Buffer.from((await store.usage.list(range)).cursor!, 'base64url').toString()) as Record<string, unknown>;
    // Found by the fuzz: a start key DynamoDB refuses ({} or another index's), and a month centuries before the range.
    const junk = [{}, { ixSort: 28 }, '0000-01', '1999-12-31T00:00:00.000Z', 7, null, [1]];
    for (const field of Object.keys(issued).filter((key) => key !== 'tenant')) {
      for (const value of junk) {
        const cursor = Buffer.from(JSON.stringify({ ...issued, [field]: value })).toString('base64url');
        const outcome = await store.usage.list({ ...range, cursor }).then(
          (page) => ({ page: page.records.every((r) => r.tenant === 'acme' && r.endedAt >= range.from && r.endedAt < range.to) }),
          (error: unknown) => ({ refused: error instanceof RangeError ? 'RangeError' : String(error) }),
        );
        expect({ field, value, outcome }).toEqual({ field, value, outcome: 'page' in outcome ? { page: true } : { refused: 'RangeError' } });
      }
    }
  });
});

describe('the store: a tenant’s budget and spend', () => {
  it('charges a period, starts the next one afresh, and ignores a charge of a period already over', async () => {
    const store = await dynamo.freshStore();
    expect(await store.tenants.get('acme')).toBeUndefined();
    expect(await store.tenants.charge('acme', { period: '2026-03', tokens: 100, cost: 1.5 })).toEqual({ period: '2026-03', tokens: 100, cost: 1.5 });
    expect(await store.tenants.charge('acme', { period: '2026-03', tokens: 50, cost: 0.25 })).toEqual({ period: '2026-03', tokens: 150, cost: 1.75 });
    await store.tenants.markBudgetCrossed('acme', '2026-03', 'r2', '2026-03-05T00:00:00.000Z');
    await store.tenants.markBudgetCrossed('acme', '2026-03', 'r3', '2026-03-06T00:00:00.000Z');
    expect((await store.tenants.get('acme'))?.spend).toEqual({ period: '2026-03', tokens: 150, cost: 1.75, crossedAt: '2026-03-05T00:00:00.000Z', crossedByRunId: 'r2' });
    expect(await store.tenants.charge('acme', { period: '2026-04', tokens: 7, cost: 0 })).toEqual({ period: '2026-04', tokens: 7, cost: 0 });
    expect(await store.tenants.charge('acme', { period: '2026-03', tokens: 1_000, cost: 0 })).toBeUndefined();
    expect((await store.tenants.get('acme'))?.spend).toEqual({ period: '2026-04', tokens: 7, cost: 0 });
  });

  it('keeps a tenant’s own budget beside its limits, and its spend as set', async () => {
    const store = await dynamo.freshStore();
    expect(await store.tenants.admit('acme', 'r1', { window: 1, places: 2 })).toBe('admitted');
    await store.tenants.putBudget('acme', { period: 'day', tokens: 1_000 }, { period: '2026-03-05', tokens: 10, cost: 0 });
    expect(await store.tenants.get('acme')).toEqual({ tenant: 'acme', budget: { period: 'day', tokens: 1_000 }, spend: { period: '2026-03-05', tokens: 10, cost: 0 } });
    await store.tenants.putBudget('acme', undefined, { period: '2026-03', tokens: 0, cost: 0 });
    expect(await store.tenants.get('acme')).toEqual({ tenant: 'acme', spend: { period: '2026-03', tokens: 0, cost: 0 } });
    // The limits' counters are untouched.
    expect(await store.tenants.admit('acme', 'r2', { window: 1, places: 2 })).toBe('admitted');
    expect(await store.tenants.admit('acme', 'r3', { window: 1, places: 2 })).toBe('places_full');
  });
});
