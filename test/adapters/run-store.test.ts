import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DynamoRunStore } from '../../lambdas/adapters/aws/dynamodb/run-store.js';
import { ensureTables, localDynamoClient, startDynalite } from '../../lambdas/adapters/local/dynalite.js';
import { StoreUnavailable } from '../../lambdas/core/errors.js';
import type { Agent, Ask, MessageClaim, PushConfig, Run, RunStatus, StoredEvent, Thread } from '../../lambdas/core/model.js';
import { useDynalite } from '../support/dynalite.js';

const dynamo = useDynalite();

let ids = 0;
function newId(prefix: string): string {
  ids += 1;
  return `${prefix}-${ids}`;
}

const GHOST = { tenant: 'acme', threadId: 'ghost' };

function aThread(overrides: Partial<Thread> = {}): Thread {
  return {
    threadId: newId('thread'),
    agentId: 'demo',
    tenant: 'acme',
    createdAt: '2025-01-01T00:00:00.000Z',
    unsettled: 0,
    arrivals: 0,
    ...overrides,
  };
}

function aRun(overrides: Partial<Run> = {}): Run {
  const runId = overrides.runId ?? newId('run');
  const threadId = overrides.threadId ?? 'thread-a';
  return {
    runId,
    threadId,
    agentId: 'demo',
    tenant: 'acme',
    principal: 'alice',
    door: 'agui',
    status: 'queued',
    arrival: 1,
    rootRunId: runId,
    input: {
      threadId,
      runId,
      messages: [{ id: 'm1', role: 'user', content: 'hello' }],
      tools: [],
      context: [],
      state: {},
      forwardedProps: {},
    },
    createdAt: '2025-01-01T00:00:00.000Z',
    ...overrides,
  };
}

function openAsk(id: string): Ask {
  return { id, kind: 'interrupt', state: 'open', interrupt: { id, reason: 'approval' } };
}

function events(runId: string, count: number, from = 1): StoredEvent[] {
  return Array.from({ length: count }, (_, i) => ({
    runId,
    seq: from + i,
    event: { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: `chunk ${from + i}` },
  }));
}

