import type { RunAgentInput } from '@ag-ui/core';
import { describe, expect, it } from 'vitest';
import type { Agent, Prices, Principal } from '../../lambdas/core/model.js';
import type { RunStore } from '../../lambdas/core/ports.js';
import type { UsageRecord } from '../../lambdas/core/usage.js';
import { text, userMessage } from '../support/a2a.js';
import { eventually, harness, TEST_AGENT, type Harness } from '../support/core-harness.js';
import { useStore } from '../support/stores.js';

const dynamo = useStore();
const ALICE: Principal = { id: 'alice', tenant: 'acme' };

const PRICES: Prices = {
  currency: 'USD',
  perRun: 0.01,
  perRunningSecond: 0.001,
  perThousandTokens: { 'gpt-x': { input: 1, output: 2, cachedInput: 0.5 }, '*': { input: 0.1, output: 0.2 } },
};
const PRICED: Agent = { ...TEST_AGENT, prices: PRICES };

const TWO_MODELS = [
  { provider: 'openai', model: 'gpt-x', inputTokens: 1000, outputTokens: 500, totalTokens: 1500, cachedInputTokens: 200 },
  { provider: 'anthropic', model: 'claude-y', inputTokens: 100, outputTokens: 50 },
];

/**
 * An agent whose last message says what to do: `finish` (usage for two models on RUN_FINISHED,
 * after 2 s), `error` (usage on RUN_ERROR), `silent` (no usage), `hold` (until cancelled, then
 * RUN_FINISHED cancelled with partial usage), `/ask` (an interrupt, with usage); an answer says
 * what it was answered, with usage.
 */
function usageAgent(h: Harness) {
  h.provider.script = async function* (input: RunAgentInput, signal: AbortSignal) {
    const { threadId, runId } = input;
    const said = String(input.messages.findLast((m) => m.role === 'user')?.content ?? '');
    yield { type: 'RUN_STARTED', threadId, runId };
    if ((input.resume ?? []).length > 0) {
      h.clock.advance(1_000);
      yield { type: 'RUN_FINISHED', threadId, runId, usage: [{ provider: 'openai', model: 'gpt-x', inputTokens: 40, outputTokens: 10 }] };
      return;
    }
    switch (said) {
      case 'finish':
        h.clock.advance(2_000);
        yield { type: 'RUN_FINISHED', threadId, runId, usage: TWO_MODELS };
        return;
      case 'error':
        yield { type: 'RUN_ERROR', message: 'the model refused', code: 'model_refused', usage: [{ provider: 'openai', model: 'gpt-x', inputTokens: 10, outputTokens: 0 }] };
        return;
      case 'silent':
        yield { type: 'RUN_FINISHED', threadId, runId };
        return;
      case 'long end':
        // A result too large to sit beside the run's input on its record: the end goes to the log.
        yield { type: 'RUN_FINISHED', threadId, runId, result: 'r'.repeat(150_000), usage: TWO_MODELS };
        return;
      case 'hostile':
        yield {
          type: 'RUN_FINISHED',
          threadId,
          runId,
          usage: [
            { provider: 'x', model: 'tiny', inputTokens: 1e-200 },
            { provider: 'x', model: 'huge', outputTokens: 1e300 },
            { provider: 'x', model: 'half', totalTokens: 1.5 },
            { provider: 'x', model: 'fine', inputTokens: 7 },
          ],
        };
        return;
      case 'hold':
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        yield { type: 'RUN_FINISHED', threadId, runId, outcome: { type: 'cancelled' }, usage: [{ provider: 'openai', model: 'gpt-x', inputTokens: 300, outputTokens: 20 }] };
        return;
      case '/ask':
        yield {
          type: 'RUN_FINISHED',
          threadId,
          runId,
          outcome: { type: 'interrupt', interrupts: [{ id: 'i1', reason: 'confirm' }] },
          usage: [{ provider: 'openai', model: 'gpt-x', inputTokens: 60, outputTokens: 5 }],
        };
        return;
    }
  };
}

