import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { recordProjections } from '../../lambdas/core/a2a/task-state.js';
import { TaskStates } from '../../lambdas/core/a2a/vocabulary.js';
import type { Ask, AskState, Budget, Run, RunStatus, Spend } from '../../lambdas/core/model.js';
import type { RunStore, TenantLimits } from '../../lambdas/core/ports.js';
import { ReferenceRecord } from '../../lambdas/core/record/reference.js';
import { aRun } from '../support/store-fixtures.js';
import { useStore } from '../support/stores.js';

/**
 * The record's rules, held against each store: random sequences of calls, the same from the
 * reference model (`core/record/reference.ts`) and from the store under test, give the same
 * answers, and leave the same record behind (read back after each write). vitest.config.ts runs
 * this file on SQLite and on DynamoDB. Seeded (FUNDUQ_MODEL_SEED replays another seed); a failure
 * prints the shrunk sequence of calls.
 *
 * One store serves a property's runs: each run names its tenants, threads, runs, claims and
 * providers under a prefix of its own, so a run starts from an empty record as the model does
 * (DynamoDB tables take a second to create). The calls that span the record (every tenant's places,
 * every provider's) touch earlier runs' items too, which no later run reads.
 */
const stores = useStore();
const SEED = Number(process.env.FUNDUQ_MODEL_SEED ?? 20261202);
const RUNS = 25;
const MOST_CALLS = 40;

interface World {
  model: ReferenceRecord;
  store: RunStore;
  prefix: string;
  /** The next arrival number of each thread, and the roots created on it (an answer run joins one of them). */
  arrivals: Map<string, number>;
  roots: Map<string, string[]>;
  created: number;
}

type Call = fc.AsyncCommand<World, World>;

function call(name: string, args: unknown, act: (world: World) => Promise<void>): Call {
  return { check: () => true, run: (world) => act(world), toString: () => `${name} ${JSON.stringify(args)}` };
}

/** The model and the store: the same calls answer alike. */
type Side = ReferenceRecord | RunStore;

/**
 * A call made on both sides: `call` makes it of each (from what the world was before either), and
 * the answers are compared (or the class of what each threw); then `after` reads back from both.
 */
function both<A>(name: string, args: fc.Arbitrary<A>, calling: (a: A, w: World) => (side: Side) => unknown, after?: (w: World, a: A) => Promise<void>): fc.Arbitrary<Call> {
  return args.map((a) =>
    call(name, a, async (w) => {
      const made = calling(a, w);
      await same(name, () => made(w.model), async () => made(w.store));
      await after?.(w, a);
    }),
  );
}

async function same<T>(what: string, fromModel: () => T, fromStore: () => Promise<T>): Promise<void> {
  const expected = settle(fromModel);
  let actual: { value: unknown } | { thrown: string };
  try {
    actual = { value: await fromStore() };
  } catch (error) {
    actual = { thrown: (error as Error).constructor.name };
  }
  expect(actual, what).toEqual(expected);
}

function settle<T>(answer: () => T): { value: unknown } | { thrown: string } {
  try {
    return { value: answer() };
  } catch (error) {
    return { thrown: (error as Error).constructor.name };
  }
}

const tenantName = fc.constantFrom('t1', 't2');
const threadName = fc.constantFrom('a', 'b');
const holderName = fc.constantFrom('r1', 'r2', 'r3', 'r4');
const runName = fc.constantFrom('run1', 'run2', 'run3', 'run4');

// Threads: places held by runs, arrival numbers, a thread abandoned by its opener.

const onThread = { tenant: tenantName, thread: threadName };
const threadOf = (a: { tenant: string; thread: string }, prefix: string) => ({ tenant: prefix + a.tenant, threadId: a.thread });
const thenTheThread = (w: World, a: { tenant: string; thread: string }) => sameThread(w, a.tenant, a.thread);