function seqs(stored: StoredEvent[]): number[] {
  return stored.map((e) => e.seq);
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

describe('DynamoRunStore: threads', () => {
  it('creates a thread once and reads it back as it was written', async () => {
    const store = await dynamo.freshStore();
    const thread = aThread({ waitingRunId: 'run-0' });

    expect(await store.createThread(thread)).toBe(true);
    expect(await store.createThread({ ...thread, agentId: 'other' })).toBe(false);

    expect(await store.getThread(thread)).toEqual(thread);
  });

  it('reads back nothing for a thread that was never created', async () => {
    const store = await dynamo.freshStore();
    expect(await store.getThread({ tenant: 'acme', threadId: 'nobody' })).toBeUndefined();
  });

  it('reserves exactly eight of a hundred concurrent arrivals against a limit of eight', async () => {
    const store = await dynamo.freshStore();
    const thread = aThread();
    await store.createThread(thread);

    const results = await Promise.all(Array.from({ length: 100 }, () => store.reserveArrival(thread, 8)));

    const reserved = results.filter((arrival): arrival is number => arrival !== undefined);
    expect(reserved.sort((a, b) => a - b)).toEqual(range(1, 8));
    expect(await store.getThread(thread)).toMatchObject({ unsettled: 8, arrivals: 8 });
  });

  it('always gives an arrival number and a place when no limit applies', async () => {
    const store = await dynamo.freshStore();
    const thread = aThread({ unsettled: 3 });
    await store.createThread(thread);

    const results = await Promise.all(Array.from({ length: 30 }, () => store.reserveArrival(thread, undefined)));

    expect([...results].sort((a, b) => a! - b!)).toEqual(range(1, 30));
    expect(await store.getThread(thread)).toMatchObject({ unsettled: 33, arrivals: 30 });
  });

  it('refuses an arrival when the thread is full and writes nothing', async () => {
    const store = await dynamo.freshStore();
    const thread = aThread({ unsettled: 2, arrivals: 5 });
    await store.createThread(thread);

    expect(await store.reserveArrival(thread, 2)).toBeUndefined();
    expect(await store.getThread(thread)).toEqual(thread);
  });

  it('takes no arrival for a thread that does not exist, and does not create it', async () => {
    const store = await dynamo.freshStore();

    expect(await store.reserveArrival(GHOST, 8)).toBeUndefined();
    expect(await store.reserveArrival(GHOST, undefined)).toBeUndefined();
    expect(await store.getThread(GHOST)).toBeUndefined();
  });

  it('gives back places but never goes below zero', async () => {
    const store = await dynamo.freshStore();
    const thread = aThread();
    await store.createThread(thread);
    await store.reserveArrival(thread, 2);
    await store.reserveArrival(thread, 2);
    expect(await store.reserveArrival(thread, 2)).toBeUndefined();

    await Promise.all(Array.from({ length: 6 }, () => store.releasePlace(thread)));

    expect(await store.getThread(thread)).toMatchObject({ unsettled: 0 });
    expect(await store.reserveArrival(thread, 2)).toBe(3);
  });

  it('releases nothing for a thread that does not exist, and does not create it', async () => {
    const store = await dynamo.freshStore();

    await store.releasePlace(GHOST);

    expect(await store.getThread(GHOST)).toBeUndefined();
  });

  it('sets the places held and the waiting run of a thread', async () => {
    const store = await dynamo.freshStore();
    const thread = aThread({ unsettled: 5 });
    await store.createThread(thread);

    await store.setUnsettled(thread, 2);
    await store.setWaitingRun(thread, 'run-9');

    expect(await store.getThread(thread)).toEqual({ ...thread, unsettled: 2, waitingRunId: 'run-9' });
  });

  it('does not create a thread by setting its places or waiting run', async () => {
    const store = await dynamo.freshStore();

    await store.setUnsettled(GHOST, 2);
    await store.setWaitingRun(GHOST, 'run-9');

    expect(await store.getThread(GHOST)).toBeUndefined();
  });
});

describe('DynamoRunStore: threads of tenants', () => {
  it("keeps two tenants' threads of the same id apart: items, places, arrivals and runs", async () => {
    const store = await dynamo.freshStore();
    const acme = aThread({ threadId: 'shared', tenant: 'acme' });
    const globex = aThread({ threadId: 'shared', tenant: 'globex', agentId: 'other' });

    expect(await store.createThread(acme)).toBe(true);
    expect(await store.createThread(globex)).toBe(true);
    expect(await store.reserveArrival(acme, 1)).toBe(1);
    expect(await store.reserveArrival(globex, 1)).toBe(1);
    await store.createRun(aRun({ threadId: 'shared', tenant: 'acme', runId: 'run-acme' }));
    await store.createRun(aRun({ threadId: 'shared', tenant: 'globex', runId: 'run-globex' }));

    expect(await store.getThread({ tenant: 'globex', threadId: 'shared' })).toEqual({ ...globex, unsettled: 1, arrivals: 1 });
    expect((await store.listThreadRuns(acme)).map((run) => run.runId)).toEqual(['run-acme']);
    expect((await store.listThreadRuns(globex)).map((run) => run.runId)).toEqual(['run-globex']);
    expect(await store.getThread({ tenant: 'initech', threadId: 'shared' })).toBeUndefined();
  });

  it('keeps tenants apart whose names share a prefix or hold separators', async () => {
    const store = await dynamo.freshStore();
    await store.createThread(aThread({ tenant: 'a/b', threadId: 'c' }));

    expect(await store.getThread({ tenant: 'a', threadId: 'b/c' })).toBeUndefined();
    expect(await store.createThread(aThread({ tenant: 'a', threadId: 'b/c' }))).toBe(true);
  });
});

describe('DynamoRunStore: tenant admission', () => {
  const minute = 29_000_000;

  it('admits exactly the rate of a window of fifty concurrent runs, and writes nothing for the others', async () => {
    const store = await dynamo.freshStore();

    const results = await Promise.all(Array.from({ length: 50 }, () => store.admitTenantRun('acme', { window: minute, runsPerWindow: 7 })));

    expect(results.filter((r) => r === 'admitted')).toHaveLength(7);
    expect(results.filter((r) => r === 'rate_limited')).toHaveLength(43);
    expect(await store.admitTenantRun('globex', { window: minute, runsPerWindow: 7 })).toBe('admitted');
  });

  it('starts the count again in a later window, and counts a run in the later window a faster clock opened', async () => {
    const store = await dynamo.freshStore();
    for (let i = 0; i < 2; i++) await store.admitTenantRun('acme', { window: minute, runsPerWindow: 2 });
    expect(await store.admitTenantRun('acme', { window: minute, runsPerWindow: 2 })).toBe('rate_limited');

    expect(await store.admitTenantRun('acme', { window: minute + 1, runsPerWindow: 2 })).toBe('admitted');
    expect(await store.admitTenantRun('acme', { window: minute, runsPerWindow: 2 })).toBe('admitted');
    expect(await store.admitTenantRun('acme', { window: minute, runsPerWindow: 2 })).toBe('rate_limited');
  });

  it('admits exactly the places of fifty concurrent runs, gives places back, and never goes below zero', async () => {
    const store = await dynamo.freshStore();

    const results = await Promise.all(Array.from({ length: 50 }, () => store.admitTenantRun('acme', { window: minute, places: 4 })));
    expect(results.filter((r) => r === 'admitted')).toHaveLength(4);
    expect(results.filter((r) => r === 'places_full')).toHaveLength(46);

    await Promise.all(Array.from({ length: 9 }, () => store.releaseTenantPlace('acme')));
    const again = await Promise.all(Array.from({ length: 6 }, () => store.admitTenantRun('acme', { window: minute, places: 4 })));
    expect(again.filter((r) => r === 'admitted')).toHaveLength(4);
  });

  it('says places_full before rate_limited when both hold, and takes neither count when either does', async () => {
    const store = await dynamo.freshStore();
    const limits = { window: minute, runsPerWindow: 3, places: 1 };
    expect(await store.admitTenantRun('acme', limits)).toBe('admitted');
    expect(await store.admitTenantRun('acme', limits)).toBe('places_full');
    await store.releaseTenantPlace('acme');
    expect(await store.admitTenantRun('acme', limits)).toBe('admitted');
    await store.releaseTenantPlace('acme');
    // Two runs counted, not three: the refused one took nothing from the window.
    expect(await store.admitTenantRun('acme', limits)).toBe('admitted');
    await store.releaseTenantPlace('acme');
    expect(await store.admitTenantRun('acme', limits)).toBe('rate_limited');
  });

  it('releases nothing for a tenant it never admitted, and does not create it', async () => {
    const store = await dynamo.freshStore();
    await store.releaseTenantPlace('ghost');
    expect(await store.admitTenantRun('ghost', { window: minute, places: 1 })).toBe('admitted');
    expect(await store.admitTenantRun('ghost', { window: minute, places: 1 })).toBe('places_full');
  });

  it('sets every tenant’s places on recovery, those it does not name to zero', async () => {
    const store = await dynamo.freshStore();
    for (const tenant of ['acme', 'globex']) {
      for (let i = 0; i < 3; i++) await store.admitTenantRun(tenant, { window: minute, places: 3 });
    }

    await store.setTenantPlaces(new Map([['acme', 2]]));

    expect(await store.admitTenantRun('acme', { window: minute, places: 3 })).toBe('admitted');
    expect(await store.admitTenantRun('acme', { window: minute, places: 3 })).toBe('places_full');
    const globex = await Promise.all(Array.from({ length: 4 }, () => store.admitTenantRun('globex', { window: minute, places: 3 })));
    expect(globex.filter((r) => r === 'admitted')).toHaveLength(3);
  });

  it('keeps tenant items out of the run, agent and thread listings', async () => {
    const store = await dynamo.freshStore();
    await store.admitTenantRun('acme', { window: minute, runsPerWindow: 5, places: 5 });
    expect(await store.listRunsByStatus('queued')).toEqual([]);
    expect(await store.listAgents()).toEqual([]);
    expect(await store.listRootRuns('acme', { limit: 10 })).toEqual({ runs: [] });
  });
});

describe('DynamoRunStore: runs', () => {
  it('creates a run once: a second run with the same id is refused and changes nothing', async () => {
    const store = await dynamo.freshStore();
    const run = aRun();

    expect(await store.createRun(run)).toBe(true);
    expect(await store.createRun({ ...run, status: 'running', principal: 'mallory' })).toBe(false);

    expect(await store.getRun(run.runId)).toEqual(run);
  });

  it('reads back nothing for a run that was never created', async () => {
    const store = await dynamo.freshStore();
    expect(await store.getRun('nobody')).toBeUndefined();
  });

  it("keeps a caller's input exactly: empty strings, nulls, floats, nesting and numbers past 2^53", async () => {
    const store = await dynamo.freshStore();
    const run = aRun({
      input: {
        threadId: 'thread-a',
        runId: 'r',
        messages: [{ id: 'm1', role: 'user', content: '' }],
        tools: [{ name: 't', description: '', parameters: { type: 'object', properties: { n: { type: 'number' } } } }],
        context: [{ description: 'tz', value: 'Europe/Paris' }],
        state: { ratio: 0.1, none: null, big: 2 ** 60, negative: -3, list: [1, 'two', [3], { four: 4 }], empty: {} },
        forwardedProps: { deep: { er: { still: ['x'] } } },
      },
    });

    await store.createRun(run);

    expect(await store.getRun(run.runId)).toEqual(run);
  });

  it('moves a run only from the listed statuses', async () => {
    const store = await dynamo.freshStore();
    const run = aRun();
    await store.createRun(run);

    expect(await store.transitionRun(run.runId, ['running', 'cancelling'], { status: 'completed' })).toBeUndefined();
    expect(await store.getRun(run.runId)).toEqual(run);

    const moved = await store.transitionRun(run.runId, ['queued', 'running'], {
      status: 'running',
      startedAt: '2025-01-01T00:00:01.000Z',
      reason: undefined,
    });

    const expected: Run = { ...run, status: 'running', startedAt: '2025-01-01T00:00:01.000Z' };
    expect(moved).toEqual(expected);
    expect(await store.getRun(run.runId)).toEqual(expected);
  });

  it('writes every patched field, asks included', async () => {
    const store = await dynamo.freshStore();
    const run = aRun({ status: 'running' });
    await store.createRun(run);

    const moved = await store.transitionRun(run.runId, ['running'], {
      status: 'completed',
      endedAt: '2025-01-01T00:00:02.000Z',
      outcome: 'interrupt',
      lastSeq: 12,
      asks: { a: openAsk('a') },
    });

    expect(moved).toEqual({ ...run, status: 'completed', endedAt: '2025-01-01T00:00:02.000Z', outcome: 'interrupt', lastSeq: 12, asks: { a: openAsk('a') } });
  });

  it('does not create a run by moving one that does not exist', async () => {
    const store = await dynamo.freshStore();

    expect(await store.transitionRun('ghost', ['queued'], { status: 'running' })).toBeUndefined();
    expect(await store.getRun('ghost')).toBeUndefined();
  });

  it('moves nothing when no status is allowed', async () => {
    const store = await dynamo.freshStore();
    const run = aRun();
    await store.createRun(run);

    expect(await store.transitionRun(run.runId, [], { status: 'running' })).toBeUndefined();
    expect(await store.getRun(run.runId)).toEqual(run);
  });

  it('refuses to patch the fields that place a run in its indexes', async () => {
    const store = await dynamo.freshStore();
    const run = aRun();
    await store.createRun(run);

    await expect(store.transitionRun(run.runId, ['queued'], { status: 'running', threadId: 'elsewhere' })).rejects.toThrow(TypeError);
    expect(await store.getRun(run.runId)).toEqual(run);
  });

  it('lets exactly one of twenty concurrent transitions win', async () => {
    const store = await dynamo.freshStore();
    const run = aRun();
    await store.createRun(run);

    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => store.transitionRun(run.runId, ['queued'], { status: 'running', startedAt: `attempt ${i}` })),
    );

    const winners = results.filter((moved): moved is Run => moved !== undefined);
    expect(winners).toHaveLength(1);
    expect(await store.getRun(run.runId)).toEqual(winners[0]);
  });

  it('lists a thread\'s runs in arrival order, and only that thread\'s', async () => {
    const store = await dynamo.freshStore();
    for (const arrival of [3, 1, 4, 2]) await store.createRun(aRun({ threadId: 'thread-a', arrival }));
    await store.createRun(aRun({ threadId: 'thread-b', arrival: 1 }));

    const runs = await store.listThreadRuns({ tenant: 'acme', threadId: 'thread-a' });

    expect(runs.map((run) => [run.threadId, run.arrival])).toEqual([
      ['thread-a', 1],
      ['thread-a', 2],
      ['thread-a', 3],
      ['thread-a', 4],
    ]);
    expect(await store.listThreadRuns({ tenant: 'acme', threadId: 'thread-c' })).toEqual([]);
  });

  it('returns whole runs from the thread index', async () => {
    const store = await dynamo.freshStore();
    const run = aRun({ threadId: 'thread-a' });
    await store.createRun(run);

    expect(await store.listThreadRuns({ tenant: 'acme', threadId: 'thread-a' })).toEqual([run]);
  });

  it("lists a tenant's root runs newest first, page by page, answers and other tenants left out", async () => {
    const store = await dynamo.freshStore();
    const roots: Run[] = [];
    for (let i = 0; i < 7; i++) {
      const root = aRun({ createdAt: `2025-01-0${i + 1}T00:00:00.000Z` });
      roots.push(root);
      await store.createRun(root);
      await store.createRun(aRun({ rootRunId: root.runId, parentRunId: root.runId, createdAt: `2025-01-0${i + 1}T00:00:01.000Z` }));
    }
    await store.createRun(aRun({ tenant: 'globex', createdAt: '2025-02-01T00:00:00.000Z' }));

    const first = await store.listRootRuns('acme', { limit: 3 });
    const second = await store.listRootRuns('acme', { limit: 3, cursor: first.cursor });
    const third = await store.listRootRuns('acme', { limit: 3, cursor: second.cursor });

    expect([first.runs.length, second.runs.length, third.runs.length]).toEqual([3, 3, 1]);
    expect(first.cursor).toBeDefined();
    expect(second.cursor).toBeDefined();
    expect(third.cursor).toBeUndefined();
    expect([...first.runs, ...second.runs, ...third.runs]).toEqual([...roots].reverse());
  });

  it('ends with no cursor when the last page is exactly full', async () => {
    const store = await dynamo.freshStore();
    for (let i = 0; i < 4; i++) await store.createRun(aRun({ createdAt: `2025-01-0${i + 1}T00:00:00.000Z` }));

    const first = await store.listRootRuns('acme', { limit: 2 });
    const second = await store.listRootRuns('acme', { limit: 2, cursor: first.cursor });

    expect(first.cursor).toBeDefined();
    expect(second.runs).toHaveLength(2);
    expect(second.cursor).toBeUndefined();
  });

  it('pages root runs created at the same instant without losing or repeating one', async () => {
    const store = await dynamo.freshStore();
    const created: string[] = [];
    for (let i = 0; i < 5; i++) {
      const run = aRun();
      created.push(run.runId);
      await store.createRun(run);
    }

    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await store.listRootRuns('acme', { limit: 2, cursor });
      seen.push(...page.runs.map((run) => run.runId));
      cursor = page.cursor;
    } while (cursor);

    expect(seen.sort()).toEqual(created.sort());
  });

  it("refuses a cursor it did not issue, or one issued for another tenant", async () => {
    const store = await dynamo.freshStore();
    for (let i = 0; i < 3; i++) await store.createRun(aRun({ createdAt: `2025-01-0${i + 1}T00:00:00.000Z` }));
    const { cursor } = await store.listRootRuns('acme', { limit: 1 });
    expect(cursor).toBeDefined();

    await expect(store.listRootRuns('globex', { limit: 1, cursor })).rejects.toThrow(RangeError);
    await expect(store.listRootRuns('acme', { limit: 1, cursor: 'not-a-cursor' })).rejects.toThrow(RangeError);
    await expect(store.listRootRuns('acme', { limit: 1, cursor: Buffer.from('{"pk":1}').toString('base64url') })).rejects.toThrow(RangeError);
  });

  it('lists every run in a status, and nothing that is not a run', async () => {
    const store = await dynamo.freshStore();
    const statuses: RunStatus[] = ['queued', 'running', 'queued', 'completed', 'queued', 'failed'];
    const runs = statuses.map((status) => aRun({ status }));
    for (const run of runs) await store.createRun(run);
    await store.createThread(aThread());
    await store.putAgent(anAgent('demo'));

    const queued = await store.listRunsByStatus('queued');

    expect(queued.map((run) => run.runId).sort()).toEqual(runs.filter((run) => run.status === 'queued').map((run) => run.runId).sort());
    expect(queued[0]).toEqual(runs.find((run) => run.runId === queued[0].runId));
    expect(await store.listRunsByStatus('cancelling')).toEqual([]);
  });
});

