import type { RunAgentInput } from '@ag-ui/core';
import { describe, expect, it } from 'vitest';
import { harness, type Harness } from '../support/core-harness.js';
import { useStore } from '../support/stores.js';

const stores = useStore();

/** An agent that ends with an interrupt when asked, and otherwise says what it was answered. */
function interrupting(h: Harness, interrupts: (input: RunAgentInput) => Record<string, unknown>[]) {
  h.provider.script = async function* (input) {
    yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
    if ((input.resume ?? []).length > 0 || input.messages.at(-1)?.role === 'tool') {
      yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId, result: input.resume ?? null };
      return;
    }
    const list = interrupts(input);
    if (list.length === 0) {
      yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId };
      return;
    }
    yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId, outcome: { type: 'interrupt', interrupts: list } };
  };
}

const resolved = (interruptId: string, payload: unknown = { approved: true }) => ({
  interruptId,
  status: 'resolved' as const,
  payload,
});

describe('an interrupt', () => {
  it('leaves the run completed with open asks, answered by a new run naming every interrupt', async () => {
    const h = await harness(await stores.freshStore());
    interrupting(h, () => [
      { id: 'i1', reason: 'confirmation' },
      { id: 'i2', reason: 'confirmation' },
    ]);
    await h.send('/ask');
    await h.settled();
    const asking = await h.store.runs.get('run-1');
    expect(asking).toMatchObject({ status: 'completed', outcome: 'interrupt' });
    expect(Object.values(asking?.asks ?? {}).map((a) => a.state)).toEqual(['open', 'open']);

    const answer = await h.send('yes', { resume: [resolved('i1'), resolved('i2')] });
    expect(answer).toMatchObject({ ok: true, value: { run: { parentRunId: 'run-1', rootRunId: 'run-1' } } });
    await h.settled();
    const closed = await h.store.runs.get('run-1');
    expect(Object.values(closed?.asks ?? {}).map((a) => [a.state, a.closedByRunId])).toEqual([
      ['answered', 'run-2'],
      ['answered', 'run-2'],
    ]);
    expect(h.provider.calls[1].parentRunId).toBe('run-1');
  });

  it('treats a partial answer as an ordinary message and keeps the asks open', async () => {
    const h = await harness(await stores.freshStore());
    interrupting(h, (input) => (input.runId === 'run-1' ? [{ id: 'i1', reason: 'a' }, { id: 'i2', reason: 'b' }] : []));
    await h.send('/ask');
    await h.settled();
    const partial = await h.send('only one', { resume: [resolved('i1')] });
    expect(partial).toMatchObject({ ok: true, value: { run: { rootRunId: 'run-2' } } });
    expect(partial.ok && partial.value.run.parentRunId).toBeUndefined();
    await h.settled();
    const asks = Object.values((await h.store.runs.get('run-1'))?.asks ?? {});
    expect(asks.every((a) => a.state === 'open')).toBe(true);
  });

  it('takes the answer again from the request whose first attempt closed the asks and died before recording its run, and no other', async () => {
    const h = await harness(await stores.freshStore());
    interrupting(h, () => [{ id: 'i1', reason: 'confirmation' }]);
    await h.send('/ask');
    await h.settled();
    // What the first attempt of the answer "answer-1" left: the ask closed for it, and no run.
    await h.store.runs.closeAsks('run-1', { i1: { state: 'answered', closedByRunId: 'answer-1' } });
    expect(await h.send('', { runId: 'other', resume: [resolved('i1')] })).toMatchObject({ ok: false, code: 'no_open_ask' });
    const retried = await h.send('', { runId: 'answer-1', resume: [resolved('i1')] });
    expect(retried).toMatchObject({ ok: true, value: { attached: false, run: { runId: 'answer-1', parentRunId: 'run-1' } } });
    await h.settled();
    expect(await h.store.runs.get('answer-1')).toMatchObject({ status: 'completed' });
    expect((await h.store.threads.get(h.thread))?.unsettled).toBe(0);
  });

  it('takes an answer that arrives before its run is named the thread’s waiting run (the write after the end the caller read)', async () => {
    const h = await harness(await stores.freshStore());
    interrupting(h, () => [{ id: 'i1', reason: 'confirmation' }]);
    await h.send('/ask');
    await h.settled();
    // As the record is between the run's end and the naming of its thread's waiting run.
    await h.store.threads.setWaitingRun(h.thread, 'an-earlier-run');
    expect(await h.send('', { resume: [resolved('i1')] })).toMatchObject({ ok: true, value: { run: { parentRunId: 'run-1' } } });
    await h.settled();
  });

  it('takes such an answer also while the thread’s listing still shows the run as it was before its end (an index that lags a write)', async () => {
    const store = await stores.freshStore();
    const h = await harness(store);
    interrupting(h, () => [{ id: 'i1', reason: 'confirmation' }]);
    await h.send('/ask');
    await h.settled();
    await h.store.threads.setWaitingRun(h.thread, 'an-earlier-run');
    // DynamoDB's byThread index, a moment behind the run's end: running, no asks yet.
    const list = store.runs.listOfThread.bind(store.runs);
    store.runs.listOfThread = async (thread) => (await list(thread)).map(({ asks: _asks, ...run }) => ({ ...run, status: 'running' as const }));
    expect(await h.send('', { resume: [resolved('i1')] })).toMatchObject({ ok: true, value: { run: { parentRunId: 'run-1' } } });
    await h.settled();
  });

  it('refuses a resume with nothing open as no_open_ask', async () => {
    const h = await harness(await stores.freshStore());
    await h.send('hello');
    await h.settled();
    expect(await h.send('yes', { resume: [resolved('nothing')] })).toMatchObject({ ok: false, code: 'no_open_ask' });
    expect(await h.store.runs.get('run-2')).toBeUndefined();
  });

  it('lets exactly one of fifty concurrent answers win; the others get no_open_ask', async () => {
    const h = await harness(await stores.freshStore());
    interrupting(h, () => [{ id: 'i1', reason: 'confirmation' }]);
    await h.send('/ask');
    await h.settled();
    const answers = await Promise.all(Array.from({ length: 50 }, () => h.send('yes', { resume: [resolved('i1')] })));
    expect(answers.filter((a) => a.ok)).toHaveLength(1);
    expect(answers.filter((a) => !a.ok && a.code === 'no_open_ask')).toHaveLength(49);
    await h.settled();
    const children = (await h.store.runs.listOfThread(h.thread)).filter((r) => r.parentRunId === 'run-1');
    expect(children).toHaveLength(1);
  });

  it('expires at its expiresAt, and a later answer gets interrupt_expired', async () => {
    const h = await harness(await stores.freshStore());
    const expiresAt = new Date(h.clock.now() + 60_000).toISOString();
    interrupting(h, () => [{ id: 'i1', reason: 'confirmation', expiresAt }]);
    await h.send('/ask');
    await h.settled();
    expect(h.timer.armed.get('run-1')).toBe(expiresAt);

    h.clock.ms += 30_000;
    await h.gateway.expireAsks('run-1');
    expect((await h.store.runs.get('run-1'))?.asks?.i1.state).toBe('open');

    h.clock.ms += 30_000;
    await h.gateway.expireAsks('run-1');
    expect((await h.store.runs.get('run-1'))?.asks?.i1.state).toBe('expired');
    expect(await h.send('too late', { resume: [resolved('i1')] })).toMatchObject({ ok: false, code: 'interrupt_expired' });
  });

  it('refuses an answer that arrives after expiresAt even before the timer fired', async () => {
    const h = await harness(await stores.freshStore());
    const expiresAt = new Date(h.clock.now() + 1_000).toISOString();
    interrupting(h, () => [{ id: 'i1', reason: 'confirmation', expiresAt }]);
    await h.send('/ask');
    await h.settled();
    h.clock.ms += 5_000;
    expect(await h.send('late', { resume: [resolved('i1')] })).toMatchObject({ ok: false, code: 'interrupt_expired' });
    expect((await h.store.runs.get('run-1'))?.asks?.i1.state).toBe('expired');
  });

  it('closes an ask as cancelled when its resume entry says cancelled', async () => {
    const h = await harness(await stores.freshStore());
    interrupting(h, () => [{ id: 'i1', reason: 'confirmation' }]);
    await h.send('/ask');
    await h.settled();
    const answer = await h.send('never mind', { resume: [{ interruptId: 'i1', status: 'cancelled' }] });
    expect(answer.ok).toBe(true);
    await h.settled();
    expect((await h.store.runs.get('run-1'))?.asks?.i1).toMatchObject({ state: 'cancelled', closedByRunId: 'run-2' });
  });

  it('never refuses an answer for a full thread queue', async () => {
    const h = await harness(await stores.freshStore(), { threadQueueLimit: 0 });
    interrupting(h, () => [{ id: 'i1', reason: 'confirmation' }]);
    await h.send('/ask');
    await h.settled();
    await h.store.threads.reserveArrival(h.thread, 'another', 1);
    expect(await h.send('ordinary')).toMatchObject({ ok: false, code: 'thread_queue_full' });
    expect((await h.send('yes', { resume: [resolved('i1')] })).ok).toBe(true);
    await h.settled();
  });
});

