import { describe, expect, it } from 'vitest';
import { ADDRESSED_RUN_ID_KEY } from '../../lambdas/core/interjection.js';
import { eventually, Gate, harness, lastText, replyEvents, TEST_AGENT } from '../support/core-harness.js';
import { useStore } from '../support/stores.js';

const stores = useStore();

async function interjectingHarness(takesInterjections = true) {
  const h = await harness(await stores.freshStore());
  await h.store.agents.put({ ...TEST_AGENT, takesInterjections });
  const gate = new Gate();
  h.provider.script = async function* (input) {
    if (lastText(input) === 'long task') await gate.wait;
    yield* replyEvents(input, lastText(input));
  };
  return { h, gate };
}

const addressedTo = (runId: string) => ({ forwardedProps: { [ADDRESSED_RUN_ID_KEY]: runId } });

describe('an interjection', () => {
  it('is dispatched at once beside the running run it names, and the agent is told which', async () => {
    const { h, gate } = await interjectingHarness();
    await h.send('long task');
    await eventually(async () => expect((await h.store.runs.get('run-1'))?.status).toBe('running'));
    const started = await h.send('also consider this', addressedTo('run-1'));
    expect(started).toMatchObject({ ok: true, value: { run: { addressedRunId: 'run-1' } } });
    await eventually(async () => expect((await h.store.runs.get('run-2'))?.status).toBe('completed'));
    expect((await h.store.runs.get('run-1'))?.status).toBe('running');
    const call = h.provider.calls.find((c) => c.runId === 'run-2');
    expect(call?.forwardedProps).toMatchObject({ funduq: { addressedRunId: 'run-1' } });
    gate.open();
    await h.settled();
    expect((await h.store.threads.get(h.thread))?.unsettled).toBe(0);
  });

  it('is an ordinary next run when the run it names has already settled', async () => {
    const { h } = await interjectingHarness();
    await h.send('quick');
    await h.settled();
    const started = await h.send('too late', addressedTo('run-1'));
    expect(started.ok && started.value.run.addressedRunId).toBeUndefined();
    await h.settled();
    expect(h.provider.calls.find((c) => c.runId === 'run-2')?.forwardedProps).not.toHaveProperty('funduq.addressedRunId');
  });

  it('waits its turn as the next run when the run it names settles before it is dispatched', async () => {
    const { h, gate } = await interjectingHarness();
    await h.send('long task');
    await eventually(async () => expect((await h.store.runs.get('run-1'))?.status).toBe('running'));
    // Accepted as an interjection; the dispatch beside is replayed by hand after the target settled.
    await h.send('joining', addressedTo('run-1'));
    gate.open();
    await h.settled();
    await h.store.runs.transition('run-2', ['completed'], { status: 'completed' });
    const late = { ...(await h.store.runs.get('run-2'))!, runId: 'run-3', status: 'queued' as const, arrival: 3 };
    await h.store.runs.create(late);
    expect(await h.gateway.dispatchRun('run-3', { beside: true })).toBe('queued_as_next');
    await h.settled();
    expect((await h.store.runs.get('run-3'))?.status).toBe('completed');
    expect(h.provider.calls.find((c) => c.runId === 'run-3')?.forwardedProps).not.toHaveProperty('funduq.addressedRunId');
  });

  it('waits in the thread queue like any message when the agent takes no interjections', async () => {
    const { h, gate } = await interjectingHarness(false);
    await h.send('long task');
    await eventually(async () => expect((await h.store.runs.get('run-1'))?.status).toBe('running'));
    await h.send('also consider this', addressedTo('run-1'));
    expect((await h.store.runs.get('run-2'))?.status).toBe('queued');
    gate.open();
    await h.settled();
    expect(h.provider.calls.map((c) => c.runId)).toEqual(['run-1', 'run-2']);
  });
});
