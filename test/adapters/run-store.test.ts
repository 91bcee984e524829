import { describe, expect, it } from 'vitest';
import type { MessageClaim, Run, RunStatus } from '../../lambdas/core/model.js';
import type { RunStore, TaskIndexQuery } from '../../lambdas/core/ports.js';
import { TaskStates } from '../../lambdas/core/a2a/vocabulary.js';
import { aPushConfig, aRun, aThread, anAgent, events, openAsk, range, seqs } from '../support/store-fixtures.js';
import { useStore } from '../support/stores.js';

/**
 * The RunStore port's conformance: the same tests for every adapter (the store under test is
 * test support's, see `useStore`: vitest.config.ts runs this file on SQLite and on DynamoDB).
 */
const stores = useStore();
const adapter = stores.kind === 'sqlite' ? 'SqliteStore' : 'DynamoStore';

const GHOST = { tenant: 'acme', threadId: 'ghost' };

/** Every page of a task listing, following its cursor to the end. */
async function allPages(store: RunStore, tenant: string, query: TaskIndexQuery): Promise<Run[][]> {
  const pages: Run[][] = [];
  let cursor: string | undefined;
  do {
    const page = await store.tasks.list(tenant, { ...query, cursor });
    pages.push(page.runs);
    cursor = page.cursor;
  } while (cursor);
  return pages;
}

describe(`${adapter}: threads`, () => {
  it('creates a thread once and reads it back as it was written', async () => {
    const store = await stores.freshStore();
    const thread = aThread({ waitingRunId: 'run-0' });

    expect(await store.threads.create(thread, 'run-0')).toBe(true);
    expect(await store.threads.create({ ...thread, agentId: 'other' }, 'run-0')).toBe(false);

    expect(await store.threads.get(thread)).toEqual(thread);
  });

  it('reads back nothing for a thread that was never created', async () => {
    const store = await stores.freshStore();
    expect(await store.threads.get({ tenant: 'acme', threadId: 'nobody' })).toBeUndefined();
  });

  it('reserves exactly eight of a hundred concurrent arrivals against a limit of eight', async () => {
    const store = await stores.freshStore();
    const thread = aThread();
    await store.threads.create(thread, 'run-0');

    const results = await Promise.all(Array.from({ length: 100 }, (_, i) => store.threads.reserveArrival(thread, `r${i}`, 8)));

    const reserved = results.flatMap((taken) => (taken ? [taken.arrival] : []));
    expect(reserved.sort((a, b) => a - b)).toEqual(range(1, 8));
    // The thread held no place: the first taken is alone on it, and only that one.
    expect(results.filter((taken) => taken?.alone).map((taken) => taken!.arrival)).toEqual([1]);
    expect(await store.threads.get(thread)).toMatchObject({ unsettled: 8, arrivals: 8 });
  });

  it('always gives an arrival number and a place when no limit applies', async () => {
    const store = await stores.freshStore();
    const thread = aThread({ unsettled: 3 });
    await store.threads.create(thread, 'run-0');

    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => store.threads.reserveArrival(thread, `r${i}`, undefined)));

    expect(results.map((taken) => taken!.arrival).sort((a, b) => a - b)).toEqual(range(1, 30));
    expect(await store.threads.get(thread)).toMatchObject({ unsettled: 33, arrivals: 30 });
  });

  it('refuses an arrival when the thread is full and writes nothing', async () => {
    const store = await stores.freshStore();
    const thread = aThread({ unsettled: 2, arrivals: 5 });
    await store.threads.create(thread, 'run-0');

    expect(await store.threads.reserveArrival(thread, 'a10', 2)).toBeUndefined();
    expect(await store.threads.get(thread)).toEqual(thread);
  });

  it('takes no arrival for a thread that does not exist, and does not create it', async () => {
    const store = await stores.freshStore();

    expect(await store.threads.reserveArrival(GHOST, 'a11', 8)).toBeUndefined();
    expect(await store.threads.reserveArrival(GHOST, 'a12', undefined)).toBeUndefined();
    expect(await store.threads.get(GHOST)).toBeUndefined();
  });

  it('gives back each place once, however often its run gives it back, and never one a run does not hold', async () => {
    const store = await stores.freshStore();
    const thread = aThread({ unsettled: 0, arrivals: 0 });
    await store.threads.create({ ...thread, unsettled: 1, arrivals: 1 }, 'run-1');
    await store.threads.reserveArrival(thread, 'run-2', 2);
    expect(await store.threads.reserveArrival(thread, 'run-3', 2)).toBeUndefined();

    await Promise.all(Array.from({ length: 6 }, () => store.threads.releasePlace(thread, 'run-1')));
    await store.threads.releasePlace(thread, 'run-3');

    expect(await store.threads.get(thread)).toMatchObject({ unsettled: 1 });
    expect(await store.threads.placeHolders(thread)).toEqual(['run-2']);
    expect(await store.threads.reserveArrival(thread, 'run-3', 2)).toEqual({ arrival: 3, alone: false });
    expect(await store.threads.reserveArrival(thread, 'run-4', 2)).toBeUndefined();
  });

  it('takes a new arrival number but no second place for a run that holds one already (its request came again)', async () => {
    const store = await stores.freshStore();
    const thread = aThread({ unsettled: 1, arrivals: 1 });
    await store.threads.create(thread, 'run-1');
    expect(await store.threads.reserveArrival(thread, 'run-2', 8)).toEqual({ arrival: 2, alone: false });
    expect(await store.threads.reserveArrival(thread, 'run-2', 8)).toEqual({ arrival: 3, alone: false });
    expect(await store.threads.reserveArrival(thread, 'run-1', 8)).toEqual({ arrival: 4, alone: false });
    expect(await store.threads.get(thread)).toMatchObject({ unsettled: 2, arrivals: 4 });
  });

  it('releases nothing for a thread that does not exist, and does not create it', async () => {
    const store = await stores.freshStore();

    await store.threads.releasePlace(GHOST, 'run-1');

    expect(await store.threads.get(GHOST)).toBeUndefined();
  });

  it('keeps a waiting run id exactly, a lone surrogate too (a caller may choose one)', async () => {
    const store = await stores.freshStore();
    const thread = aThread({ waitingRunId: 'first-\ud800' });
    await store.threads.create(thread, 'first-\ud800');
    expect((await store.threads.get(thread))?.waitingRunId).toBe('first-\ud800');
    await store.threads.setWaitingRun(thread, 'next-\udc00');
    expect((await store.threads.get(thread))?.waitingRunId).toBe('next-\udc00');
  });

  it('sets the places held and the waiting run of a thread', async () => {
    const store = await stores.freshStore();
    const thread = aThread({ unsettled: 5 });
    await store.threads.create(thread, 'run-0');

    await store.threads.setPlaces(thread, ['run-2', 'run-3']);
    await store.threads.setWaitingRun(thread, 'run-9');

    expect(await store.threads.get(thread)).toEqual({ ...thread, unsettled: 2, waitingRunId: 'run-9' });
    expect(await store.threads.placeHolders(thread)).toEqual(['run-2', 'run-3']);
  });

  it('does not create a thread by setting its places or waiting run', async () => {
    const store = await stores.freshStore();

    await store.threads.setPlaces(GHOST, ['run-1', 'run-2']);
    await store.threads.setWaitingRun(GHOST, 'run-9');

    expect(await store.threads.get(GHOST)).toBeUndefined();
  });
});