describe('a tool call left without a result', () => {
  it('is an open ask, answered by a tool message naming it', async () => {
    const h = await harness(await stores.freshStore());
    h.provider.script = async function* (input) {
      yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
      if (input.messages.at(-1)?.role !== 'tool') {
        yield { type: 'TOOL_CALL_START', toolCallId: 'tc1', toolCallName: 'confirm' };
        yield { type: 'TOOL_CALL_ARGS', toolCallId: 'tc1', delta: '{}' };
        yield { type: 'TOOL_CALL_END', toolCallId: 'tc1' };
      }
      yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId };
    };
    await h.send('/tool');
    await h.settled();
    const asking = await h.store.runs.get('run-1');
    expect(asking).toMatchObject({ status: 'completed', outcome: 'success' });
    expect(asking?.asks?.tc1).toMatchObject({ kind: 'tool_call', state: 'open', toolCallName: 'confirm' });

    const answer = await h.gateway.startRun({
      agentId: 'scripted',
      door: 'agui',
      principal: { id: 'anonymous', tenant: 'anonymous' },
      input: {
        ...h.input('unused'),
        messages: [{ id: 'tool-msg', role: 'tool', toolCallId: 'tc1', content: 'done' }],
      },
    });
    expect(answer).toMatchObject({ ok: true, value: { run: { parentRunId: 'run-1' } } });
    await h.settled();
    expect((await h.store.runs.get('run-1'))?.asks?.tc1.state).toBe('answered');
  });

  it('is not an ask when the run itself returned its result', async () => {
    const h = await harness(await stores.freshStore());
    h.provider.script = async function* (input) {
      yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
      yield { type: 'TOOL_CALL_START', toolCallId: 'tc1', toolCallName: 'search' };
      yield { type: 'TOOL_CALL_END', toolCallId: 'tc1' };
      yield { type: 'TOOL_CALL_RESULT', messageId: 'r1', toolCallId: 'tc1', content: 'found' };
      yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId };
    };
    await h.send('search');
    await h.settled();
    expect((await h.store.runs.get('run-1'))?.asks).toBeUndefined();
  });
});