const threadCalls: fc.Arbitrary<Call>[] = [
  // As the core opens a thread: its opener's arrival and place, and the head it is bound to when its first run carried a chain.
  both(
    'threads.create',
    fc.record({ ...onThread, holder: holderName, head: fc.option(fc.constantFrom('head-1', 'head-2'), { nil: undefined }) }),
    (a, { prefix }) => (side) =>
      side.threads.create({ ...threadOf(a, prefix), agentId: 'demo', createdAt: '2026-01-01T00:00:00.000Z', unsettled: 1, arrivals: 1, ...(a.head ? { head: a.head } : {}) }, a.holder),
    thenTheThread,
  ),
  both(
    'threads.reserveArrival',
    fc.record({ ...onThread, holder: holderName, limit: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }) }),
    (a, { prefix }) => (side) => side.threads.reserveArrival(threadOf(a, prefix), a.holder, a.limit),
    thenTheThread,
  ),
  both('threads.releasePlace', fc.record({ ...onThread, holder: holderName }), (a, { prefix }) => (side) => side.threads.releasePlace(threadOf(a, prefix), a.holder), thenTheThread),
  both('threads.abandon', fc.record({ ...onThread, holder: holderName }), (a, { prefix }) => (side) => side.threads.abandon(threadOf(a, prefix), a.holder), thenTheThread),
  both(
    'threads.setPlaces',
    fc.record({ ...onThread, holders: fc.uniqueArray(holderName, { maxLength: 3 }) }),
    (a, { prefix }) => (side) => side.threads.setPlaces(threadOf(a, prefix), a.holders),
    thenTheThread,
  ),
  both('threads.setWaitingRun', fc.record({ ...onThread, run: runName }), (a, { prefix }) => (side) => side.threads.setWaitingRun(threadOf(a, prefix), a.run), thenTheThread),
];

async function sameThread(w: World, tenant: string, threadId: string): Promise<void> {
  const ref = { tenant: w.prefix + tenant, threadId };
  await same('the thread', () => w.model.threads.get(ref), () => w.store.threads.get(ref));
  await same('its place holders', () => w.model.threads.placeHolders(ref), async () => (await w.store.threads.placeHolders(ref)).sort());
}

// Tenants: admission by window and places, places given back, spend by period, the budget crossed.

const period = fc.constantFrom('2026-01', '2026-02', '2026-03');
/** Costs exact in binary: DynamoDB adds decimals, SQLite and the model doubles, which agree on these. */
const cost = fc.constantFrom(0, 0.5, 1.25, 2);
const spendArb: fc.Arbitrary<Spend> = fc
  .record({ period, tokens: fc.integer({ min: 0, max: 100 }), cost, crossed: fc.boolean() })
  .map(({ crossed, ...spend }) => (crossed ? { ...spend, crossedAt: '2026-01-05T00:00:00.000Z', crossedByRunId: 'run1' } : spend));
const budgetArb: fc.Arbitrary<Budget | undefined> = fc.option(fc.record({ period: fc.constant('month' as const), tokens: fc.integer({ min: 1, max: 200 }) }), { nil: undefined });
const limitsArb: fc.Arbitrary<TenantLimits> = fc
  .record({ window: fc.integer({ min: 10, max: 12 }), runsPerWindow: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }), places: fc.option(fc.integer({ min: 1, max: 2 }), { nil: undefined }) })
  .map(({ window, runsPerWindow, places }) => ({ window, ...(runsPerWindow !== undefined ? { runsPerWindow } : {}), ...(places !== undefined ? { places } : {}) }));

const thenTheTenant = async (w: World, a: { tenant: string }) => same('the tenant', () => w.model.tenants.get(w.prefix + a.tenant), () => w.store.tenants.get(w.prefix + a.tenant));

