import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ANONYMOUS, type Run } from '../../lambdas/core/model.js';
import type { RunChange, RunStore } from '../../lambdas/core/ports.js';
import { eventually, Gate, harness, replyEvents } from '../support/core-harness.js';
import { aroundCalls, useStore } from '../support/stores.js';

const stores = useStore();
const CORE = join(import.meta.dirname, '../../lambdas/core');

/** What the store took of runs' records, in order: each write that changed a run or its log. */
type Write = { what: 'run'; run: Run } | { what: 'events'; runId: string; seqs: number[] };

const RECORDED = new Set(['runs.create', 'runs.transition', 'runs.closeAsks', 'events.append', 'events.appendNew']);

/** The store as the gateway uses it, telling `wrote` of every write of a run that the store took. */
function recording(store: RunStore, writes: Write[]): RunStore {
  const run = (written: Run | boolean | undefined, fallback?: Run) => {
    if (written && typeof written === 'object') writes.push({ what: 'run', run: written });
    else if (written === true && fallback) writes.push({ what: 'run', run: fallback });
  };
  return aroundCalls(store, async (call, args, invoke) => {
    if (!RECORDED.has(call)) return invoke();
    const result = await invoke();
    switch (call) {
      case 'runs.create':
        run(result as boolean, args[0] as Run);
        break;
      case 'runs.transition':
      case 'runs.closeAsks':
        run(result as Run | undefined);
        break;
      case 'events.append':
      case 'events.appendNew': {
        const events = args[0] as { runId: string; seq: number }[];
        const taken = (result as number[] | undefined) ?? [];
        const seqs = events.map((e) => e.seq).filter((seq) => !taken.includes(seq));
        if (seqs.length > 0) writes.push({ what: 'events', runId: events[0].runId, seqs });
        break;
      }
    }
    return result;
  });
}

/** A change as comparable with a write: the run's state, or the seqs. */
function heard(change: RunChange): Write {
  return change.kind === 'status' ? { what: 'run', run: change.run } : { what: 'events', runId: change.runId, seqs: change.events.map((e) => e.seq) };
}

describe("the run's record", () => {
  it('is heard by a change-feed subscriber at every write: creation, start, events, end, cancel and the closing of asks', async () => {
    const writes: Write[] = [];
    const h = await harness(recording(await stores.freshStore(), writes));
    const changes: Write[] = [];
    h.feed.subscribeAll((change) => changes.push(heard(change)));
    const gate = new Gate();
    h.provider.script = async function* (input, signal) {
      if (input.messages.at(-1)?.content === '/ask') {
        yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
        yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId, outcome: { type: 'interrupt', interrupts: [{ id: 'i1', reason: 'confirm' }] } };
        return;
      }
      if (input.messages.at(-1)?.content === 'hold') {
        yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
        await Promise.race([gate.wait, new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))]);
        return;
      }
      yield* replyEvents(input, 'ok');
    };

    await h.send('/ask'); // run-1: an interrupt, an open ask
    await h.settled();
    await h.send('yes', { resume: [{ interruptId: 'i1', status: 'resolved', payload: true }] }); // run-2 answers it
    await h.settled();
    await h.send('/ask'); // run-3: another ask, cancelled while it waits
    await h.settled();
    expect(await h.gateway.cancelRun('run-3', ANONYMOUS)).toMatchObject({ ok: true });
    await h.send('hold'); // run-4 runs until cancelled
    await h.send('queued'); // run-5 waits behind it, and is cancelled queued
    await eventually(async () => expect((await h.store.runs.get('run-4'))?.status).toBe('running'));
    expect(await h.gateway.cancelRun('run-5', ANONYMOUS)).toMatchObject({ ok: true, value: { status: 'cancelled' } });
    expect(await h.gateway.cancelRun('run-4', ANONYMOUS)).toMatchObject({ ok: true, value: { status: 'cancelling' } });
    await h.settled();

    const kinds = new Set(writes.map((w) => (w.what === 'run' ? w.run.status : 'events')));
    expect([...kinds].sort()).toEqual(['cancelled', 'cancelling', 'completed', 'events', 'queued', 'running']);
    // The ask closings: answered by run-2, cancelled on run-3.
    expect(writes.filter((w) => w.what === 'run' && Object.values(w.run.asks ?? {}).some((a) => a.state !== 'open')).length).toBe(2);
    expect(changes).toEqual(writes);
  });

  it('has its end and its asks before anyone can see its last event', async () => {
    const h = await harness(await stores.freshStore());
    h.provider.script = async function* (input) {
      yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
      yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId, outcome: { type: 'interrupt', interrupts: [{ id: 'i1', reason: 'confirm' }] } };
    };
    // Read the moment the RUN_FINISHED is published: the first moment a reader could see it.
    const reads: Promise<Run | undefined>[] = [];
    h.feed.subscribeAll((change) => {
      if (change.kind === 'events' && change.events.some((e) => e.event.type === 'RUN_FINISHED')) reads.push(h.store.runs.get(change.runId));
    });
    await h.send('/ask');
    await h.settled();
    expect(reads).toHaveLength(1);
    const atThatMoment = await reads[0];
    expect(atThatMoment).toMatchObject({ status: 'completed', outcome: 'interrupt', lastSeq: 2, asks: { i1: { state: 'open' } } });
    // Its record held the closing event until the log had it.
    expect((await h.store.runs.get('run-1'))?.closingEvents).toBeUndefined();
    expect((await h.events('run-1')).map((e) => e.event.type)).toEqual(['RUN_STARTED', 'RUN_FINISHED']);
  });

  it('is written and published by its owner only', () => {
    const files = readdirSync(CORE, { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.ts'));
    const writers = files.filter((name) => {
      const text = readFileSync(join(CORE, name), 'utf8');
      return /\b(store|feed)\.(publish|createRun|transitionRun|closeAsks|reopenAsks|appendEvents|appendNew|updateRunLink)\(/.test(text);
    });
    expect(writers).toEqual(['ledger.ts']);
  });
});