async function priced(store?: RunStore): Promise<Harness> {
  const h = await harness(store ?? (await dynamo.freshStore()));
  await h.store.agents.put(PRICED);
  usageAgent(h);
  return h;
}

const sendAs = (h: Harness, principal: Principal, said: string, threadId: string) =>
  h.gateway.startRun({ agentId: TEST_AGENT.id, input: h.input(said, { threadId }), door: 'agui', principal });

async function records(h: Harness, tenant = ALICE.tenant): Promise<UsageRecord[]> {
  const page = await h.gateway.usage.page({ tenant, from: '2025-01-01T00:00:00.000Z', to: '2027-01-01T00:00:00.000Z', limit: 100 });
  if (!page.ok) throw new Error(page.message);
  return page.value.records;
}

describe('a usage record', () => {
  it('is written for every run as it settles: outcome, times, log, the tokens reported per model, the cost from the prices', async () => {
    const h = await priced();
    for (const [said, threadId] of [['finish', 't1'], ['error', 't2'], ['silent', 't3']] as const) {
      expect(await sendAs(h, ALICE, said, threadId)).toMatchObject({ ok: true });
      await h.settled();
    }
    const [finished, errored, silent] = await records(h);

    expect(finished).toEqual({
      runId: 'run-1',
      tenant: 'acme',
      principal: 'alice',
      agentId: 'scripted',
      threadId: 't1',
      rootRunId: 'run-1',
      door: 'agui',
      outcome: 'success',
      acceptedAt: '2026-01-01T00:00:00.000Z',
      startedAt: '2026-01-01T00:00:00.000Z',
      endedAt: '2026-01-01T00:00:02.000Z',
      queuedMs: 0,
      runningMs: 2_000,
      events: 2,
      bytes: expect.any(Number),
      tokens: TWO_MODELS,
      // 0.01 per run + 2 s × 0.001 + gpt-x (800 input × 1 + 200 cached × 0.5 + 500 output × 2) / 1,000 + claude-y at "*" (100 × 0.1 + 50 × 0.2) / 1,000
      cost: { amount: 1.932, currency: 'USD' },
    });
    const log = await h.events('run-1');
    expect(finished.bytes).toBe(log.reduce((sum, stored) => sum + Buffer.byteLength(JSON.stringify(stored.event)), 0));
    expect(errored).toMatchObject({ outcome: 'failed', code: 'model_refused', tokens: [{ provider: 'openai', model: 'gpt-x', inputTokens: 10, outputTokens: 0 }], cost: { amount: 0.02, currency: 'USD' } });
    // No usage reported: no tokens at all, never zeros; the cost is the run's alone.
    expect(silent).not.toHaveProperty('tokens');
    expect(silent.cost).toEqual({ amount: 0.01, currency: 'USD' });
  });

  it('is written, with no tokens, for a run whose agent reports counts that are not whole numbers (1e-200, 1e300, 1.5): AG-UI refuses such an event', async () => {
    const h = await priced();
    await sendAs(h, ALICE, 'hostile', 't1');
    await h.settled();
    const [record] = await records(h);
    expect(record).toMatchObject({ outcome: 'failed', code: 'provider_sent_malformed_event', cost: { amount: 0.01, currency: 'USD' } });
    expect(record).not.toHaveProperty('tokens');
  });

  it('is written for a cancelled run with the partial usage its agent reported, and for an agent without prices with no cost', async () => {
    const h = await priced();
    await h.store.agents.put({ ...TEST_AGENT, id: 'free' });
    await sendAs(h, ALICE, 'hold', 't1');
    await eventually(async () => expect((await h.store.runs.get('run-1'))?.status).toBe('running'));
    await h.gateway.cancelRun('run-1', ALICE);
    await h.settled();
    await h.gateway.startRun({ agentId: 'free', input: h.input('silent', { threadId: 't2' }), door: 'agui', principal: ALICE });
    await h.settled();

    const [cancelled, free] = await records(h);
    expect(cancelled).toMatchObject({ outcome: 'cancelled', tokens: [{ model: 'gpt-x', inputTokens: 300, outputTokens: 20 }], cost: { amount: 0.35, currency: 'USD' } });
    expect(free).toMatchObject({ agentId: 'free', outcome: 'success' });
    expect(free).not.toHaveProperty('cost');
  });

  it('counts the tokens of an end too large to sit beside the run’s input, whose closing events go to the log', async () => {
    const h = await priced();
    const input = h.input('long end', { threadId: 't1' });
    input.messages.unshift({ id: 'context', role: 'user', content: 'c'.repeat(300_000) });
    expect(await h.gateway.startRun({ agentId: TEST_AGENT.id, input, door: 'agui', principal: ALICE })).toMatchObject({ ok: true });
    await h.settled();
    const run = await h.store.runs.get('run-1');
    expect(run).toMatchObject({ status: 'completed', lastSeq: 2 });
    expect(run?.closingEvents).toBeUndefined();
    expect((await h.events('run-1')).map((stored) => stored.event.type)).toEqual(['RUN_STARTED', 'RUN_FINISHED']);
    const [record] = await records(h);
    expect(record).toMatchObject({ outcome: 'success', tokens: TWO_MODELS });
    expect(record.cost?.amount).toBeGreaterThan(1.9);
  });

  it('is completed by a restart when its writer stopped right after the end was written, also when the closing events went to the log', async () => {
    const store = await dynamo.freshStore();
    let dying = true;
    const release = store.threads.releasePlace.bind(store.threads);
    store.threads.releasePlace = async (thread, holder) => {
      // The process died here: nothing after this write happens.
      if (dying) return new Promise<never>(() => {});
      return release(thread, holder);
    };
    const h = await priced(store);
    const input = h.input('long end', { threadId: 't1' });
    input.messages.unshift({ id: 'context', role: 'user', content: 'c'.repeat(300_000) });
    await h.gateway.startRun({ agentId: TEST_AGENT.id, input, door: 'agui', principal: ALICE });
    await eventually(async () => expect((await h.store.runs.get('run-1'))?.status).toBe('completed'));
    expect(await records(h)).toEqual([]);

    dying = false;
    await h.gateway.recover();
    expect((await h.store.threads.get({ tenant: ALICE.tenant, threadId: 't1' }))?.unsettled).toBe(0);
    expect(await records(h)).toMatchObject([{ runId: 'run-1', tokens: TWO_MODELS }]);
    expect((await h.store.runs.get('run-1'))?.closingEvents).toBeUndefined();
  });

  it('is written once: a repeated settle, a redelivered dispatch and a restart write nothing new and charge nothing twice', async () => {
    const h = await priced();
    await h.gateway.usage.setBudget(ALICE.tenant, { period: 'month', tokens: 1_000_000 });
    await sendAs(h, ALICE, 'finish', 't1');
    await h.settled();
    expect(await h.gateway.dispatchRun('run-1')).toBe('skipped');
    await h.gateway.recover();
    expect(await h.store.usage.put((await records(h))[0])).toBe(false);
    // The end's work done again, as a restart does for a record that still holds its closing events.
    const terminal = (await h.events('run-1')).at(-1)!.event;
    await h.store.runs.transition('run-1', ['completed'], { status: 'completed', closingEvents: [terminal] });
    await h.gateway.recover();
    expect((await h.store.runs.get('run-1'))?.closingEvents).toBeUndefined();

    expect(await records(h)).toHaveLength(1);
    const tenant = await h.gateway.usage.tenant(ALICE.tenant);
    expect(tenant.budget?.spent.tokens).toBe(1650);
  });

  it('is written for a run whose settle was cut short, when the gateway starts again', async () => {
    const store = await dynamo.freshStore();
    let failing = true;
    const put = store.usage.put.bind(store.usage);
    store.usage.put = async (record) => {
      if (failing) throw new Error('the store went away');
      return put(record);
    };
    const h = await priced(store);
    await sendAs(h, ALICE, 'finish', 't1');
    await h.settled();
    expect((await h.store.runs.get('run-1'))?.closingEvents).toHaveLength(1);
    expect(await records(h)).toEqual([]);

    failing = false;
    await h.gateway.recover();
    expect((await records(h)).map((record) => record.runId)).toEqual(['run-1']);
    expect((await h.store.runs.get('run-1'))?.closingEvents).toBeUndefined();
  });
});

