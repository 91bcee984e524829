import { describe, expect, it } from 'vitest';
import { harness } from '../support/core-harness.js';
import { useDynalite } from '../support/dynalite.js';
import type { Run } from '../../lambdas/core/model.js';

const dynamo = useDynalite();

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
    const store = await dynamo.freshStore();
    const h = await harness(store);
    await store.createThread({ threadId: 'thread-1', agentId: 'scripted', tenant: 'anonymous', createdAt: '2026-01-01T00:00:00.000Z', unsettled: 5, arrivals: 3 });
    await store.createRun(storedRun('r1', 'running', 1));
    await store.appendEvents([{ runId: 'r1', seq: 1, event: { type: 'RUN_STARTED', threadId: 'thread-1', runId: 'r1' } }]);
    await store.createRun(storedRun('r3', 'queued', 3));
    await store.createRun(storedRun('r2', 'queued', 2));

    const recovery = await h.gateway.recover();
    expect(recovery).toMatchObject({ orphaned: 1, requeued: 2 });
    await h.settled();

    expect(await store.getRun('r1')).toMatchObject({ status: 'failed', reason: 'orphaned_by_restart', lastSeq: 2 });
    expect((await store.readEvents('r1', 0)).map((e) => e.event.type)).toEqual(['RUN_STARTED', 'RUN_ERROR']);
    expect(h.provider.calls.map((c) => c.runId)).toEqual(['r2', 'r3']);
    expect((await store.getThread({ tenant: 'anonymous', threadId: 'thread-1' }))?.unsettled).toBe(0);
  });

  it('fails a run found running at dispatch as dispatch_lost and never runs it twice', async () => {
    const store = await dynamo.freshStore();
    const h = await harness(store);
    await store.createRun(storedRun('r1', 'running', 1));
    expect(await h.gateway.dispatchRun('r1')).toBe('dispatch_lost');
    expect(await store.getRun('r1')).toMatchObject({ status: 'failed', reason: 'dispatch_lost' });
    expect(await h.gateway.dispatchRun('r1')).toBe('skipped');
    expect(h.provider.calls).toHaveLength(0);
  });
});
