import { describe, expect, it } from 'vitest';
import { harness } from '../support/core-harness.js';
import { useStore } from '../support/stores.js';
import type { Run } from '../../lambdas/core/model.js';

const stores = useStore();

function storedRun(runId: string, status: Run['status'], arrival: number): Run {
  return {
    runId,
    threadId: 'thread-1',
    agentId: 'scripted',
    tenant: 'anonymous',
    principal: 'anonymous',
    door: 'agui',
    status,
    arrival,
    rootRunId: runId,
    input: { threadId: 'thread-1', runId, messages: [{ id: `m-${runId}`, role: 'user', content: runId }], tools: [], context: [] },
    createdAt: '2026-01-01T00:00:00.000Z',
  };
}

describe('recovery', () => {
  it('fails runs left running as orphaned_by_restart and runs the queued ones in arrival order', async () => {
    const store = await stores.freshStore();
    const h = await harness(store);
    await store.threads.create({ threadId: 'thread-1', agentId: 'scripted', tenant: 'anonymous', createdAt: '2026-01-01T00:00:00.000Z', unsettled: 5, arrivals: 3 }, 'r1');
    await store.runs.create(storedRun('r1', 'running', 1));
    await store.events.append([{ runId: 'r1', seq: 1, event: { type: 'RUN_STARTED', threadId: 'thread-1', runId: 'r1' } }]);
    await store.runs.create(storedRun('r3', 'queued', 3));
    await store.runs.create(storedRun('r2', 'queued', 2));

    const recovery = await h.gateway.recover();
    expect(recovery).toMatchObject({ orphaned: 1, requeued: 2 });
    await h.settled();

    expect(await store.runs.get('r1')).toMatchObject({ status: 'failed', reason: 'orphaned_by_restart', lastSeq: 2 });
    expect((await store.events.read('r1', 0)).map((e) => e.event.type)).toEqual(['RUN_STARTED', 'RUN_ERROR']);
    expect(h.provider.calls.map((c) => c.runId)).toEqual(['r2', 'r3']);
    expect((await store.threads.get({ tenant: 'anonymous', threadId: 'thread-1' }))?.unsettled).toBe(0);
  });

  it('fails a run found running at dispatch as dispatch_lost and never runs it twice', async () => {
    const store = await stores.freshStore();
    const h = await harness(store);
    await store.runs.create(storedRun('r1', 'running', 1));
    expect(await h.gateway.dispatchRun('r1')).toBe('dispatch_lost');
    expect(await store.runs.get('r1')).toMatchObject({ status: 'failed', reason: 'dispatch_lost' });
    expect(await h.gateway.dispatchRun('r1')).toBe('skipped');
    expect(h.provider.calls).toHaveLength(0);
  });

  it('repairs a run from its record alone: a queued run gets its message, a settle that stopped part-way is completed, and a repeat does nothing twice', async () => {
    const store = await stores.freshStore();
    const h = await harness(store);
    const thread = { tenant: 'anonymous', threadId: 'thread-1' };
    await store.threads.create({ ...thread, agentId: 'scripted', createdAt: '2026-01-01T00:00:00.000Z', unsettled: 1, arrivals: 1 }, 'r1');
    await store.threads.reserveArrival(thread, 'r2', undefined);
    // r1's end was written and nothing after it (its place, its closing events); r2 was recorded and never enqueued.
    await store.runs.create({ ...storedRun('r1', 'completed', 1), lastSeq: 1, closingEvents: [{ type: 'RUN_FINISHED', threadId: 'thread-1', runId: 'r1' }] });
    await store.runs.create(storedRun('r2', 'queued', 2));

    expect(await h.gateway.repairRun('r1')).toBe('settle_completed');
    expect((await store.threads.get(thread))?.unsettled).toBe(1);
    expect((await store.events.read('r1', 0)).map((e) => e.event.type)).toEqual(['RUN_FINISHED']);
    expect(await store.runs.get('r1')).not.toHaveProperty('closingEvents');
    expect(await h.gateway.repairRun('r1')).toBe('nothing');

    expect(await h.gateway.repairRun('r2')).toBe('enqueued');
    await h.settled();
    expect(h.provider.calls.map((c) => c.runId)).toEqual(['r2']);
    expect(await h.gateway.repairRun('r2')).toBe('nothing');
    expect((await store.threads.get(thread))?.unsettled).toBe(0);
    expect(await h.gateway.repairRun('gone')).toBe('nothing');
  });

  it('opens again at start the asks closed for an answering run that was never recorded, and leaves those of recorded answers closed', async () => {
    const store = await stores.freshStore();
    const h = await harness(store);
    const thread = { tenant: 'anonymous', threadId: 'thread-1' };
    await store.threads.create({ ...thread, agentId: 'scripted', createdAt: '2026-01-01T00:00:00.000Z', unsettled: 0, arrivals: 2, waitingRunId: 'r2' }, 'r1');
    await store.threads.setPlaces(thread, []);
    const ask = (closedByRunId: string) => ({ id: 'i1', kind: 'interrupt' as const, state: 'answered' as const, closedByRunId });
    await store.runs.create({ ...storedRun('r1', 'completed', 1), lastSeq: 1, asks: { i1: ask('r1-answer') } });
    await store.runs.create({ ...storedRun('r1-answer', 'completed', 2), parentRunId: 'r1', lastSeq: 1 });
    await store.runs.create({ ...storedRun('r2', 'completed', 3), lastSeq: 1, asks: { i1: ask('never-recorded') } });

    await h.gateway.recover();

    expect((await store.runs.get('r1'))?.asks?.i1).toMatchObject({ state: 'answered', closedByRunId: 'r1-answer' });
    expect((await store.runs.get('r2'))?.asks?.i1).toMatchObject({ state: 'open' });
    expect((await store.runs.get('r2'))?.asks?.i1).not.toHaveProperty('closedByRunId');
  });

  it('fails a run whose message was dead-lettered dispatch_failed, queued or left running, gives back its place once, and never runs it', async () => {
    const store = await stores.freshStore();
    const h = await harness(store);
    await store.threads.create({ threadId: 'thread-1', agentId: 'scripted', tenant: 'anonymous', createdAt: '2026-01-01T00:00:00.000Z', unsettled: 1, arrivals: 1 }, 'r1');
    await store.threads.reserveArrival({ tenant: 'anonymous', threadId: 'thread-1' }, 'r2', undefined);
    await store.runs.create(storedRun('r1', 'running', 1));
    await store.runs.create(storedRun('r2', 'queued', 2));
    expect(await h.gateway.failUndelivered('r2')).toBe('dispatch_failed');
    expect(await h.gateway.failUndelivered('r1')).toBe('dispatch_failed');
    for (const runId of ['r1', 'r2']) {
      expect(await store.runs.get(runId)).toMatchObject({ status: 'failed', reason: 'dispatch_failed', lastSeq: 1 });
      expect((await store.events.read(runId, 0)).map((e) => e.event)).toEqual([{ type: 'RUN_ERROR', code: 'dispatch_failed', message: expect.any(String) }]);
    }
    // A dead letter delivered twice (SQS delivers at least once) changes nothing.
    expect(await h.gateway.failUndelivered('r2')).toBe('settled');
    expect(await h.gateway.failUndelivered('gone')).toBe('missing');
    expect((await store.threads.get({ tenant: 'anonymous', threadId: 'thread-1' }))?.unsettled).toBe(0);
    expect(await h.gateway.dispatchRun('r2')).toBe('skipped');
    expect(h.provider.calls).toHaveLength(0);
  });
});
