import { describe, expect, it } from 'vitest';
import { ANONYMOUS } from '../../lambdas/core/model.js';
import { eventually, Gate, harness, replyEvents } from '../support/core-harness.js';
import { useStore } from '../support/stores.js';

const stores = useStore();

describe('cancel', () => {
  it('cancels a queued run at once; it never reaches the agent and its stream ends cancelled', async () => {
    const h = await harness(await stores.freshStore());
    const gate = new Gate();
    h.provider.script = async function* (input) {
      await gate.wait;
      yield* replyEvents(input, 'ok');
    };
    await h.send('first');
    await h.send('second');
    const cancelled = await h.gateway.cancelRun('run-2', ANONYMOUS);
    expect(cancelled).toMatchObject({ ok: true, value: { status: 'cancelled', reason: 'cancelled_while_queued' } });
    gate.open();
    await h.settled();
    expect(h.provider.calls.map((c) => c.runId)).toEqual(['run-1']);
    expect((await h.events('run-2')).map((e) => e.event)).toEqual([
      { type: 'RUN_STARTED', threadId: 'thread-1', runId: 'run-2' },
      { type: 'RUN_FINISHED', threadId: 'thread-1', runId: 'run-2', outcome: { type: 'cancelled' } },
    ]);
    expect((await h.store.threads.get(h.thread))?.unsettled).toBe(0);
  });

  it('asks a running agent to stop; the run ends cancelled with its open message closed', async () => {
    const h = await harness(await stores.freshStore());
    let stopped = false;
    h.provider.script = async function* (input, signal) {
      yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
      yield { type: 'TEXT_MESSAGE_START', messageId: 'm', role: 'assistant' };
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      stopped = true;
    };
    await h.send('long');
    await eventually(async () => expect((await h.events('run-1')).length).toBe(2));
    const cancelling = await h.gateway.cancelRun('run-1', ANONYMOUS);
    expect(cancelling).toMatchObject({ ok: true, value: { status: 'cancelling', cancelRequested: true } });
    await h.settled();
    expect(stopped).toBe(true);
    expect(await h.store.runs.get('run-1')).toMatchObject({ status: 'cancelled', reason: 'cancel_requested' });
    expect((await h.events('run-1')).map((e) => e.event.type)).toEqual([
      'RUN_STARTED',
      'TEXT_MESSAGE_START',
      'TEXT_MESSAGE_END',
      'RUN_FINISHED',
    ]);
  });

  it('records a run completed when its agent finishes anyway after a cancel', async () => {
    const h = await harness(await stores.freshStore());
    const gate = new Gate();
    h.provider.script = async function* (input) {
      yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
      await gate.wait;
      yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId };
    };
    await h.send('stubborn');
    await eventually(async () => expect((await h.store.runs.get('run-1'))?.status).toBe('running'));
    // The cancel is recorded and the agent asked to stop; this agent does not listen and finishes.
    expect(await h.gateway.cancelRun('run-1', ANONYMOUS)).toMatchObject({ ok: true, value: { status: 'cancelling' } });
    gate.open();
    await h.settled();
    expect(await h.store.runs.get('run-1')).toMatchObject({ status: 'completed', outcome: 'success', cancelRequested: true });
  });

  it('records exactly one cancel of twenty concurrent requests', async () => {
    const h = await harness(await stores.freshStore());
    const gate = new Gate();
    h.provider.script = async function* (input) {
      yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
      await gate.wait;
    };
    await h.send('x');
    await eventually(async () => expect((await h.store.runs.get('run-1'))?.status).toBe('running'));
    const results = await Promise.all(Array.from({ length: 20 }, () => h.gateway.cancelRun('run-1', ANONYMOUS)));
    expect(results.every((r) => r.ok && r.value.status === 'cancelling')).toBe(true);
    gate.open();
    await h.settled();
    const finished = (await h.events('run-1')).filter((e) => e.event.type === 'RUN_FINISHED');
    expect(finished).toHaveLength(1);
  });

  it('cancels the open asks of a waiting run', async () => {
    const h = await harness(await stores.freshStore());
    h.provider.script = async function* (input) {
      yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
      yield {
        type: 'RUN_FINISHED',
        threadId: input.threadId,
        runId: input.runId,
        outcome: { type: 'interrupt', interrupts: [{ id: 'i1', reason: 'confirmation', expiresAt: '2030-01-01T00:00:00Z' }] },
      };
    };
    await h.send('/ask');
    await h.settled();
    expect(h.timer.armed.has('run-1')).toBe(true);
    const cancelled = await h.gateway.cancelRun('run-1', ANONYMOUS);
    expect(cancelled).toMatchObject({ ok: true, value: { status: 'completed', asks: { i1: { state: 'cancelled' } } } });
    expect(h.timer.armed.has('run-1')).toBe(false);
    expect(await h.send('yes', { resume: [{ interruptId: 'i1', status: 'resolved' }] })).toMatchObject({
      ok: false,
      code: 'no_open_ask',
    });
  });

  it('refuses to cancel a finished run with task_not_cancelable', async () => {
    const h = await harness(await stores.freshStore());
    await h.send('done soon');
    await h.settled();
    expect(await h.gateway.cancelRun('run-1', ANONYMOUS)).toMatchObject({ ok: false, code: 'task_not_cancelable' });
    expect(await h.gateway.cancelRun('nope', ANONYMOUS)).toMatchObject({ ok: false, code: 'run_not_found' });
  });
});
