import { describe, expect, it } from 'vitest';
import { SqliteStore, createSqliteStore } from '../../../lambdas/adapters/local/sqlite/store.js';
import { takingTurns } from '../../../lambdas/adapters/local/turns.js';
import { recordProjections } from '../../../lambdas/core/a2a/task-state.js';

/** Holds the thread for `ms`: a chain's own synchronous work between two store calls. */
function work(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

describe('store calls taking turns on one machine', () => {
  it('gives a chain that waited its turn a slice of its own: a chain arriving behind a busy one is not held to a call a turn', async () => {
    const raw = createSqliteStore(':memory:', { projections: recordProjections });
    const store = takingTurns(raw);
    try {
      const order: string[] = [];
      let arrive!: () => void;
      const arrived = new Promise<void>((resolve) => (arrive = resolve));
      // A busy chain (a burst's relay): 60 store calls with work between them, some 30 slices' worth.
      const busy = (async () => {
        for (let i = 0; i < 60; i++) {
          await store.events.lastSeq('busy');
          work(2);
          // Another chain arrives in the middle of the busy one's slice (a paced event read off its socket).
          if (i === 1) arrive();
        }
        order.push('busy ended');
      })();
      // Its many quick calls (a paced event's log, record and readers) fit in one slice; at a call a turn they outlast the busy chain.
      const paced = (async () => {
        await arrived;
        for (let i = 0; i < 40; i++) await store.events.lastSeq('paced');
        order.push('paced ended');
      })();
      await Promise.all([busy, paced]);
      expect(order).toEqual(['paced ended', 'busy ended']);
    } finally {
      await raw.close();
    }
  });

  it('gives the chains that waited a few slices a turn in all, however many wait: the loop turns between them', async () => {
    const raw = createSqliteStore(':memory:', { projections: recordProjections });
    const store = takingTurns(raw);
    try {
      // One count per turn of the loop: an immediate that queues itself runs once a turn.
      let turns = 0;
      let ticking = true;
      const tick = () => {
        turns += 1;
        if (ticking) setImmediate(tick);
      };
      setImmediate(tick);
      const goneOnIn = new Map<number, Set<number>>();
      // 50 chains (50 requests at once), each some 10 slices of calls with work between them.
      const chains = Array.from({ length: 50 }, async (_, chain) => {
        for (let i = 0; i < 40; i++) {
          await store.events.lastSeq(`chain-${chain}`);
          goneOnIn.set(turns, (goneOnIn.get(turns) ?? new Set()).add(chain));
          work(1);
        }
      });
      await Promise.all(chains);
      ticking = false;
      const most = Math.max(...[...goneOnIn.values()].map((set) => set.size));
      // A slice of its own each, all 50 would go on in every turn.
      expect(most).toBeLessThanOrEqual(4);
      expect(turns).toBeGreaterThan(50);
    } finally {
      await raw.close();
    }
  });
});