describe(`${adapter}: threads of tenants`, () => {
  it("keeps two tenants' threads of the same id apart: items, places, arrivals and runs", async () => {
    const store = await stores.freshStore();
    const acme = aThread({ threadId: 'shared', tenant: 'acme' });
    const globex = aThread({ threadId: 'shared', tenant: 'globex', agentId: 'other' });

    expect(await store.threads.create(acme, 'run-0')).toBe(true);
    expect(await store.threads.create(globex, 'run-0')).toBe(true);
    expect(await store.threads.reserveArrival(acme, 'a13', 1)).toEqual({ arrival: 1, alone: true });
    expect(await store.threads.reserveArrival(globex, 'a14', 1)).toEqual({ arrival: 1, alone: true });
    await store.runs.create(aRun({ threadId: 'shared', tenant: 'acme', runId: 'run-acme' }));
    await store.runs.create(aRun({ threadId: 'shared', tenant: 'globex', runId: 'run-globex' }));

    expect(await store.threads.get({ tenant: 'globex', threadId: 'shared' })).toEqual({ ...globex, unsettled: 1, arrivals: 1 });
    expect((await store.runs.listOfThread(acme)).map((run) => run.runId)).toEqual(['run-acme']);
    expect((await store.runs.listOfThread(globex)).map((run) => run.runId)).toEqual(['run-globex']);
    expect(await store.threads.get({ tenant: 'initech', threadId: 'shared' })).toBeUndefined();
  });

  it('keeps tenants apart whose names share a prefix or hold separators', async () => {
    const store = await stores.freshStore();
    await store.threads.create(aThread({ tenant: 'a/b', threadId: 'c' }), 'run-0');

    expect(await store.threads.get({ tenant: 'a', threadId: 'b/c' })).toBeUndefined();
    expect(await store.threads.create(aThread({ tenant: 'a', threadId: 'b/c' }), 'run-0')).toBe(true);
  });
});

