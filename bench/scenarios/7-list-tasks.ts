import { randomUUID } from 'node:crypto';
import type { LocalStoreKind } from '../../lambdas/runtimes/local.js';
import type { Bench, Row } from '../support/bench.js';
import { row } from '../support/bench.js';
import { now } from '../support/sse-reader.js';
import { spread } from '../support/stats.js';

const NAME = 'ListTasks';
const HEADERS = { 'Content-Type': 'application/json', 'A2A-Version': '1.0' };

/** Starts `count` tasks (SendMessage, returnImmediately), `parallel` at a time, and waits until the last is done. */
export async function makeTasks(base: string, count: number, parallel: number): Promise<void> {
  let made = 0;
  const one = async () => {
    while (made < count) {
      made += 1;
      const response = await fetch(`${base}/message:send`, {
        method: 'POST',
        headers: HEADERS,
        body: JSON.stringify({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'go' }] } }),
      });
      if (!response.ok) throw new Error(`SendMessage answered ${response.status}: ${await response.text()}`);
      await response.arrayBuffer();
    }
  };
  await Promise.all(Array.from({ length: parallel }, one));
}

/** One ListTasks over HTTP+JSON: how long the page took, and how many tasks it held. */
async function list(base: string, query: string): Promise<{ ms: number; tasks: number }> {
  const startedAt = now();
  const response = await fetch(`${base}/tasks?${query}`, { headers: HEADERS });
  const body = (await response.json()) as { tasks?: unknown[] };
  if (!response.ok) throw new Error(`ListTasks answered ${response.status}: ${JSON.stringify(body)}`);
  return { ms: now() - startedAt, tasks: body.tasks?.length ?? 0 };
}

/**
 * A tenant with 10,000 tasks (1,000 with --quick; on the DynamoDB adapter 1,000 and 300): a page of 50 with a filter that matches none
 * (state REJECTED: every task completed) and one that matches all (COMPLETED), against the unfiltered page of 50, what a page costs.
 * The target: any filter answers a page of 50 in ≤ 50 ms (an index, not a scan).
 */
export async function listTasks(bench: Bench, store: LocalStoreKind): Promise<Row[]> {
  // On dynalite, making 10,000 tasks alone takes minutes: the DynamoDB adapter is measured on fewer.
  const count = store === 'dynamodb' ? (bench.quick ? 300 : 1_000) : bench.quick ? 1_000 : 10_000;
  const reps = bench.quick ? 3 : 5;
  const gateway = await bench.startGateway('local', `scenario-7-${store}`, store);
  try {
    await gateway.registerAgent('tasks', { events: 2, intervalMs: 0, deltaChars: 4 });
    const base = `${gateway.url}/a2a/tasks/rest`;
    const madeAt = now();
    await makeTasks(base, count, 20);
    bench.log(`  ${count} tasks made in ${((now() - madeAt) / 1000).toFixed(1)} s`);
    const filtered: number[] = [];
    const unfiltered: number[] = [];
    const matching: number[] = [];
    for (let rep = 0; rep < reps; rep++) {
      const none = await gateway.profiled(`filtered-${rep + 1}`, () => list(base, 'status=TASK_STATE_REJECTED&pageSize=50'));
      const page = await list(base, 'pageSize=50');
      const done = await list(base, 'status=TASK_STATE_COMPLETED&pageSize=50');
      if (none.tasks !== 0 || page.tasks !== 50 || done.tasks !== 50) throw new Error(`the pages held ${none.tasks}, ${page.tasks} and ${done.tasks} tasks, not 0, 50 and 50`);
      filtered.push(none.ms);
      unfiltered.push(page.ms);
      matching.push(done.ms);
      bench.log(`  rep ${rep + 1}: filtered (none match) ${none.ms.toFixed(1)} ms, filtered (all match) ${done.ms.toFixed(1)} ms, unfiltered ${page.ms.toFixed(1)} ms`);
    }
    const base7 = { scenario: 7, name: `${NAME} (${count.toLocaleString('en')} tasks, a page of 50)`, unit: 'ms' };
    return [
      row(
        { ...base7, metric: 'a filter that matches none', reference: spread(unfiltered).median, referenceIs: 'the unfiltered page of 50', target: '≤ 50 ms' },
        spread(filtered),
        (v) => v <= 50,
      ),
      row({ ...base7, metric: 'a filter that matches every task (COMPLETED)', reference: spread(unfiltered).median, referenceIs: 'the unfiltered page of 50', target: '≤ 50 ms' }, spread(matching), (v) => v <= 50),
      row({ ...base7, metric: 'unfiltered', reference: null, target: '≤ 50 ms' }, spread(unfiltered), (v) => v <= 50),
    ];
  } finally {
    await gateway.stop();
  }
}