describe('DynamoRunStore: asks', () => {
  async function waitingRun(store: DynamoRunStore, askIds: string[]): Promise<Run> {
    const run = aRun({ status: 'completed', outcome: 'interrupt', asks: Object.fromEntries(askIds.map((id) => [id, openAsk(id)])) });
    await store.createRun(run);
    return run;
  }

  it('closes the named asks in one write and leaves the others open', async () => {
    const store = await dynamo.freshStore();
    const run = await waitingRun(store, ['a', 'b', 'c']);

    const written = await store.closeAsks(run.runId, { a: { state: 'answered', closedByRunId: 'run-2' }, b: { state: 'expired' } });

    expect(written?.asks).toEqual({
      a: { ...openAsk('a'), state: 'answered', closedByRunId: 'run-2' },
      b: { ...openAsk('b'), state: 'expired' },
      c: openAsk('c'),
    });
    expect(await store.getRun(run.runId)).toEqual(written);
  });

  it('closes nothing when any named ask is no longer open', async () => {
    const store = await dynamo.freshStore();
    const run = await waitingRun(store, ['a', 'b']);
    const afterFirst = await store.closeAsks(run.runId, { a: { state: 'expired' } });

    expect(await store.closeAsks(run.runId, { a: { state: 'answered', closedByRunId: 'run-2' }, b: { state: 'answered', closedByRunId: 'run-2' } })).toBeUndefined();
    expect(await store.getRun(run.runId)).toEqual(afterFirst);
    expect(afterFirst?.asks?.b.state).toBe('open');
  });

  it('closes nothing for an ask the run does not have, or a run that does not exist', async () => {
    const store = await dynamo.freshStore();
    const run = await waitingRun(store, ['a']);

    expect(await store.closeAsks(run.runId, { a: { state: 'answered' }, zz: { state: 'answered' } })).toBeUndefined();
    expect(await store.closeAsks('ghost', { a: { state: 'answered' } })).toBeUndefined();
    expect(await store.getRun(run.runId)).toEqual(run);
    expect(await store.getRun('ghost')).toBeUndefined();
  });

  it('takes ask ids that are not safe attribute names', async () => {
    const store = await dynamo.freshStore();
    const run = await waitingRun(store, ['call.1 #x', 'status']);

    const written = await store.closeAsks(run.runId, { 'call.1 #x': { state: 'cancelled' }, status: { state: 'cancelled' } });

    expect(written?.asks?.['call.1 #x'].state).toBe('cancelled');
    expect(written?.asks?.status.state).toBe('cancelled');
    expect(written?.status).toBe('completed');
  });

  it('lets exactly one of fifty concurrent answers close the asks, and the others change nothing', async () => {
    const store = await dynamo.freshStore();
    const run = await waitingRun(store, ['a', 'b']);

    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        store.closeAsks(run.runId, { a: { state: 'answered', closedByRunId: `answer-${i}` }, b: { state: 'answered', closedByRunId: `answer-${i}` } }),
      ),
    );

    const winners = results.filter((written): written is Run => written !== undefined);
    expect(winners).toHaveLength(1);
    const stored = await store.getRun(run.runId);
    expect(stored).toEqual(winners[0]);
    expect(stored?.asks?.a.closedByRunId).toBe(stored?.asks?.b.closedByRunId);
  });
});