describe('usage, summed', () => {
  it('sums by agent, day and model exactly, and an A2A task carries the sum over its lineage', async () => {
    const h = await priced();
    await h.store.agents.put({ ...TEST_AGENT, id: 'free' });
    await sendAs(h, ALICE, 'finish', 't1'); // day 1, priced, two models
    await h.settled();
    h.clock.advance(86_400_000);
    await h.gateway.startRun({ agentId: 'free', input: h.input('error', { threadId: 't2' }), door: 'agui', principal: ALICE }); // day 2
    await h.settled();
    const caller = { agentId: TEST_AGENT.id, principal: ALICE };
    const asked = await h.gateway.tasks.sendMessage({ ...caller, message: userMessage('/ask') }); // day 2, an interrupt
    if (!asked.ok) throw new Error(asked.message);
    await h.settled();
    const answered = await h.gateway.tasks.sendMessage({ ...caller, message: userMessage([text('yes')], { taskId: asked.value.root.runId }) });
    expect(answered).toMatchObject({ ok: true });
    await h.settled();

    const range = { tenant: ALICE.tenant, from: '2026-01-01T00:00:00.000Z', to: '2026-02-01T00:00:00.000Z' };
    const report = await h.gateway.usage.report(range, ['agent', 'day', 'model']);
    expect(report.totals).toMatchObject({
      runs: 4,
      tokens: [
        { provider: 'openai', model: 'gpt-x', inputTokens: 1110, outputTokens: 515, totalTokens: 1500, cachedInputTokens: 200 },
        { provider: 'anthropic', model: 'claude-y', inputTokens: 100, outputTokens: 50 },
      ],
    });
    const groups = report.groups!.map(({ agent, day, model, runs, tokens }) => [agent, day, model, runs, tokens?.map((t) => [t.model, t.inputTokens, t.outputTokens])]);
    // By day, then agent, then model.
    expect(groups).toEqual([
      ['scripted', '2026-01-01', 'claude-y', 1, [['claude-y', 100, 50]]],
      ['scripted', '2026-01-01', 'gpt-x', 1, [['gpt-x', 1000, 500]]],
      ['free', '2026-01-02', 'gpt-x', 1, [['gpt-x', 10, 0]]],
      ['scripted', '2026-01-02', 'gpt-x', 2, [['gpt-x', 100, 15]]],
    ]);
    const byAgent = await h.gateway.usage.report(range, ['agent']);
    // scripted: the first run's 1.932, the ask's 0.08 (0.01 + 60 input × 1 / 1,000 + 5 output × 2 / 1,000) and
    // the answer's 0.071 (0.01 + 1 s × 0.001 + 40 × 1 / 1,000 + 10 × 2 / 1,000): 2.083; the free agent has no prices.
    expect(byAgent.groups!.map((g) => [g.agent, g.runs, g.cost])).toEqual([
      ['free', 1, undefined],
      ['scripted', 3, [{ amount: 2.083, currency: 'USD' }]],
    ]);

    const task = await h.gateway.tasks.getTask(caller, asked.value.root.runId);
    if (!task.ok) throw new Error(task.message);
    expect((task.value.metadata as { funduq: { usage: unknown } }).funduq.usage).toMatchObject({
      runs: 2,
      tokens: [{ provider: 'openai', model: 'gpt-x', inputTokens: 100, outputTokens: 15 }],
      // The ask's 0.08 and the answer's 0.071.
      cost: [{ amount: 0.151, currency: 'USD' }],
    });
  });

  it('shows no tenant another tenant’s usage', async () => {
    const h = await priced();
    await sendAs(h, ALICE, 'finish', 't1');
    await h.settled();
    expect(await records(h, 'globex')).toEqual([]);
    const report = await h.gateway.usage.report({ tenant: 'globex', from: '2026-01-01T00:00:00.000Z', to: '2026-02-01T00:00:00.000Z' }, ['agent']);
    expect(report.totals).toEqual({ runs: 0, events: 0, bytes: 0 });
  });
});

