import { describe, expect, it } from 'vitest';
import { ANONYMOUS } from '../../lambdas/core/model.js';
import type { RunStore } from '../../lambdas/core/ports.js';
import { text, userMessage } from '../support/a2a.js';
import { harness, TEST_AGENT, type Harness } from '../support/core-harness.js';
import { aroundCalls, useStore } from '../support/stores.js';

const stores = useStore();

/** The store with a count of each of its reads and writes. */
function counting(store: RunStore, counts: Map<string, number>): RunStore {
  return aroundCalls(store, (call, _args, invoke) => {
    counts.set(call, (counts.get(call) ?? 0) + 1);
    return invoke();
  });
}

/** An agent that asks for a confirmation, and finishes once answered. */
function confirming(h: Harness): void {
  h.provider.script = async function* (input) {
    yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
    const outcome = (input.resume ?? []).length > 0 ? { type: 'success' } : { type: 'interrupt', interrupts: [{ id: 'i1', reason: 'confirm' }] };
    yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId, outcome };
  };
}

describe('an A2A SendMessage that answers a waiting task', () => {
  it('reads the agent once and the thread once on its way to the answer run', async () => {
    const counts = new Map<string, number>();
    const h = await harness(counting(await stores.freshStore(), counts));
    confirming(h);
    const caller = { agentId: TEST_AGENT.id, principal: ANONYMOUS };
    const asked = await h.gateway.tasks.sendMessage({ ...caller, message: userMessage('confirm?') });
    if (!asked.ok) throw new Error(asked.message);
    await h.settled();

    counts.clear();
    const answered = await h.gateway.tasks.sendMessage({
      ...caller,
      message: userMessage([text('yes')], { taskId: asked.value.root.runId, contextId: asked.value.root.threadId }),
    });
    expect(answered).toMatchObject({ ok: true, value: { run: { parentRunId: asked.value.root.runId } } });
    expect({ getAgent: counts.get('agents.get'), getThread: counts.get('threads.get') }).toEqual({ getAgent: 1, getThread: 1 });
    // Through a door, which read the agent for its card, the send reads it no more.
    const agent = await h.store.agents.get(TEST_AGENT.id);
    const again = await h.gateway.tasks.sendMessage({ ...caller, agent, message: userMessage('confirm again?') });
    if (!again.ok) throw new Error(again.message);
    await h.settled();
    const asked2 = again.value.root;
    counts.clear();
    const reply = await h.gateway.tasks.sendMessage({ ...caller, agent, message: userMessage([text('yes')], { taskId: asked2.runId, contextId: asked2.threadId }) });
    expect(reply).toMatchObject({ ok: true });
    expect({ getAgent: counts.get('agents.get') ?? 0, getThread: counts.get('threads.get') }).toEqual({ getAgent: 0, getThread: 1 });
    await h.settled();
    expect((await h.store.runs.get(answered.ok ? answered.value.run.runId : ''))?.status).toBe('completed');
  });

  it('is taken again from a retry of the same message whose first attempt closed the asks and died before recording its run', async () => {
    const h = await harness(await stores.freshStore());
    confirming(h);
    const caller = { agentId: TEST_AGENT.id, principal: ANONYMOUS };
    const asked = await h.gateway.tasks.sendMessage({ ...caller, message: userMessage('confirm?') });
    if (!asked.ok) throw new Error(asked.message);
    await h.settled();
    const { root } = asked.value;
    const reply = userMessage([text('yes')], { taskId: root.runId, contextId: root.threadId });
    // What the first attempt left: the message's id claimed for its run, the ask closed for it, no run.
    const key = JSON.stringify([ANONYMOUS.tenant, TEST_AGENT.id, root.threadId, reply.messageId]);
    await h.store.claims.take({ key, runId: 'first-attempt', threadId: root.threadId, expiresAt: Math.floor(Date.now() / 1000) + 3600 }, Math.floor(Date.now() / 1000));
    await h.store.runs.closeAsks(root.runId, { i1: { state: 'answered', closedByRunId: 'first-attempt' } });

    const other = await h.gateway.tasks.sendMessage({ ...caller, message: userMessage([text('no')], { taskId: root.runId, contextId: root.threadId }) });
    expect(other).toMatchObject({ ok: false, code: 'no_open_ask' });
    const retried = await h.gateway.tasks.sendMessage({ ...caller, message: reply });
    expect(retried).toMatchObject({ ok: true, value: { run: { runId: 'first-attempt', parentRunId: root.runId } } });
    await h.settled();
    expect((await h.store.runs.get('first-attempt'))?.status).toBe('completed');
  });
});