describe(`${adapter}: tenant admission`, () => {
  const minute = 29_000_000;

  it('admits exactly the rate of a window of fifty concurrent runs, and writes nothing for the others', async () => {
    const store = await stores.freshStore();

    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => store.tenants.admit('acme', `acme-x${i}`, { window: minute, runsPerWindow: 7 })));

    expect(results.filter((r) => r === 'admitted')).toHaveLength(7);
    expect(results.filter((r) => r === 'rate_limited')).toHaveLength(43);
    expect(await store.tenants.admit('globex', 'a1', { window: minute, runsPerWindow: 7 })).toBe('admitted');
  });

  it('starts the count again in a later window, and counts a run in the later window a faster clock opened', async () => {
    const store = await stores.freshStore();
    for (let i = 0; i < 2; i++) await store.tenants.admit('acme', 'a2', { window: minute, runsPerWindow: 2 });
    expect(await store.tenants.admit('acme', 'a3', { window: minute, runsPerWindow: 2 })).toBe('rate_limited');

    expect(await store.tenants.admit('acme', 'a4', { window: minute + 1, runsPerWindow: 2 })).toBe('admitted');
    expect(await store.tenants.admit('acme', 'a5', { window: minute, runsPerWindow: 2 })).toBe('admitted');
    expect(await store.tenants.admit('acme', 'a6', { window: minute, runsPerWindow: 2 })).toBe('rate_limited');
  });

  it('admits exactly the places of fifty concurrent runs, gives back each held place once and none it does not hold', async () => {
    const store = await stores.freshStore();

    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => store.tenants.admit('acme', `acme-x${i}`, { window: minute, places: 4 })));
    expect(results.filter((r) => r === 'admitted')).toHaveLength(4);
    expect(results.filter((r) => r === 'places_full')).toHaveLength(46);

    await Promise.all(Array.from({ length: 9 }, (_, i) => store.tenants.releasePlace('acme', `r${i}`)));
    const again = await Promise.all(Array.from({ length: 6 }, (_, i) => store.tenants.admit('acme', `acme-x${i}`, { window: minute, places: 4 })));
    expect(again.filter((r) => r === 'admitted')).toHaveLength(4);
  });

  it('says places_full before rate_limited when both hold, and takes neither count when either does', async () => {
    const store = await stores.freshStore();
    const limits = { window: minute, runsPerWindow: 3, places: 1 };
    expect(await store.tenants.admit('acme', 'r1', limits)).toBe('admitted');
    expect(await store.tenants.admit('acme', 'r2', limits)).toBe('places_full');
    await store.tenants.releasePlace('acme', 'r1');
    expect(await store.tenants.admit('acme', 'r3', limits)).toBe('admitted');
    await store.tenants.releasePlace('acme', 'r3');
    // Two runs counted, not three: the refused one took nothing from the window.
    expect(await store.tenants.admit('acme', 'r4', limits)).toBe('admitted');
    await store.tenants.releasePlace('acme', 'r4');
    expect(await store.tenants.admit('acme', 'r5', limits)).toBe('rate_limited');
  });

  it('releases nothing for a tenant it never admitted, and does not create it', async () => {
    const store = await stores.freshStore();
    await store.tenants.releasePlace('ghost', 'r1');
    expect(await store.tenants.admit('ghost', 'r1', { window: minute, places: 1 })).toBe('admitted');
    expect(await store.tenants.admit('ghost', 'r2', { window: minute, places: 1 })).toBe('places_full');
    // The run admitted comes again (its request retried): it is admitted on the place it holds.
    expect(await store.tenants.admit('ghost', 'r1', { window: minute, places: 1 })).toBe('admitted');
    await store.tenants.releasePlace('ghost', 'r1');
    await store.tenants.releasePlace('ghost', 'r1');
    expect(await store.tenants.admit('ghost', 'r2', { window: minute, places: 1 })).toBe('admitted');
    expect(await store.tenants.admit('ghost', 'r3', { window: minute, places: 1 })).toBe('places_full');
  });

  it('sets every tenant’s places on recovery, those it does not name to zero', async () => {
    const store = await stores.freshStore();
    for (const tenant of ['acme', 'globex']) {
      for (let i = 0; i < 3; i++) await store.tenants.admit(tenant, `${tenant}-${i}`, { window: minute, places: 3 });
    }

    await store.tenants.setPlaces(new Map([['acme', ['acme-0', 'acme-1']]]));

    expect(await store.tenants.admit('acme', 'a7', { window: minute, places: 3 })).toBe('admitted');
    expect(await store.tenants.admit('acme', 'a8', { window: minute, places: 3 })).toBe('places_full');
    const globex = await Promise.all(Array.from({ length: 4 }, (_, i) => store.tenants.admit('globex', `globex-x${i}`, { window: minute, places: 3 })));
    expect(globex.filter((r) => r === 'admitted')).toHaveLength(3);
  });

  it('keeps tenant items out of the run, agent and thread listings', async () => {
    const store = await stores.freshStore();
    await store.tenants.admit('acme', 'a9', { window: minute, runsPerWindow: 5, places: 5 });
    expect(await store.runs.listByStatus('queued')).toEqual([]);
    expect(await store.agents.list()).toEqual([]);
    expect(await store.tasks.list('acme', { agentId: 'demo', limit: 10 })).toEqual({ runs: [] });
  });
});