const tenantCalls: fc.Arbitrary<Call>[] = [
  both('tenants.admit', fc.record({ tenant: tenantName, holder: holderName, limits: limitsArb }), (a, { prefix }) => (side) => side.tenants.admit(prefix + a.tenant, a.holder, a.limits)),
  both('tenants.releasePlace', fc.record({ tenant: tenantName, holder: holderName }), (a, { prefix }) => (side) => side.tenants.releasePlace(prefix + a.tenant, a.holder)),
  both('tenants.setPlaces', fc.array(fc.record({ tenant: tenantName, holders: fc.uniqueArray(holderName, { maxLength: 2 }) }), { maxLength: 2 }), (a, { prefix }) => (side) =>
    side.tenants.setPlaces(new Map(a.map(({ tenant, holders }) => [prefix + tenant, holders]))),
  ),
  both('tenants.putBudget', fc.record({ tenant: tenantName, budget: budgetArb, spend: spendArb }), (a, { prefix }) => (side) => side.tenants.putBudget(prefix + a.tenant, a.budget, a.spend), thenTheTenant),
  both(
    'tenants.charge',
    fc.record({ tenant: tenantName, charge: fc.record({ period, tokens: fc.integer({ min: 0, max: 50 }), cost }) }),
    (a, { prefix }) => (side) => side.tenants.charge(prefix + a.tenant, a.charge),
    thenTheTenant,
  ),
  both(
    'tenants.markBudgetCrossed',
    fc.record({ tenant: tenantName, period, run: runName, at: fc.constantFrom('2026-01-20T00:00:00.000Z', '2026-02-20T00:00:00.000Z') }),
    (a, { prefix }) => (side) => side.tenants.markBudgetCrossed(prefix + a.tenant, a.period, a.run, a.at),
    thenTheTenant,
  ),
];

// Message claims with expiry; providers' registrations and places; principals' keys.

const keyName = fc.constantFrom('k1', 'k2');
const providerName = fc.constantFrom('p1', 'p2');

const principalName = fc.constantFrom('alice', 'bob');
const thenThePrincipal = (w: World, a: { tenant: string; principal: string }) =>
  same('the principal’s keys', () => w.model.principals.get(w.prefix + a.tenant, a.principal), () => w.store.principals.get(w.prefix + a.tenant, a.principal));

const thenTheProvider = (w: World, a: { provider: string }) => same('the provider', () => w.model.providers.get(w.prefix + a.provider), () => w.store.providers.get(w.prefix + a.provider));

const registryCalls: fc.Arbitrary<Call>[] = [
  both('claims.take', fc.record({ key: keyName, run: runName, expiresAt: fc.constantFrom(100, 200, 300), now: fc.constantFrom(50, 150, 250, 350) }), (a, { prefix }) => (side) =>
    side.claims.take({ key: prefix + a.key, runId: a.run, threadId: 'a', expiresAt: a.expiresAt }, a.now),
  ),
  both('claims.release', fc.record({ key: keyName, run: runName }), (a, { prefix }) => (side) => side.claims.release({ key: prefix + a.key, runId: a.run, threadId: 'a', expiresAt: 0 })),
  both(
    'providers.put',
    fc.record({ provider: providerName, max: fc.integer({ min: 1, max: 2 }), createdAt: fc.constantFrom('2026-01-01T00:00:00.000Z', '2026-02-01T00:00:00.000Z'), agents: fc.subarray(['demo', 'other']) }),
    (a, { prefix }) => (side) => side.providers.put({ providerId: prefix + a.provider, publicKey: `key-${a.max}`, agents: a.agents, maxConcurrentRuns: a.max, createdAt: a.createdAt }),
    thenTheProvider,
  ),
  both('providers.takePlace', fc.record({ provider: providerName, limit: fc.integer({ min: 0, max: 2 }) }), (a, { prefix }) => (side) => side.providers.takePlace(prefix + a.provider, a.limit), thenTheProvider),
  both('providers.releasePlace', fc.record({ provider: providerName }), (a, { prefix }) => (side) => side.providers.releasePlace(prefix + a.provider), thenTheProvider),
  both('providers.delete', fc.record({ provider: providerName }), (a, { prefix }) => (side) => side.providers.delete(prefix + a.provider)),
  both(
    'providers.resetPlaces',
    fc.constant({}),
    () => (side) => side.providers.resetPlaces(),
    (w) => same('the providers', () => w.model.providers.list(), async () => (await w.store.providers.list()).filter((p) => p.providerId.startsWith(w.prefix))),
  ),
  both(
    'principals.put',
    fc.record({ tenant: tenantName, principal: principalName, keys: fc.subarray(['key-a', 'key-b', 'key-c'], { minLength: 1 }) }),
    (a, { prefix }) => (side) => side.principals.put(prefix + a.tenant, a.principal, a.keys),
    thenThePrincipal,
  ),
  both('principals.delete', fc.record({ tenant: tenantName, principal: principalName }), (a, { prefix }) => (side) => side.principals.delete(prefix + a.tenant, a.principal), thenThePrincipal),
];