describe('a budget', () => {
  it('refuses the run after the one that spent it, until the period ends, and records which run crossed it', async () => {
    const h = await priced();
    await h.gateway.usage.setBudget(ALICE.tenant, { period: 'day', tokens: 2_000 });
    await sendAs(h, ALICE, 'finish', 't1'); // 1,650 tokens
    await h.settled();
    await sendAs(h, ALICE, 'error', 't2'); // 10: 1,660
    await h.settled();
    h.clock.advance(3_600_000);
    await sendAs(h, ALICE, 'finish', 't3'); // 3,310: crosses
    await h.settled();

    const refused = await sendAs(h, ALICE, 'silent', 't4');
    // 2026-01-01T01:00:04Z (two runs of 2 s, an hour between), so the day ends in 22 h 59 min 56 s.
    expect(refused).toEqual({ ok: false, code: 'tenant_budget_exhausted', message: 'tenant "acme" has spent its budget for 2026-01-01 (3310 of 2000 tokens)', retryAfterSeconds: 82_796 });
    expect((await h.gateway.usage.tenant(ALICE.tenant)).budget).toMatchObject({
      period: 'day',
      tokens: 2_000,
      current: '2026-01-01',
      spent: { tokens: 3310 },
      left: { tokens: 0 },
      exhausted: true,
      crossedByRunId: 'run-3',
      resetsAt: '2026-01-02T00:00:00.000Z',
    });
    // Another tenant is not limited by it.
    expect(await sendAs(h, { id: 'bob', tenant: 'globex' }, 'silent', 't5')).toMatchObject({ ok: true });
    await h.settled();
    h.clock.advance(86_400_000);
    expect(await sendAs(h, ALICE, 'silent', 't6')).toMatchObject({ ok: true });
    await h.settled();
  });

  it('starts from what the tenant has spent this period when it is set mid-period', async () => {
    const h = await priced();
    await sendAs(h, ALICE, 'finish', 't1');
    await h.settled();
    await h.gateway.usage.setBudget(ALICE.tenant, { period: 'month', tokens: 1_000 });
    expect(await sendAs(h, ALICE, 'silent', 't2')).toMatchObject({ ok: false, code: 'tenant_budget_exhausted' });
    await h.gateway.usage.setBudget(ALICE.tenant, null);
    expect(await sendAs(h, ALICE, 'silent', 't3')).toMatchObject({ ok: true });
    await h.settled();
  });

  it('lets concurrent starts overshoot by no more than the runs already in flight', async () => {
    const h = await priced();
    await h.gateway.usage.setBudget(ALICE.tenant, { period: 'month', tokens: 1_700 });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    h.provider.script = async function* (input: RunAgentInput) {
      yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
      await held;
      yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId, usage: TWO_MODELS };
    };
    const wave = await Promise.all(Array.from({ length: 10 }, (_, i) => sendAs(h, ALICE, 'go', `w${i}`)));
    expect(wave.every((started) => started.ok)).toBe(true);
    release();
    await h.settled();
    const spent = (await h.gateway.usage.tenant(ALICE.tenant)).budget!.spent.tokens;
    // Ten runs in flight when the budget was crossed: the overshoot is theirs, and no more.
    expect(spent).toBe(10 * 1650);
    const after = await Promise.all(Array.from({ length: 5 }, (_, i) => sendAs(h, ALICE, 'go', `a${i}`)));
    expect(after.map((started) => started.ok)).toEqual([false, false, false, false, false]);
  });
});