describe(`${adapter}: runs`, () => {
  it('creates a run once: a second run with the same id is refused and changes nothing', async () => {
    const store = await stores.freshStore();
    const run = aRun();

    expect(await store.runs.create(run)).toBe(true);
    expect(await store.runs.create({ ...run, status: 'running', principal: 'mallory' })).toBe(false);

    expect(await store.runs.get(run.runId)).toEqual(run);
  });

  it('reads back nothing for a run that was never created', async () => {
    const store = await stores.freshStore();
    expect(await store.runs.get('nobody')).toBeUndefined();
  });

  it("keeps a run's context as it was created, through its start, its end and every listing", async () => {
    const store = await stores.freshStore();
    const context = { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', tracestate: 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7' };
    const run = aRun({ context });
    await store.runs.create(run);
    expect((await store.runs.get(run.runId))?.context).toEqual(context);
    await store.runs.transition(run.runId, ['queued'], { status: 'running', startedAt: '2026-01-01T00:00:01.000Z' });
    const ended = await store.runs.transition(run.runId, ['running'], { status: 'completed', endedAt: '2026-01-01T00:00:02.000Z' });
    expect(ended?.context).toEqual(context);
    expect((await store.runs.get(run.runId))?.context).toEqual(context);
    expect((await store.runs.pageByStatus('completed', { limit: 10 })).runs.map((listed) => listed.context)).toEqual([context]);
    expect((await store.runs.listOfThread(run)).map((listed) => listed.context)).toEqual([context]);
  });

  it("gives a run to its own tenant only: another tenant's run reads as an unknown id", async () => {
    const store = await stores.freshStore();
    const run = aRun();
    await store.runs.create(run);

    expect(await store.runs.getOf('acme', run.runId)).toEqual(run);
    expect(await store.runs.getOf('globex', run.runId)).toBeUndefined();
    expect(await store.runs.getOf('acme', 'nobody')).toBeUndefined();
    expect(await store.runs.getOf('acm', run.runId)).toBeUndefined();
    expect(await store.runs.getOf('acme', 'x'.repeat(2_000))).toBeUndefined();
  });

  it("keeps a caller's input exactly: empty strings, nulls, floats, nesting and numbers past 2^53", async () => {
    const store = await stores.freshStore();
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

    await store.runs.create(run);

    expect(await store.runs.get(run.runId)).toEqual(run);
  });

  it('moves a run only from the listed statuses', async () => {
    const store = await stores.freshStore();
    const run = aRun();
    await store.runs.create(run);

    expect(await store.runs.transition(run.runId, ['running', 'cancelling'], { status: 'completed' })).toBeUndefined();
    expect(await store.runs.get(run.runId)).toEqual(run);

    const moved = await store.runs.transition(run.runId, ['queued', 'running'], {
      status: 'running',
      startedAt: '2025-01-01T00:00:01.000Z',
      reason: undefined,
    });

    const expected: Run = { ...run, status: 'running', startedAt: '2025-01-01T00:00:01.000Z' };
    expect(moved).toEqual(expected);
    expect(await store.runs.get(run.runId)).toEqual(expected);
  });

  it('writes every patched field, asks included', async () => {
    const store = await stores.freshStore();
    const run = aRun({ status: 'running' });
    await store.runs.create(run);

    const moved = await store.runs.transition(run.runId, ['running'], {
      status: 'completed',
      endedAt: '2025-01-01T00:00:02.000Z',
      outcome: 'interrupt',
      lastSeq: 12,
      asks: { a: openAsk('a') },
    });

    expect(moved).toEqual({ ...run, status: 'completed', endedAt: '2025-01-01T00:00:02.000Z', outcome: 'interrupt', lastSeq: 12, asks: { a: openAsk('a') } });
  });

  it('does not create a run by moving one that does not exist', async () => {
    const store = await stores.freshStore();

    expect(await store.runs.transition('ghost', ['queued'], { status: 'running' })).toBeUndefined();
    expect(await store.runs.get('ghost')).toBeUndefined();
  });

  it('moves nothing when no status is allowed', async () => {
    const store = await stores.freshStore();
    const run = aRun();
    await store.runs.create(run);

    expect(await store.runs.transition(run.runId, [], { status: 'running' })).toBeUndefined();
    expect(await store.runs.get(run.runId)).toEqual(run);
  });

  it('refuses to patch the fields that place a run in its indexes', async () => {
    const store = await stores.freshStore();
    const run = aRun();
    await store.runs.create(run);

    await expect(store.runs.transition(run.runId, ['queued'], { status: 'running', threadId: 'elsewhere' })).rejects.toThrow(TypeError);
    expect(await store.runs.get(run.runId)).toEqual(run);
  });

  it('lets exactly one of twenty concurrent transitions win', async () => {
    const store = await stores.freshStore();
    const run = aRun();
    await store.runs.create(run);

    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => store.runs.transition(run.runId, ['queued'], { status: 'running', startedAt: `attempt ${i}` })),
    );

    const winners = results.filter((moved): moved is Run => moved !== undefined);
    expect(winners).toHaveLength(1);
    expect(await store.runs.get(run.runId)).toEqual(winners[0]);
  });

  it('lists a thread\'s runs in arrival order, and only that thread\'s', async () => {
    const store = await stores.freshStore();
    for (const arrival of [3, 1, 4, 2]) await store.runs.create(aRun({ threadId: 'thread-a', arrival }));
    await store.runs.create(aRun({ threadId: 'thread-b', arrival: 1 }));

    const runs = await store.runs.listOfThread({ tenant: 'acme', threadId: 'thread-a' });

    expect(runs.map((run) => [run.threadId, run.arrival])).toEqual([
      ['thread-a', 1],
      ['thread-a', 2],
      ['thread-a', 3],
      ['thread-a', 4],
    ]);
    expect(await store.runs.listOfThread({ tenant: 'acme', threadId: 'thread-c' })).toEqual([]);
  });

  it('returns whole runs from the thread index', async () => {
    const store = await stores.freshStore();
    const run = aRun({ threadId: 'thread-a' });
    await store.runs.create(run);

    expect(await store.runs.listOfThread({ tenant: 'acme', threadId: 'thread-a' })).toEqual([run]);
  });

  it("lists a tenant's tasks at an agent newest first, page by page: answers, other agents and other tenants left out", async () => {
    const store = await stores.freshStore();
    const roots: Run[] = [];
    for (let i = 0; i < 7; i++) {
      const root = aRun({ createdAt: `2025-01-0${i + 1}T00:00:00.000Z` });
      roots.push(root);
      await store.runs.create(root);
      await store.runs.create(aRun({ rootRunId: root.runId, parentRunId: root.runId, arrival: 2, createdAt: `2025-01-0${i + 1}T00:00:01.000Z` }));
    }
    await store.runs.create(aRun({ tenant: 'globex', createdAt: '2025-02-01T00:00:00.000Z' }));
    await store.runs.create(aRun({ agentId: 'other', createdAt: '2025-02-01T00:00:00.000Z' }));

    const pages = await allPages(store, 'acme', { agentId: 'demo', limit: 3 });
    expect(pages.every((page) => page.length <= 3)).toBe(true);
    expect(pages.flat()).toEqual([...roots].reverse());
  });

  it('ends with no cursor when the last page is exactly full', async () => {
    const store = await stores.freshStore();
    for (let i = 0; i < 4; i++) await store.runs.create(aRun({ createdAt: `2025-01-0${i + 1}T00:00:00.000Z` }));

    const first = await store.tasks.list('acme', { agentId: 'demo', limit: 2 });
    const second = await store.tasks.list('acme', { agentId: 'demo', limit: 2, cursor: first.cursor });

    expect(first.cursor).toBeDefined();
    expect(second.runs).toHaveLength(2);
    expect(second.cursor).toBeUndefined();
  });

  it('pages tasks created at the same instant without losing or repeating one', async () => {
    const store = await stores.freshStore();
    const created: string[] = [];
    for (let i = 0; i < 5; i++) {
      const run = aRun();
      created.push(run.runId);
      await store.runs.create(run);
    }

    const seen = (await allPages(store, 'acme', { agentId: 'demo', limit: 2 })).flat().map((run) => run.runId);
    expect(seen.sort()).toEqual(created.sort());
  });

  it('refuses a cursor it did not issue, or one issued for another tenant', async () => {
    const store = await stores.freshStore();
    for (let i = 0; i < 3; i++) await store.runs.create(aRun({ createdAt: `2025-01-0${i + 1}T00:00:00.000Z` }));
    const { cursor } = await store.tasks.list('acme', { agentId: 'demo', limit: 1 });
    expect(cursor).toBeDefined();

    await expect(store.tasks.list('globex', { agentId: 'demo', limit: 1, cursor })).rejects.toThrow(RangeError);
    await expect(store.tasks.list('acme', { agentId: 'demo', limit: 1, cursor: 'not-a-cursor' })).rejects.toThrow(RangeError);
    await expect(store.tasks.list('acme', { agentId: 'demo', limit: 1, cursor: Buffer.from('{"pk":1}').toString('base64url') })).rejects.toThrow(RangeError);
  });

  it("lists a task under the state its tail run's last write gives it: the root's moves, then its answer's", async () => {
    const store = await stores.freshStore();
    const root = aRun({ createdAt: '2025-01-01T00:00:00.000Z' });
    const other = aRun({ createdAt: '2025-01-02T00:00:00.000Z' });
    await store.runs.create(root);
    await store.runs.create(other);
    const inState = async (state: number) => (await allPages(store, 'acme', { agentId: 'demo', state, limit: 10 })).flat().map((run) => run.runId);

    expect(await inState(TaskStates.SUBMITTED)).toEqual([other.runId, root.runId]);
    await store.runs.transition(root.runId, ['queued'], { status: 'running', startedAt: '2025-01-01T00:00:01.000Z' });
    expect(await inState(TaskStates.WORKING)).toEqual([root.runId]);
    await store.runs.transition(root.runId, ['running'], { status: 'completed', endedAt: '2025-01-01T00:00:02.000Z', asks: { a1: openAsk('a1') } });
    expect(await inState(TaskStates.INPUT_REQUIRED)).toEqual([root.runId]);
    expect(await inState(TaskStates.WORKING)).toEqual([]);

    // The answer run is the task's tail from its creation: the root's later writes no longer set the state.
    const answer = aRun({ rootRunId: root.runId, parentRunId: root.runId, arrival: 2, createdAt: '2025-01-01T00:00:03.000Z' });
    await store.runs.create(answer);
    await store.runs.closeAsks(root.runId, { a1: { state: 'answered', closedByRunId: answer.runId } });
    expect(await inState(TaskStates.INPUT_REQUIRED)).toEqual([]);
    expect(await inState(TaskStates.SUBMITTED)).toEqual([other.runId, root.runId]);
    await store.runs.transition(answer.runId, ['queued'], { status: 'failed', reason: 'provider_http_403', endedAt: '2025-01-01T00:00:04.000Z' });
    expect(await inState(TaskStates.REJECTED)).toEqual([root.runId]);
    expect(await inState(TaskStates.SUBMITTED)).toEqual([other.runId]);
  });

  it('narrows the listing to a context, and to tasks whose state was set after a time', async () => {
    const store = await stores.freshStore();
    const early = aRun({ threadId: 'ctx-1', createdAt: '2025-01-01T00:00:00.000Z' });
    const late = aRun({ threadId: 'ctx-1', arrival: 2, createdAt: '2025-01-03T00:00:00.000Z' });
    const elsewhere = aRun({ threadId: 'ctx-2', createdAt: '2025-01-02T00:00:00.000Z' });
    for (const run of [early, late, elsewhere]) await store.runs.create(run);
    await store.runs.transition(early.runId, ['queued'], { status: 'completed', endedAt: '2025-01-05T00:00:00.000Z' });
    await store.runs.create(aRun({ tenant: 'globex', threadId: 'ctx-1' }));
    const ids = async (query: Omit<TaskIndexQuery, 'agentId' | 'limit'>) =>
      (await allPages(store, 'acme', { agentId: 'demo', limit: 1, ...query })).flat().map((run) => run.runId);

    expect(await ids({ threadId: 'ctx-1' })).toEqual([late.runId, early.runId]);
    expect(await ids({ threadId: 'ctx-1', state: TaskStates.COMPLETED })).toEqual([early.runId]);
    expect(await ids({ threadId: 'ctx-2', state: TaskStates.COMPLETED })).toEqual([]);
    expect(await ids({ state: TaskStates.SUBMITTED, stateAfter: '2025-01-02T12:00:00.000Z' })).toEqual([late.runId]);
    expect(await ids({ state: TaskStates.COMPLETED, stateAfter: '2025-01-05T00:00:00.000Z' })).toEqual([]);
  });

  it('lists every run in a status, and nothing that is not a run', async () => {
    const store = await stores.freshStore();
    const statuses: RunStatus[] = ['queued', 'running', 'queued', 'completed', 'queued', 'failed'];
    const runs = statuses.map((status) => aRun({ status }));
    for (const run of runs) await store.runs.create(run);
    await store.threads.create(aThread(), 'run-0');
    await store.agents.put(anAgent('demo'));

    const queued = await store.runs.listByStatus('queued');

    expect(queued.map((run) => run.runId).sort()).toEqual(runs.filter((run) => run.status === 'queued').map((run) => run.runId).sort());
    expect(queued[0]).toEqual(runs.find((run) => run.runId === queued[0].runId));
    expect(await store.runs.listByStatus('cancelling')).toEqual([]);
  });

  it('lists the runs in a status a page at a time, each once, until no cursor is left', async () => {
    const store = await stores.freshStore();
    const runs = Array.from({ length: 7 }, (_, i) => aRun({ status: i % 3 === 0 ? 'completed' : 'queued' }));
    for (const run of runs) await store.runs.create(run);
    await store.agents.put(anAgent('demo'));

    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await store.runs.pageByStatus('queued', { limit: 2, ...(cursor !== undefined ? { cursor } : {}) });
      expect(page.runs.length).toBeLessThanOrEqual(2);
      seen.push(...page.runs.map((run) => run.runId));
      cursor = page.cursor;
      pages += 1;
    } while (cursor !== undefined && pages < 20);

    expect(cursor).toBeUndefined();
    expect(seen.sort()).toEqual(runs.filter((run) => run.status === 'queued').map((run) => run.runId).sort());
  });
});