describe('DynamoRunStore: run events', () => {
  it('appends sixty events and reads them back in order, exactly as given', async () => {
    const store = await dynamo.freshStore();
    const appended = [...events('run-1', 59), { runId: 'run-1', seq: 60, event: { type: 'SOMETHING_NEW', payload: { nested: [1, null, 'é'] } } }];

    await store.appendEvents(appended);

    expect(await store.readEvents('run-1', 0)).toEqual(appended);
  });

  it('reads only the events after the cursor, and at most the limit', async () => {
    const store = await dynamo.freshStore();
    await store.appendEvents(events('run-1', 60));

    expect(seqs(await store.readEvents('run-1', 42))).toEqual(range(43, 60));
    expect(seqs(await store.readEvents('run-1', 10, 5))).toEqual(range(11, 15));
    expect(seqs(await store.readEvents('run-1', 55, 20))).toEqual(range(56, 60));
    expect(await store.readEvents('run-1', 60)).toEqual([]);
  });

  it("keeps each run's events apart", async () => {
    const store = await dynamo.freshStore();
    await store.appendEvents([...events('run-1', 3), ...events('run-2', 2)]);

    const read = await store.readEvents('run-2', 0);
    expect(read.map(({ json: _json, ...stored }) => stored)).toEqual(events('run-2', 2));
    // Each event comes with the JSON it was stored as, so framing need not serialise it again.
    expect(read.map((stored) => stored.json)).toEqual(events('run-2', 2).map((stored) => JSON.stringify(stored.event)));
    expect(await store.readEvents('run-3', 0)).toEqual([]);
  });

  it('follows pages until the limit when the events outgrow one response', async () => {
    const store = await dynamo.freshStore();
    // ~30 KB each: 60 of them pass DynamoDB's 1 MB page, so the read needs a second page.
    const big = events('run-1', 60).map((e) => ({ ...e, event: { ...e.event, delta: 'x'.repeat(30_000) } }));
    await store.appendEvents(big);

    expect(seqs(await store.readEvents('run-1', 0))).toEqual(range(1, 60));
    expect(seqs(await store.readEvents('run-1', 0, 50))).toEqual(range(1, 50));
  });

  it('reports the last seq of a run, and 0 for a run with none', async () => {
    const store = await dynamo.freshStore();
    await store.appendEvents(events('run-1', 27));
    await store.appendEvents(events('run-1', 3, 28));

    expect(await store.lastSeq('run-1')).toBe(30);
    expect(await store.lastSeq('run-2')).toBe(0);
  });

  it('appends nothing for no events', async () => {
    const store = await dynamo.freshStore();
    await store.appendEvents([]);
    expect(store.usage.writeRequests).toBe(0);
  });
});