// Dispatchers' leases: taken, renewed only while held, listed by their end, ended only as listed.

const until = fc.constantFrom(1_000, 2_000, 3_000);

/** Every lease of this world that lapsed before `before`, as each side lists them (the store holds earlier worlds' too). */
const thenTheLapsed = (w: World, a: { before: number }) =>
  same(
    'the lapsed leases',
    () => w.model.leases.lapsed(a.before, 1_000),
    async () => (await w.store.leases.lapsed(a.before, 1_000)).filter((lease) => lease.runId.startsWith(w.prefix)),
  );

const leaseCalls: fc.Arbitrary<Call>[] = [
  both('leases.take', fc.record({ run: runName, until, receipt: fc.option(fc.constantFrom('r1', 'r2'), { nil: undefined }), door: fc.boolean() }), (a, { prefix }) => (side) =>
    side.leases.take({ runId: prefix + a.run, until: a.until, ...(a.receipt !== undefined ? { receipt: a.receipt } : {}), ...(a.door ? { door: true as const } : {}) }),
  ),
  both('leases.renew', fc.record({ run: runName, until, receipt: fc.option(fc.constantFrom('r1', 'r2'), { nil: undefined }) }), (a, { prefix }) => (side) =>
    side.leases.renew(prefix + a.run, a.until, a.receipt),
  ),
  both(
    'leases.end',
    fc.record({ run: runName, until: fc.option(until, { nil: undefined }), receipt: fc.option(fc.constantFrom('r1', 'r2'), { nil: undefined }) }),
    (a, { prefix }) => (side) => side.leases.end(prefix + a.run, { ...(a.until !== undefined ? { until: a.until } : {}), ...(a.receipt !== undefined ? { receipt: a.receipt } : {}) }),
  ),
  both('leases.lapsed', fc.record({ before: fc.constantFrom(1_500, 2_500, 3_500) }), () => () => undefined, thenTheLapsed),
  both('leases.get', fc.record({ run: runName }), (a, { prefix }) => (side) => side.leases.get(prefix + a.run)),
];

// Runs: transitions (and the identity a patch may not change), asks closed and opened, a link moved; the task index they write.

const STATUSES: RunStatus[] = ['queued', 'running', 'cancelling', 'completed', 'failed', 'cancelled'];
const askIds = fc.subarray(['i1', 'i2'], { minLength: 1 });
const closing = fc.constantFrom<Exclude<AskState, 'open'>>('answered', 'expired', 'cancelled');

function asksOf(reason: string): Record<string, Ask> {
  return {
    i1: { id: 'i1', kind: 'interrupt', state: 'open', interrupt: { id: 'i1', reason } },
    i2: { id: 'i2', kind: 'tool_call', state: 'open', toolCallId: 'call-1', toolCallName: 'search' },
  };
}

const patchArb = fc
  .record({
    status: fc.constantFrom(...STATUSES),
    startedAt: fc.option(fc.constant('2026-01-01T00:01:00.000Z'), { nil: undefined }),
    endedAt: fc.option(fc.constant('2026-01-01T00:02:00.000Z'), { nil: undefined }),
    reason: fc.option(fc.constantFrom('provider_refused', 'provider_http_404', 'provider_http_429'), { nil: undefined }),
    asks: fc.option(fc.constantFrom('approval', 'auth_required'), { nil: undefined }),
    // A field that names or places the run: the patch is refused whole.
    identity: fc.option(fc.constantFrom<Partial<Run>>({ threadId: 'elsewhere' }, { arrival: 99 }, { rootRunId: 'run9' }, { createdAt: '2027-01-01T00:00:00.000Z' }), { freq: 8, nil: undefined }),
  })
  .map(({ asks, identity, ...fields }): Partial<Run> & { status: RunStatus } => {
    const patch: Partial<Run> & { status: RunStatus } = { status: fields.status };
    if (fields.startedAt) patch.startedAt = fields.startedAt;
    if (fields.endedAt) patch.endedAt = fields.endedAt;
    if (fields.reason) patch.reason = fields.reason;
    if (asks) patch.asks = asksOf(asks);
    return { ...patch, ...identity };
  });