describe(`${adapter}: asks`, () => {
  async function waitingRun(store: RunStore, askIds: string[]): Promise<Run> {
    const run = aRun({ status: 'completed', outcome: 'interrupt', asks: Object.fromEntries(askIds.map((id) => [id, openAsk(id)])) });
    await store.runs.create(run);
    return run;
  }

  it('closes the named asks in one write and leaves the others open', async () => {
    const store = await stores.freshStore();
    const run = await waitingRun(store, ['a', 'b', 'c']);

    const written = await store.runs.closeAsks(run.runId, { a: { state: 'answered', closedByRunId: 'run-2' }, b: { state: 'expired' } });

    expect(written?.asks).toEqual({
      a: { ...openAsk('a'), state: 'answered', closedByRunId: 'run-2' },
      b: { ...openAsk('b'), state: 'expired' },
      c: openAsk('c'),
    });
    expect(await store.runs.get(run.runId)).toEqual(written);
  });

  it('closes nothing when any named ask is no longer open', async () => {
    const store = await stores.freshStore();
    const run = await waitingRun(store, ['a', 'b']);
    const afterFirst = await store.runs.closeAsks(run.runId, { a: { state: 'expired' } });

    expect(await store.runs.closeAsks(run.runId, { a: { state: 'answered', closedByRunId: 'run-2' }, b: { state: 'answered', closedByRunId: 'run-2' } })).toBeUndefined();
    expect(await store.runs.get(run.runId)).toEqual(afterFirst);
    expect(afterFirst?.asks?.b.state).toBe('open');
  });

  it('closes nothing for an ask the run does not have, or a run that does not exist', async () => {
    const store = await stores.freshStore();
    const run = await waitingRun(store, ['a']);

    expect(await store.runs.closeAsks(run.runId, { a: { state: 'answered' }, zz: { state: 'answered' } })).toBeUndefined();
    expect(await store.runs.closeAsks('ghost', { a: { state: 'answered' } })).toBeUndefined();
    expect(await store.runs.get(run.runId)).toEqual(run);
    expect(await store.runs.get('ghost')).toBeUndefined();
  });

  it('takes ask ids that are not safe attribute names', async () => {
    const store = await stores.freshStore();
    const run = await waitingRun(store, ['call.1 #x', 'status']);

    const written = await store.runs.closeAsks(run.runId, { 'call.1 #x': { state: 'cancelled' }, status: { state: 'cancelled' } });

    expect(written?.asks?.['call.1 #x'].state).toBe('cancelled');
    expect(written?.asks?.status.state).toBe('cancelled');
    expect(written?.status).toBe('completed');
  });

  it('lets exactly one of fifty concurrent answers close the asks, and the others change nothing', async () => {
    const store = await stores.freshStore();
    const run = await waitingRun(store, ['a', 'b']);

    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        store.runs.closeAsks(run.runId, { a: { state: 'answered', closedByRunId: `answer-${i}` }, b: { state: 'answered', closedByRunId: `answer-${i}` } }),
      ),
    );

    const winners = results.filter((written): written is Run => written !== undefined);
    expect(winners).toHaveLength(1);
    const stored = await store.runs.get(run.runId);
    expect(stored).toEqual(winners[0]);
    expect(stored?.asks?.a.closedByRunId).toBe(stored?.asks?.b.closedByRunId);
  });
});