describe('DynamoRunStore: appending events when DynamoDB pushes back', () => {
  const storeWith = dynamo.storeWithWriteFaults;

  it('writes the events DynamoDB left unprocessed on a later attempt', async () => {
    const store = await storeWith((call) => (call <= 3 ? 'leave-half' : 'pass'));

    await store.appendEvents(events('run-1', 20));

    expect(seqs(await store.readEvents('run-1', 0))).toEqual(range(1, 20));
    expect(store.usage.writeRequests).toBe(4);
  });

  it('retries a batch DynamoDB throttles, with backoff, and stores every event', async () => {
    const store = await storeWith((call) => (call <= 3 ? 'throttle' : 'pass'));

    await store.appendEvents(events('run-1', 30));

    expect(seqs(await store.readEvents('run-1', 0))).toEqual(range(1, 30));
  });

  it('gives up with store_unavailable when events stay unprocessed', async () => {
    const store = await storeWith(() => 'leave-all');

    const appending = store.appendEvents(events('run-1', 3));

    await expect(appending).rejects.toBeInstanceOf(StoreUnavailable);
    await expect(appending).rejects.toMatchObject({ code: 'store_unavailable' });
    expect(store.usage.writeRequests).toBeGreaterThan(1);
  });

  it('reports throttling that outlasted the SDK retries as store_unavailable', async () => {
    const store = await storeWith(() => 'throttle');

    const appending = store.appendEvents(events('run-1', 30));

    await expect(appending).rejects.toBeInstanceOf(StoreUnavailable);
    await expect(appending).rejects.toMatchObject({ cause: { name: 'ProvisionedThroughputExceededException' } });
  });

  it('lets a malformed write fail as itself, not as an outage', async () => {
    const store = await dynamo.freshStore();

    const appending = store.appendEvents([...events('run-1', 2), ...events('run-1', 1)]);

    await expect(appending).rejects.toMatchObject({ name: 'ValidationException' });
    await expect(appending).rejects.not.toBeInstanceOf(StoreUnavailable);
  });
});

