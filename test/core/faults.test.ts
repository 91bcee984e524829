import { describe, expect, it } from 'vitest';
import type { StoredEvent } from '../../lambdas/core/model.js';
import { eventually, Gate, harness, lastText, replyEvents, type Harness } from '../support/core-harness.js';
import { refusingEventWrites, useStore } from '../support/stores.js';

const stores = useStore();

async function readToEnd(h: Harness, runId: string): Promise<StoredEvent[]> {
  const seen: StoredEvent[] = [];
  for await (const stored of h.gateway.followRun(runId, 0)) seen.push(stored);
  return seen;
}

describe('a store that refuses writes', () => {
  it('fails the run with store_unavailable when its events cannot be written, and the thread moves on', async () => {
    let down = true;
    const h = await harness(refusingEventWrites(await stores.freshStore(), () => down));
    const next = new Gate();
    h.provider.script = async function* (input) {
      if (lastText(input) === 'next') await next.wait;
      yield* replyEvents(input, lastText(input));
    };

    await h.send('lost');
    await h.send('next');
    await eventually(async () => expect(await h.store.runs.get('run-1')).toMatchObject({ status: 'failed', reason: 'store_unavailable' }), 15_000);
    down = false;
    next.open();
    await h.settled();

    // A reader of the failed run is not left waiting for events that were never stored: the run's
    // record holds its closing RUN_ERROR until the log takes it, and says why.
    expect((await readToEnd(h, 'run-1')).map((stored) => stored.event)).toEqual([
      { type: 'RUN_ERROR', code: 'store_unavailable', message: expect.stringContaining('did not take') },
    ]);
    expect(await h.store.runs.get('run-2')).toMatchObject({ status: 'completed' });
    expect((await h.events('run-2')).map((stored) => stored.event.type).at(-1)).toBe('RUN_FINISHED');
    expect((await h.store.threads.get(h.thread))?.unsettled).toBe(0);
  });

  it('closes the log with RUN_ERROR store_unavailable once the store takes writes again, so a reader sees why', async () => {
    // The run's first write is refused; the store is back for its closing event.
    const h = await harness(refusingEventWrites(await stores.freshStore(), (call) => call === 1));

    await h.send('hello');
    await h.settled();

    expect(await h.store.runs.get('run-1')).toMatchObject({ status: 'failed', reason: 'store_unavailable', lastSeq: 1 });
    const seen = await readToEnd(h, 'run-1');
    expect(seen.map((stored) => stored.event)).toEqual([
      { type: 'RUN_ERROR', code: 'store_unavailable', message: 'the store did not take write 1 of events' },
    ]);
  });
});
