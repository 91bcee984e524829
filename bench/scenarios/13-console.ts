import { randomUUID } from 'node:crypto';
import type { LocalStoreKind } from '../../lambdas/runtimes/local.js';
import { launchBrowser } from '../../test/support/browser.js';
import type { Bench, Row } from '../support/bench.js';
import { row } from '../support/bench.js';
import { now } from '../support/sse-reader.js';
import { percentile, spread } from '../support/stats.js';
import { makeTasks } from './7-list-tasks.js';

const NAME = 'console';
const EVENTS = 20_000;

/** One GET of a console page with the session's cookie: how long it took. */
async function timed(url: string, cookie: string): Promise<number> {
  const startedAt = now();
  const response = await fetch(url, { headers: { cookie } });
  const body = await response.text();
  if (!response.ok) throw new Error(`${url} answered ${response.status}: ${body.slice(0, 200)}`);
  return now() - startedAt;
}

/**
 * The console (issue 28). Its threads page over 10,000 threads (1,000 with --quick; on the DynamoDB
 * adapter 1,000 and 300), 100 requests each, unfiltered and with a filter that matches none (which
 * walks every thread), as p95, against the A2A ListTasks page of 50 over the same threads; target
 * ≤ 150 ms. Then a run of 20,000 events in a real browser: its page's first paint of the log and
 * the scroll to its last event, against fetching and parsing the same log in the page; ≤ 1 s each.
 */
export async function consolePages(bench: Bench, store: LocalStoreKind): Promise<Row[]> {
  const count = store === 'dynamodb' ? (bench.quick ? 300 : 1_000) : bench.quick ? 1_000 : 10_000;
  const requests = bench.quick ? 30 : 100;
  const gateway = await bench.startGateway('local', `scenario-13-${store}`, store);
  try {
    await gateway.registerAgent('tasks', { events: 2, intervalMs: 0, deltaChars: 4 });
    const madeAt = now();
    await makeTasks(`${gateway.url}/a2a/tasks/rest`, count, 20);
    bench.log(`  ${count} threads made in ${((now() - madeAt) / 1000).toFixed(1)} s`);
    // Open mode (no admin token): the first page makes the session.
    const cookie = ((await fetch(`${gateway.url}/console`)).headers.get('set-cookie') ?? '').split(';')[0];
    const unfiltered: number[] = [];
    const none: number[] = [];
    const reference: number[] = [];
    for (let i = 0; i < requests; i++) {
      unfiltered.push(await timed(`${gateway.url}/console/threads`, cookie));
      none.push(await timed(`${gateway.url}/console/threads?state=active`, cookie));
      reference.push(await timed(`${gateway.url}/a2a/tasks/rest/tasks?pageSize=50`, ''));
    }
    const p95 = (values: number[]) => percentile(values, 95);
    bench.log(`  threads page p95: unfiltered ${p95(unfiltered).toFixed(1)} ms, a filter matching none ${p95(none).toFixed(1)} ms; ListTasks p95 ${p95(reference).toFixed(1)} ms`);
    const listed = { scenario: 13, name: `${NAME}: threads page over ${count.toLocaleString('en')} threads (${requests} requests)`, unit: 'ms', reference: p95(reference), referenceIs: 'ListTasks page of 50, p95' };
    const rows = [
      row({ ...listed, metric: 'p95, unfiltered', target: '≤ 150 ms' }, spread([p95(unfiltered)]), (v) => v <= 150),
      row({ ...listed, metric: 'p95, a filter matching none (every thread walked)', target: '≤ 150 ms' }, spread([p95(none)]), (v) => v <= 150),
    ];
    if (store !== 'sqlite') return rows;

    await gateway.registerAgent('burst', { events: EVENTS, intervalMs: 0, deltaChars: 16 });
    const runId = `run-${randomUUID()}`;
    const threadId = `t-${randomUUID()}`;
    const streamed = await fetch(`${gateway.url}/agui/burst`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ threadId, runId, messages: [{ id: 'm', role: 'user', content: 'go' }], tools: [], context: [], state: {}, forwardedProps: {} }),
    });
    await streamed.arrayBuffer();
    const log = `${gateway.url}/console/tenants/anonymous/runs/${runId}/events.json`;
    // The log as stored (the scripted agent's events and the run's own first and last).
    const total = (await (await fetch(`${gateway.url}/threads/${threadId}`)).json()).runs[0].usage.events as number;
    const browser = await launchBrowser();
    try {
      const paint: number[] = [];
      const scroll: number[] = [];
      const floor: number[] = [];
      for (let rep = 0; rep < (bench.quick ? 2 : 5); rep++) {
        const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
        await page.context().addCookies([{ name: cookie.split('=')[0], value: cookie.slice(cookie.indexOf('=') + 1), url: gateway.url }]);
        await page.goto(`${gateway.url}/console/tenants/anonymous/runs/${runId}`);
        await page.waitForFunction((events) => document.getElementById('event-log')?.dataset.loaded === String(events), total, { timeout: 30_000 });
        paint.push(await page.evaluate(() => performance.getEntriesByName('funduq-events-drawn')[0].startTime));
        scroll.push(
          await page.evaluate(async (last) => {
            const startedAt = performance.now();
            (document.querySelector('.to-end') as HTMLButtonElement).click();
            for (;;) {
              await new Promise(requestAnimationFrame);
              if (Array.from(document.querySelectorAll('#event-log td:first-child')).some((cell) => cell.textContent === String(last))) return performance.now() - startedAt;
            }
          }, total),
        );
        floor.push(
          await page.evaluate(async (url) => {
            const startedAt = performance.now();
            for (let after: number | undefined = 0; after !== undefined; ) after = ((await (await fetch(`${url}?after=${after}`)).json()) as { next?: number }).next;
            return performance.now() - startedAt;
          }, log),
        );
        await page.close();
      }
      bench.log(`  ${total} events: first paint ${spread(paint).median.toFixed(0)} ms after navigation, to the last event ${spread(scroll).median.toFixed(0)} ms; the log fetched and parsed ${spread(floor).median.toFixed(0)} ms`);
      const run = { scenario: 13, name: `${NAME}: a run page of ${total.toLocaleString('en')} events, headless Chromium`, unit: 'ms', reference: spread(floor).median, referenceIs: 'the log fetched and parsed in the page' };
      rows.push(
        row({ ...run, metric: 'first paint of the log, after navigation', target: '≤ 1000 ms' }, spread(paint), (v) => v <= 1000),
        row({ ...run, metric: 'scroll to the last event', target: '≤ 1000 ms' }, spread(scroll), (v) => v <= 1000),
      );
    } finally {
      await browser.close();
    }
    return rows;
  } finally {
    await gateway.stop();
  }
}
