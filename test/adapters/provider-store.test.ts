import { describe, expect, it } from 'vitest';
import type { LinkProvider, Run } from '../../lambdas/core/model.js';
import { useStore } from '../support/stores.js';

const stores = useStore();

const provider = (providerId: string, fields: Partial<LinkProvider> = {}): LinkProvider => ({
  providerId,
  publicKey: 'k'.repeat(43),
  agents: ['a', 'b'],
  maxConcurrentRuns: 2,
  createdAt: '2026-03-01T00:00:00.000Z',
  ...fields,
});

function run(runId: string, status: Run['status']): Run {
  return {
    runId,
    threadId: 't',
    agentId: 'a',
    tenant: 'acme',
    principal: 'p',
    door: 'agui',
    status,
    arrival: 1,
    rootRunId: runId,
    input: { threadId: 't', runId, messages: [], tools: [], context: [] },
    createdAt: '2026-03-01T00:00:00.000Z',
  };
}

describe('the store: link providers', () => {
  it('creates, replaces, lists and deletes a provider, keeping the places its runs hold across a replace', async () => {
    const store = await stores.freshStore();
    expect(await store.providers.put(provider('p1'))).toBe(true);
    expect(await store.providers.takePlace('p1', 2)).toBe(true);
    expect(await store.providers.put(provider('p1', { maxConcurrentRuns: 5, agents: ['c'], createdAt: '2030-01-01T00:00:00.000Z' }))).toBe(false);
    expect(await store.providers.get('p1')).toEqual({ ...provider('p1', { maxConcurrentRuns: 5, agents: ['c'] }), places: 1 });
    await store.providers.put(provider('p2'));
    expect((await store.providers.list()).map((p) => p.providerId).sort()).toEqual(['p1', 'p2']);
    expect(await store.providers.delete('p1')).toBe(true);
    expect(await store.providers.delete('p1')).toBe(false);
    expect(await store.providers.get('p1')).toBeUndefined();
  });

  it('gives places up to the limit, across concurrent claims, never below zero, and none of a provider not registered', async () => {
    const store = await stores.freshStore();
    await store.providers.put(provider('p1'));
    const claims = await Promise.all(Array.from({ length: 6 }, () => store.providers.takePlace('p1', 3)));
    expect(claims.filter(Boolean)).toHaveLength(3);
    for (let i = 0; i < 5; i++) await store.providers.releasePlace('p1');
    expect((await store.providers.get('p1'))?.places).toBe(0);
    expect(await store.providers.takePlace('nobody', 3)).toBe(false);
    expect(await store.providers.get('nobody')).toBeUndefined();
    await store.providers.takePlace('p1', 3);
    await store.providers.resetPlaces();
    expect((await store.providers.get('p1'))?.places).toBe(0);
  });

  it('sets a running run’s link only from the rev it was read at, and never a settled run’s', async () => {
    const store = await stores.freshStore();
    await store.runs.create(run('r1', 'running'));
    const first = await store.runs.updateLink('r1', undefined, { rev: 1, offers: 0 });
    expect(first?.link).toEqual({ rev: 1, offers: 0 });
    expect(await store.runs.updateLink('r1', undefined, { rev: 1, offers: 0 })).toBeUndefined();
    // Of two writers from rev 1, one wins.
    const racing = await Promise.all([
      store.runs.updateLink('r1', 1, { rev: 2, offers: 1, providerId: 'p1' }),
      store.runs.updateLink('r1', 1, { rev: 2, offers: 1, providerId: 'p2' }),
    ]);
    expect(racing.filter(Boolean)).toHaveLength(1);
    expect((await store.runs.updateLink('r1', 2, { rev: 3, offers: 1 }))?.link).toEqual({ rev: 3, offers: 1 });
    await store.runs.create(run('r2', 'completed'));
    expect(await store.runs.updateLink('r2', undefined, { rev: 1, offers: 0 })).toBeUndefined();
    expect(await store.runs.updateLink('missing', undefined, { rev: 1, offers: 0 })).toBeUndefined();
  });
});