describe(`${adapter}: run events`, () => {
  it('appends sixty events and reads them back in order, exactly as given', async () => {
    const store = await stores.freshStore();
    const appended = [...events('run-1', 59), { runId: 'run-1', seq: 60, event: { type: 'SOMETHING_NEW', payload: { nested: [1, null, 'é'] } } }];

    await store.events.append(appended);

    expect(await store.events.read('run-1', 0)).toEqual(appended);
  });

  it('reads only the events after the cursor, and at most the limit', async () => {
    const store = await stores.freshStore();
    await store.events.append(events('run-1', 60));

    expect(seqs(await store.events.read('run-1', 42))).toEqual(range(43, 60));
    expect(seqs(await store.events.read('run-1', 10, 5))).toEqual(range(11, 15));
    expect(seqs(await store.events.read('run-1', 55, 20))).toEqual(range(56, 60));
    expect(await store.events.read('run-1', 60)).toEqual([]);
  });

  it("keeps each run's events apart", async () => {
    const store = await stores.freshStore();
    await store.events.append([...events('run-1', 3), ...events('run-2', 2)]);

    const read = await store.events.read('run-2', 0);
    expect(read.map(({ json: _json, ...stored }) => stored)).toEqual(events('run-2', 2));
    // Each event comes with the JSON it was stored as, so framing need not serialise it again.
    expect(read.map((stored) => stored.json)).toEqual(events('run-2', 2).map((stored) => JSON.stringify(stored.event)));
    expect(await store.events.read('run-3', 0)).toEqual([]);
  });

  it('follows pages until the limit when the events outgrow one response', async () => {
    const store = await stores.freshStore();
    // ~30 KB each: 60 of them pass DynamoDB's 1 MB page, so the read needs a second page.
    const big = events('run-1', 60).map((e) => ({ ...e, event: { ...e.event, delta: 'x'.repeat(30_000) } }));
    await store.events.append(big);

    expect(seqs(await store.events.read('run-1', 0))).toEqual(range(1, 60));
    expect(seqs(await store.events.read('run-1', 0, 50))).toEqual(range(1, 50));
  });

  it('reports the last seq of a run, and 0 for a run with none', async () => {
    const store = await stores.freshStore();
    await store.events.append(events('run-1', 27));
    await store.events.append(events('run-1', 3, 28));

    expect(await store.events.lastSeq('run-1')).toBe(30);
    expect(await store.events.lastSeq('run-2')).toBe(0);
  });

  it('stores each event at its seq unless that seq is stored already: the first write wins, and the taken seqs are named', async () => {
    const store = await stores.freshStore();
    await store.events.append(events('run-1', 5));
    const later = events('run-1', 8, 4).map((e) => ({ ...e, event: { ...e.event, delta: `new ${e.seq}` } }));

    expect(await store.events.appendNew([later[7], ...later, later[0]])).toEqual([4, 4, 5, 11]);
    expect(await store.events.appendNew(events('run-1', 2, 20))).toEqual([]);

    const stored = await store.events.read('run-1', 0);
    expect(seqs(stored)).toEqual([...range(1, 11), 20, 21]);
    expect(stored.slice(0, 5).map((e) => e.event.delta)).toEqual(['chunk 1', 'chunk 2', 'chunk 3', 'chunk 4', 'chunk 5']);
    expect(stored.slice(5, 11).map((e) => e.event.delta)).toEqual(range(6, 11).map((seq) => `new ${seq}`));
    expect(await store.events.lastSeq('run-1')).toBe(21);
    expect(seqs(await store.events.read('run-1', 10, 2))).toEqual([11, 20]);
  });

  it('reads from any cursor within a long write, and at most the limit', async () => {
    const store = await stores.freshStore();
    await store.events.append(events('run-1', 250));

    for (const cursor of [0, 1, 99, 100, 101, 199, 248, 249]) {
      expect(seqs(await store.events.read('run-1', cursor, 3))).toEqual(range(cursor + 1, Math.min(cursor + 3, 250)));
    }
    expect(seqs(await store.events.read('run-1', 150))).toEqual(range(151, 250));
    expect(await store.events.read('run-1', 250)).toEqual([]);
  });

  it('appends nothing for no events', async () => {
    const store = await stores.freshStore();
    await store.events.append([]);
    expect(await store.events.appendNew([])).toEqual([]);
    expect(await store.events.read('run-1', 0)).toEqual([]);
  });
});