function anAgent(id: string, overrides: Partial<Agent> = {}): Agent {
  return {
    id,
    description: `the ${id} agent`,
    provider: { kind: 'agui-http', url: `https://agents.example/${id}`, headers: { authorization: 'Bearer x' } },
    takesInterjections: false,
    timeoutSeconds: 600,
    idleTimeoutSeconds: 120,
    ...overrides,
  };
}

function aPushConfig(taskId: string, configId: string, overrides: Partial<PushConfig> = {}): PushConfig {
  return { taskId, configId, tenant: 'acme', url: `https://hooks.example.com/${configId}`, createdAt: '2025-01-01T00:00:00.000Z', ...overrides };
}

describe('DynamoRunStore: push configs', () => {
  it('puts, gets, lists per task, replaces and deletes push configs', async () => {
    const store = await dynamo.freshStore();
    const first = aPushConfig('task-a', 'one', { token: 'secret', authentication: { scheme: 'Bearer', credentials: 'abc' } });
    const second = aPushConfig('task-a', 'two');
    const elsewhere = aPushConfig('task-b', 'one');
    for (const config of [first, second, elsewhere]) await store.putPushConfig(config);

    expect(await store.getPushConfig('task-a', 'one')).toEqual(first);
    expect(await store.listPushConfigs('task-a')).toEqual([first, second]);
    expect(await store.listPushConfigs('task-b')).toEqual([elsewhere]);
    expect(await store.listPushConfigs('task-c')).toEqual([]);

    const replaced = { ...first, url: 'https://hooks.example.com/moved' };
    await store.putPushConfig(replaced);
    expect(await store.getPushConfig('task-a', 'one')).toEqual(replaced);

    expect(await store.deletePushConfig('task-a', 'one')).toBe(true);
    expect(await store.deletePushConfig('task-a', 'one')).toBe(false);
    expect(await store.getPushConfig('task-a', 'one')).toBeUndefined();
    expect(await store.listPushConfigs('task-a')).toEqual([second]);
  });

  it('keeps push configs out of the run, agent and root-run listings', async () => {
    const store = await dynamo.freshStore();
    await store.putPushConfig(aPushConfig('task-a', 'one'));
    expect(await store.listAgents()).toEqual([]);
    expect(await store.listRunsByStatus('queued')).toEqual([]);
    expect((await store.listRootRuns('acme', { limit: 10 })).runs).toEqual([]);
  });

  it('records a dead letter on a config, and never brings a deleted config back', async () => {
    const store = await dynamo.freshStore();
    await store.putPushConfig(aPushConfig('task-a', 'one'));
    const deadLetter = { at: '2025-01-01T00:10:00.000Z', error: 'HTTP 500', attempts: 5, notification: { statusUpdate: { taskId: 'task-a' } } };
    await store.recordPushFailure('task-a', 'one', deadLetter);
    expect(await store.getPushConfig('task-a', 'one')).toMatchObject({ deadLetter });

    await store.recordPushFailure('task-a', 'gone', deadLetter);
    expect(await store.getPushConfig('task-a', 'gone')).toBeUndefined();
  });
});

