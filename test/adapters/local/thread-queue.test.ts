import { describe, expect, it } from 'vitest';
import { InProcessThreadQueue } from '../../../lambdas/adapters/local/thread-queue.js';
import { eventually } from '../../support/core-harness.js';

describe('the in-process thread queue', () => {
  it('hands over at most maxRunning runs at once across threads, the rest in order as places free', async () => {
    const queue = new InProcessThreadQueue(() => {}, 2);
    const running = new Set<string>();
    const started: string[] = [];
    const finish = new Map<string, () => void>();
    let most = 0;
    queue.start(async (runId) => {
      running.add(runId);
      started.push(runId);
      most = Math.max(most, running.size);
      await new Promise<void>((resolve) => finish.set(runId, resolve));
      running.delete(runId);
    });
    for (let t = 0; t < 5; t++) for (let r = 0; r < 2; r++) await queue.enqueue({ threadId: `t${t}`, runId: `t${t}-r${r}` });

    // Whenever a run ends, the next waiting one takes its place: two run until fewer than two are left.
    for (let finished = 0; finished < 10; finished++) {
      await eventually(() => expect(running.size).toBe(Math.min(2, 10 - finished)));
      const [first] = running;
      finish.get(first)!();
      await eventually(() => expect(running.has(first)).toBe(false));
    }
    await queue.idle();

    expect(most).toBe(2);
    // Each thread's runs in their order.
    for (let t = 0; t < 5; t++) expect(started.indexOf(`t${t}-r0`)).toBeLessThan(started.indexOf(`t${t}-r1`));
  });
});
