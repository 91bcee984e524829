import { describe, expect, it } from 'vitest';
import type { Principal } from '../../lambdas/core/model.js';
import { Gate, harness, replyEvents, TEST_AGENT, type Harness } from '../support/core-harness.js';
import { useStore } from '../support/stores.js';

const { freshStore } = useStore();

const OTHER_AGENT = { ...TEST_AGENT, id: 'scripted-two' };

async function start(h: Harness, principal: Principal, threadId: string, runId: string, agentId = TEST_AGENT.id) {
  const started = await h.gateway.startRun({ agentId, input: h.input('hello', { threadId, runId }), door: 'agui', principal });
  if (!started.ok) throw new Error(started.message);
  return started.value.run;
}

describe('what an operator reads across tenants', () => {
  it('lists threads by last activity, filtered by tenant, agent and state, a page at a time, and nothing twice', async () => {
    const h = await harness(await freshStore());
    await h.gateway.putAgent(OTHER_AGENT);
    const gate = new Gate();
    h.provider.script = async function* (input) {
      if (input.threadId === 'held') await gate.wait;
      yield* replyEvents(input, 'ok');
    };
    const alice: Principal = { id: 'p', tenant: 'alice' };
    const bob: Principal = { id: 'p', tenant: 'bob' };
    // Seven settled threads, a second apart, of two tenants and two agents.
    for (let i = 0; i < 7; i++) {
      await start(h, i % 2 === 0 ? alice : bob, `t${i}`, `r${i}`, i < 5 ? TEST_AGENT.id : OTHER_AGENT.id);
      await h.settled();
      h.clock.advance(1000);
    }
    const held = await start(h, alice, 'held', 'r-held');

    const ids = async (query: Parameters<typeof h.gateway.operator.threads>[0]) => {
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await h.gateway.operator.threads({ ...query, ...(cursor ? { cursor } : {}) });
        expect(page.threads.length).toBeLessThanOrEqual(query.limit);
        seen.push(...page.threads.map((thread) => `${thread.tenant}/${thread.threadId}`));
        cursor = page.cursor;
      } while (cursor);
      return seen;
    };
    // The held thread has not settled since it was made: it sorts by its creation, the latest.
    expect(await ids({ limit: 3 })).toEqual(['alice/held', 'alice/t6', 'bob/t5', 'alice/t4', 'bob/t3', 'alice/t2', 'bob/t1', 'alice/t0']);
    expect(await ids({ limit: 2, tenant: 'bob' })).toEqual(['bob/t5', 'bob/t3', 'bob/t1']);
    expect(await ids({ limit: 10, agentId: OTHER_AGENT.id })).toEqual(['alice/t6', 'bob/t5']);
    expect(await ids({ limit: 10, state: 'active' })).toEqual(['alice/held']);
    expect(await ids({ limit: 2, state: 'idle', tenant: 'alice' })).toEqual(['alice/t6', 'alice/t4', 'alice/t2', 'alice/t0']);
    await expect(h.gateway.operator.threads({ limit: 2, cursor: 'not-a-cursor' })).rejects.toThrow(RangeError);

    const overview = await h.gateway.operator.overview();
    expect(overview.runs.running.count + overview.runs.queued.count).toBe(1);
    expect(overview.recent[0]).toMatchObject({ thread: { threadId: 'held' }, latest: { runId: held.runId } });
    // Tenants come from the latest threads: a budget puts its tenant first, by the share spent.
    await h.gateway.usage.setBudget('bob', { period: 'month', tokens: 1000 });
    expect((await h.gateway.operator.tenants(['carol'])).map((spend) => [spend.tenant, spend.share])).toEqual([
      ['bob', 0],
      ['alice', undefined],
      ['carol', undefined],
    ]);

    // A cancel by filter names nothing without a filter, and only what the filter says with one.
    expect((await h.gateway.operator.runsMatching({})).runs).toEqual([]);
    expect((await h.gateway.operator.runsMatching({ tenant: 'bob' })).runs).toEqual([]);
    expect((await h.gateway.operator.runsMatching({ tenant: 'alice' })).runs.map((run) => run.runId)).toEqual([held.runId]);
    gate.open();
    await h.settled();
    expect((await h.gateway.operator.runsMatching({ tenant: 'alice' })).runs).toEqual([]);
    expect((await h.gateway.operator.events(held.runId, 0, 2)).map((event) => event.seq)).toEqual([1, 2]);
  });
});