describe(`${adapter}: push configs`, () => {
  it('puts, gets, lists per task, replaces and deletes push configs', async () => {
    const store = await stores.freshStore();
    const first = aPushConfig('task-a', 'one', { token: 'secret', authentication: { scheme: 'Bearer', credentials: 'abc' } });
    const second = aPushConfig('task-a', 'two');
    const elsewhere = aPushConfig('task-b', 'one');
    for (const config of [first, second, elsewhere]) await store.pushConfigs.put(config);

    expect(await store.pushConfigs.get('task-a', 'one')).toEqual(first);
    expect(await store.pushConfigs.list('task-a')).toEqual([first, second]);
    expect(await store.pushConfigs.list('task-b')).toEqual([elsewhere]);
    expect(await store.pushConfigs.list('task-c')).toEqual([]);

    const replaced = { ...first, url: 'https://hooks.example.com/moved' };
    await store.pushConfigs.put(replaced);
    expect(await store.pushConfigs.get('task-a', 'one')).toEqual(replaced);

    expect(await store.pushConfigs.delete('task-a', 'one')).toBe(true);
    expect(await store.pushConfigs.delete('task-a', 'one')).toBe(false);
    expect(await store.pushConfigs.get('task-a', 'one')).toBeUndefined();
    expect(await store.pushConfigs.list('task-a')).toEqual([second]);
  });

  it('keeps push configs out of the run, agent and root-run listings', async () => {
    const store = await stores.freshStore();
    await store.pushConfigs.put(aPushConfig('task-a', 'one'));
    expect(await store.agents.list()).toEqual([]);
    expect(await store.runs.listByStatus('queued')).toEqual([]);
    expect((await store.tasks.list('acme', { agentId: 'demo', limit: 10 })).runs).toEqual([]);
  });

  it('records a dead letter on a config, and never brings a deleted config back', async () => {
    const store = await stores.freshStore();
    await store.pushConfigs.put(aPushConfig('task-a', 'one'));
    const deadLetter = { at: '2025-01-01T00:10:00.000Z', error: 'HTTP 500', attempts: 5, notification: { statusUpdate: { taskId: 'task-a' } } };
    await store.pushConfigs.recordFailure('task-a', 'one', deadLetter);
    expect(await store.pushConfigs.get('task-a', 'one')).toMatchObject({ deadLetter });

    await store.pushConfigs.recordFailure('task-a', 'gone', deadLetter);
    expect(await store.pushConfigs.get('task-a', 'gone')).toBeUndefined();
  });
});