describe('DynamoRunStore: message claims', () => {
  const claim = (key: string, runId: string, expiresAt = 2_000): MessageClaim => ({ key, runId, threadId: `thread-of-${runId}`, expiresAt });

  it('gives a key to its first claimant and shows every later one the claim that holds it', async () => {
    const store = await dynamo.freshStore();
    expect(await store.claimMessage(claim('k', 'run-1'), 1_000)).toEqual(claim('k', 'run-1'));
    expect(await store.claimMessage(claim('k', 'run-2'), 1_000)).toEqual(claim('k', 'run-1'));
    expect(await store.claimMessage(claim('other', 'run-3'), 1_000)).toEqual(claim('other', 'run-3'));
  });

  it('lets exactly one of twenty concurrent claims take a key', async () => {
    const store = await dynamo.freshStore();
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => store.claimMessage(claim('race', `run-${i}`), 1_000)));
    expect(new Set(results.map((r) => r.runId)).size).toBe(1);
  });

  it('treats a claim past its expiry as free, before TTL has removed it', async () => {
    const store = await dynamo.freshStore();
    await store.claimMessage(claim('k', 'run-1', 2_000), 1_000);
    expect(await store.claimMessage(claim('k', 'run-2', 9_000), 2_000)).toEqual(claim('k', 'run-2', 9_000));
  });

  it('releases a key only for the claim that holds it', async () => {
    const store = await dynamo.freshStore();
    await store.claimMessage(claim('k', 'run-1'), 1_000);
    await store.releaseMessage(claim('k', 'run-2'));
    expect((await store.claimMessage(claim('k', 'run-3'), 1_000)).runId).toBe('run-1');
    await store.releaseMessage(claim('k', 'run-1'));
    expect((await store.claimMessage(claim('k', 'run-3'), 1_000)).runId).toBe('run-3');
  });
});

