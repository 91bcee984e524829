import { describe, expect, it } from 'vitest';
import { SqliteRunStore } from '../../../lambdas/adapters/local/sqlite-run-store.js';
import { takingTurns } from '../../../lambdas/adapters/local/turns.js';

/** Holds the thread for `ms`: a chain's own synchronous work between two store calls. */
function work(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

describe('store calls taking turns on one machine', () => {
  it('gives a chain that waited its turn a slice of its own: a chain arriving behind a busy one is not held to a call a turn', async () => {
    const raw = new SqliteRunStore(':memory:');
    const store = takingTurns(raw);
    try {
      const order: string[] = [];
      let arrive!: () => void;
      const arrived = new Promise<void>((resolve) => (arrive = resolve));
      // A busy chain (a burst's relay): 60 store calls with work between them, some 30 slices' worth.
      const busy = (async () => {
        for (let i = 0; i < 60; i++) {
          await store.lastSeq('busy');
          work(2);
          // Another chain arrives in the middle of the busy one's slice (a paced event read off its socket).
          if (i === 1) arrive();
        }
        order.push('busy ended');
      })();
      // Its many quick calls (a paced event's log, record and readers) fit in one slice; at a call a turn they outlast the busy chain.
      const paced = (async () => {
        await arrived;
        for (let i = 0; i < 40; i++) await store.lastSeq('paced');
        order.push('paced ended');
      })();
      await Promise.all([busy, paced]);
      expect(order).toEqual(['paced ended', 'busy ended']);
    } finally {
      raw.close();
    }
  });
});