/** `usual` three times in four: lineages of a few runs on one thread, rather than runs each alone. */
function mostly<T>(usual: T, other: T): fc.Arbitrary<T> {
  return fc.constantFrom(usual, usual, usual, other);
}

/** A run, as the core creates one: the thread's next arrival, a root or an answer to the thread's latest root. */
const createRun: fc.Arbitrary<Call> = fc
  .record({ run: runName, tenant: mostly('t1', 't2'), thread: mostly('a', 'b'), answer: mostly(true, false), status: fc.constantFrom<RunStatus>('queued', 'running') })
  .map((a) =>
    call('runs.create', a, async (w) => {
      const tenant = w.prefix + a.tenant;
      const thread = `${tenant}/${a.thread}`;
      const arrival = (w.arrivals.get(thread) ?? 0) + 1;
      w.arrivals.set(thread, arrival);
      const runId = w.prefix + a.run;
      const roots = w.roots.get(thread) ?? [];
      const rootRunId = a.answer && roots.length > 0 ? roots[roots.length - 1] : runId;
      // Every run of a property run later than the one before: the listing's order is by creation.
      const createdAt = new Date(Date.UTC(2026, 0, 1) + ++w.created * 1000).toISOString();
      const run = aRun({ runId, tenant, threadId: a.thread, arrival, rootRunId, createdAt, status: a.status, ...(rootRunId !== runId ? { parentRunId: rootRunId } : {}) });
      const created = w.model.runs.create(run);
      expect(await w.store.runs.create(run), 'created').toBe(created);
      if (created && rootRunId === runId) w.roots.set(thread, [...roots, runId]);
      await sameRun(w, a.run);
    }),
  );

/** Runs are created twice as often as the rest: most calls find one. */
const runCalls: fc.Arbitrary<Call>[] = [
  createRun,
  createRun,
  both(
    'runs.transition',
    fc.record({ run: runName, fromItsStatus: fc.boolean(), from: fc.subarray(STATUSES), patch: patchArb }),
    (a, w) => {
      // Mostly from the status the run has (as the core moves runs), else from any.
      const status = w.model.runs.get(w.prefix + a.run)?.status;
      const from = a.fromItsStatus && status ? [...new Set([status, ...a.from])] : a.from;
      return (side) => side.runs.transition(w.prefix + a.run, from, a.patch);
    },
    thenTheRun,
  ),
  both(
    'runs.closeAsks',
    fc.record({ run: runName, asks: askIds, state: closing, by: fc.option(runName, { nil: undefined }) }),
    (a, { prefix }) => (side) => side.runs.closeAsks(prefix + a.run, Object.fromEntries(a.asks.map((id) => [id, { state: a.state, ...(a.by ? { closedByRunId: a.by } : {}) }]))),
    thenTheRun,
  ),
  // An answer whose run could not be recorded gives back the asks it closed: it names itself.
  both(
    'runs.reopenAsks',
    fc.record({ run: runName, asks: askIds, state: closing, by: runName }),
    (a, { prefix }) => (side) => side.runs.reopenAsks(prefix + a.run, Object.fromEntries(a.asks.map((id) => [id, { state: a.state, closedByRunId: a.by }]))),
    thenTheRun,
  ),
  both(
    'runs.updateLink',
    fc.record({ run: runName, readIt: fc.boolean(), expectedRev: fc.option(fc.integer({ min: 0, max: 2 }), { nil: undefined }), provider: fc.option(providerName, { nil: undefined }) }),
    (a, w) => {
      // Mostly by a writer that read the link as it is, else by one that read it at another rev.
      const expectedRev = a.readIt ? w.model.runs.get(w.prefix + a.run)?.link?.rev : a.expectedRev;
      const link = { rev: (expectedRev ?? -1) + 1, offers: 1, ...(a.provider ? { providerId: a.provider } : {}) };
      return (side) => side.runs.updateLink(w.prefix + a.run, expectedRev, link);
    },
    thenTheRun,
  ),
  fc
    .record({
      tenant: tenantName,
      thread: fc.option(threadName, { nil: undefined }),
      state: fc.option(fc.constantFrom(TaskStates.SUBMITTED, TaskStates.WORKING, TaskStates.COMPLETED, TaskStates.INPUT_REQUIRED, TaskStates.FAILED, TaskStates.REJECTED), { nil: undefined }),
      limit: fc.constantFrom(-1, 0, 1.5, Number.NaN, 1, 2, 50),
    })
    .map((a) =>
      call('tasks.list', { ...a, limit: String(a.limit) }, async (w) => {
        const tenant = w.prefix + a.tenant;
        const query = { agentId: 'demo', limit: a.limit, ...(a.thread ? { threadId: a.thread } : {}), ...(a.state !== undefined ? { state: a.state } : {}) };
        // The model's listing whole, and the store's page by page: the same tasks in the same order, no page past its limit.
        await same(
          'the tasks listed',
          () => w.model.tasks.list(tenant, { ...query, limit: Number.isInteger(a.limit) && a.limit > 0 ? 1000 : a.limit }).runs.map((run) => run.runId),
          async () => {
            const listed: string[] = [];
            let cursor: string | undefined;
            do {
              const page = await w.store.tasks.list(tenant, { ...query, cursor });
              expect(page.runs.length).toBeLessThanOrEqual(a.limit);
              listed.push(...page.runs.map((run) => run.runId));
              cursor = page.cursor;
            } while (cursor);
            return listed;
          },
        );
      }),
    ),
];