describe('DynamoRunStore: agents', () => {
  it('puts, gets, lists, replaces and deletes agents', async () => {
    const store = await dynamo.freshStore();
    const demo = anAgent('demo');
    const weather = anAgent('weather', { takesInterjections: true });

    await store.putAgent(demo);
    await store.putAgent(weather);
    expect(await store.getAgent('demo')).toEqual(demo);
    expect(await store.listAgents()).toEqual([demo, weather]);

    const replaced = { ...demo, description: 'replaced', provider: { kind: 'demo' } };
    await store.putAgent(replaced);
    expect(await store.getAgent('demo')).toEqual(replaced);

    await store.deleteAgent('demo');
    expect(await store.getAgent('demo')).toBeUndefined();
    expect(await store.listAgents()).toEqual([weather]);
  });

  it('lists no agents, and no threads or runs, when none were put', async () => {
    const store = await dynamo.freshStore();
    await store.createThread(aThread());
    await store.createRun(aRun());

    expect(await store.listAgents()).toEqual([]);
  });
});

describe('DynamoRunStore: usage', () => {
  it('counts the requests it sends and the units it writes', async () => {
    const store = await dynamo.freshStore();
    expect(store.usage).toEqual({ readRequests: 0, writeRequests: 0, writeUnits: 0 });

    await store.createThread(aThread());
    expect(store.usage).toEqual({ readRequests: 0, writeRequests: 1, writeUnits: 1 });

    // 30 events of ~1.5 KB: two batches, two units per event.
    await store.appendEvents(events('run-1', 30).map((e) => ({ ...e, event: { ...e.event, delta: 'x'.repeat(1500) } })));
    expect(store.usage).toEqual({ readRequests: 0, writeRequests: 3, writeUnits: 61 });

    await store.readEvents('run-1', 0);
    await store.getThread({ tenant: 'acme', threadId: 'nobody' });
    expect(store.usage.readRequests).toBe(2);
  });

  it('counts the whole run item for a transition, since DynamoDB bills an update on the item', async () => {
    const store = await dynamo.freshStore();
    const run = aRun({ input: { ...aRun().input, state: { notes: 'x'.repeat(10_000) } } });
    await store.createRun(run);
    const created = store.usage.writeUnits;

    await store.transitionRun(run.runId, ['queued'], { status: 'running' });
    await store.transitionRun(run.runId, ['queued'], { status: 'running' });

    expect(created).toBeGreaterThanOrEqual(10);
    // The winner is billed on the ~10 KB item, the refused one on a single unit.
    expect(store.usage.writeUnits - created).toBe(created + 1);
    expect(store.usage.writeRequests).toBe(3);
  });
});

describe('DynamoRunStore on dynalite with a data directory', () => {
  it('keeps tables and runs across a restart over the same directory', async () => {
    const path = await mkdtemp(join(tmpdir(), 'funduq-dynalite-'));
    const tables = { runs: 'runs', runEvents: 'run-events' };
    const run = aRun();
    try {
      const first = await startDynalite({ path });
      const firstClient = localDynamoClient(first.endpoint);
      await ensureTables(firstClient, tables);
      await new DynamoRunStore({ client: firstClient, tables }).createRun(run);
      firstClient.destroy();
      await first.close();

      const second = await startDynalite({ path });
      const secondClient = localDynamoClient(second.endpoint);
      await ensureTables(secondClient, tables);
      const stored = await new DynamoRunStore({ client: secondClient, tables }).getRun(run.runId);
      secondClient.destroy();
      await second.close();

      expect(stored).toEqual(run);
    } finally {
      await rm(path, { recursive: true, force: true });
    }
  });
});