describe(`${adapter}: message claims`, () => {
  const claim = (key: string, runId: string, expiresAt = 2_000): MessageClaim => ({ key, runId, threadId: `thread-of-${runId}`, expiresAt });

  it('gives a key to its first claimant and shows every later one the claim that holds it', async () => {
    const store = await stores.freshStore();
    expect(await store.claims.take(claim('k', 'run-1'), 1_000)).toEqual(claim('k', 'run-1'));
    expect(await store.claims.take(claim('k', 'run-2'), 1_000)).toEqual(claim('k', 'run-1'));
    expect(await store.claims.take(claim('other', 'run-3'), 1_000)).toEqual(claim('other', 'run-3'));
  });

  it('lets exactly one of twenty concurrent claims take a key', async () => {
    const store = await stores.freshStore();
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => store.claims.take(claim('race', `run-${i}`), 1_000)));
    expect(new Set(results.map((r) => r.runId)).size).toBe(1);
  });

  it('treats a claim past its expiry as free, before TTL has removed it', async () => {
    const store = await stores.freshStore();
    await store.claims.take(claim('k', 'run-1', 2_000), 1_000);
    expect(await store.claims.take(claim('k', 'run-2', 9_000), 2_000)).toEqual(claim('k', 'run-2', 9_000));
  });

  it('releases a key only for the claim that holds it', async () => {
    const store = await stores.freshStore();
    await store.claims.take(claim('k', 'run-1'), 1_000);
    await store.claims.release(claim('k', 'run-2'));
    expect((await store.claims.take(claim('k', 'run-3'), 1_000)).runId).toBe('run-1');
    await store.claims.release(claim('k', 'run-1'));
    expect((await store.claims.take(claim('k', 'run-3'), 1_000)).runId).toBe('run-3');
  });
});

describe(`${adapter}: agents`, () => {
  it('puts, gets, lists, replaces and deletes agents', async () => {
    const store = await stores.freshStore();
    const demo = anAgent('demo');
    const weather = anAgent('weather', { takesInterjections: true });

    await store.agents.put(demo);
    await store.agents.put(weather);
    expect(await store.agents.get('demo')).toEqual(demo);
    expect(await store.agents.list()).toEqual([demo, weather]);

    const replaced = { ...demo, description: 'replaced', provider: { kind: 'demo' } };
    await store.agents.put(replaced);
    expect(await store.agents.get('demo')).toEqual(replaced);

    await store.agents.delete('demo');
    expect(await store.agents.get('demo')).toBeUndefined();
    expect(await store.agents.list()).toEqual([weather]);
  });

  it('lists no agents, and no threads or runs, when none were put', async () => {
    const store = await stores.freshStore();
    await store.threads.create(aThread(), 'run-0');
    await store.runs.create(aRun());

    expect(await store.agents.list()).toEqual([]);
  });
});


describe(`${adapter}: leases`, () => {
  it("takes a door's lease only where none is held, and never takes one over for a dispatcher", async () => {
    const store = await stores.freshStore();
    // A dispatcher's lease is taken over by a later delivery's dispatcher, never by a door.
    expect(await store.leases.take({ runId: 'run-1', until: 1_000, receipt: 'first' })).toBe(true);
    expect(await store.leases.take({ runId: 'run-1', until: 2_000, door: true })).toBe(false);
    expect(await store.leases.take({ runId: 'run-1', until: 3_000, receipt: 'second' })).toBe(true);
    expect(await store.leases.get('run-1')).toEqual({ runId: 'run-1', until: 3_000, receipt: 'second' });

    // A door's lease stands against every dispatcher's and every other door's, until it ends.
    expect(await store.leases.take({ runId: 'run-2', until: 1_000, door: true })).toBe(true);
    expect(await store.leases.take({ runId: 'run-2', until: 2_000, receipt: 'late' })).toBe(false);
    expect(await store.leases.take({ runId: 'run-2', until: 2_000, door: true })).toBe(false);
    expect(await store.leases.get('run-2')).toEqual({ runId: 'run-2', until: 1_000, door: true });
    expect(await store.leases.renew('run-2', 5_000)).toBe(true);
    expect(await store.leases.lapsed(6_000, 10)).toEqual([{ runId: 'run-1', until: 3_000, receipt: 'second' }, { runId: 'run-2', until: 5_000, door: true }]);
    expect(await store.leases.end('run-2')).toBe(true);
    expect(await store.leases.take({ runId: 'run-2', until: 7_000, receipt: 'next' })).toBe(true);
  });
});