function thenTheRun(w: World, a: { run: string }): Promise<void> {
  return sameRun(w, a.run);
}

/** The run as both read it back, and its task listed under the state its entry has in the model (a store's entry is seen only so). */
async function sameRun(w: World, name: string): Promise<void> {
  const run = w.model.runs.get(w.prefix + name);
  await same('the run', () => run, () => w.store.runs.get(w.prefix + name));
  const entry = run && w.model.tasks.entry(run.rootRunId);
  if (!entry) return;
  const query = { agentId: entry.agentId, state: entry.state, limit: 50 };
  await same(
    `the tasks listed in state ${entry.state}`,
    () => w.model.tasks.list(entry.tenant, query).runs.map((task) => task.runId),
    async () => (await w.store.tasks.list(entry.tenant, query)).runs.map((task) => task.runId),
  );
}

describe(`the record's rules, the reference model's and the ${stores.kind} store's alike`, () => {
  const property = (calls: fc.Arbitrary<Call>[], seedOffset: number) => async () => {
    const store = await stores.freshStore();
    let world = 0;
    await fc.assert(
      fc.asyncProperty(fc.commands(calls, { maxCommands: MOST_CALLS, size: 'max' }), async (sequence) => {
        world += 1;
        const setup = () => {
          const state: World = { model: new ReferenceRecord(recordProjections), store, prefix: `w${world}-`, arrivals: new Map(), roots: new Map(), created: 0 };
          return { model: state, real: state };
        };
        await fc.asyncModelRun(setup, sequence);
      }),
      { seed: SEED + seedOffset, numRuns: RUNS },
    );
      };

  it('gives threads places and arrival numbers by their holders, and an abandoned thread back', property(threadCalls, 1), 120_000);
  it('admits a tenant’s runs by window and places, re-admits a holder, and rolls its spend over by period', property(tenantCalls, 2), 120_000);
  it('frees an expired claim, keeps a provider’s createdAt and places across registrations, and replaces a principal’s keys', property(registryCalls, 3), 120_000);
  it('renews a lease only while it is held, ends one only as it was listed, and lists the lapsed by their end', property(leaseCalls, 5), 120_000);
  it('moves runs, their asks and their links only as the rules allow, never their identity, and lists their tasks as the index says', property(runCalls, 4), 120_000);
});
