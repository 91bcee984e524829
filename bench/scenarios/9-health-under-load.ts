import { randomUUID } from 'node:crypto';
import type { LocalStoreKind } from '../../lambdas/runtimes/local.js';
import type { Bench, Row } from '../support/bench.js';
import { row } from '../support/bench.js';
import { probeHealth } from '../support/health.js';
import { readRun, runProblem } from '../support/sse-reader.js';
import { percentile, spread } from '../support/stats.js';

const NAME = '/healthz under load';
/** Under the 350 KB limit of a run's input, as issue 14's first load. */
const LARGE = 'x'.repeat(340 * 1024 - 512);

/** Each streamed run's events: a second of events at 20 ms, so all 500 stream at once. */
const STREAMED_EVENTS = 50;

type Loop = { p50: number; p99: number; max: number } | undefined;

/**
 * `/healthz` probed every 20 ms under issue 14's loads, with how late the gateway's event loop ran
 * meanwhile: 300 concurrent POSTs of a 340 KB message each (those admission refuses answer 503),
 * 12 readers that never read a run of 100 events of 380 KB, 500 readers of one run reading it
 * to its end, and (issue 29) 500 runs streaming at once, each to a reader of its own. The
 * reference is the same probe with nothing else going on. Target: p99 ≤ 50 ms under every load.
 */
export async function healthUnderLoad(bench: Bench, store: LocalStoreKind): Promise<Row[]> {
  const posts = bench.quick ? 100 : 300;
  const reps = bench.quick ? 1 : 2;
  const gateway = await bench.startGateway('local', `scenario-9-${store}`, store);
  const measured = async <T>(during: () => Promise<T>) => {
    await gateway.child.call('loopDelayStart');
    const probed = await probeHealth(gateway.url, during());
    return { ...probed, loop: await gateway.child.call<Loop>('loopDelayStop') };
  };
  try {
    await gateway.registerAgent('small', { events: 6, intervalMs: 0, deltaChars: 8 });
    await gateway.registerAgent('heavy', { events: 104, intervalMs: 20, deltaChars: 380 * 1024 });
    await gateway.registerAgent('watched', { events: 204, intervalMs: 10, deltaChars: 40 });
    await gateway.registerAgent('streamed', { events: STREAMED_EVENTS, intervalMs: 20, deltaChars: 40 });
    const quiet = await measured(() => new Promise((resolve) => setTimeout(resolve, 2_000)));

    const burst = async () => {
      const outcomes = await Promise.all(Array.from({ length: posts }, () => postLarge(`${gateway.url}/agui/small`)));
      return { taken: outcomes.filter((status) => status === 200).length, refused: outcomes.filter((status) => status === 503).length };
    };
    /** A run of `agent` once its response's head came: its id, and its read to the end. */
    const started = async (agent: string) => {
      const runId = randomUUID();
      let headers!: () => void;
      const accepted = new Promise<void>((resolve) => (headers = resolve));
      const run = readRun(`${gateway.url}/agui/${agent}`, { threadId: randomUUID(), runId }, headers);
      await accepted;
      return { runId, run };
    };
    const unread = async () => {
      const { runId, run } = await started('heavy');
      const readers = await Promise.all(Array.from({ length: 12 }, () => stalledReader(`${gateway.url}/agui/heavy/runs/${runId}/events`)));
      const read = await run;
      await Promise.all(readers.map((reader) => reader.body?.cancel()));
      const problem = runProblem(read, 104);
      if (problem) throw new Error(`the heavy run failed: ${problem}`);
    };

    // The POSTs' path warmed first (as every scenario's): on a gateway just started, the first burst
    // also waits for V8 to compile that path, which no later burst does.
    await Promise.all(Array.from({ length: 50 }, () => postLarge(`${gateway.url}/agui/small`)));

    /** 500 readers of one run, each reading it to its end (an audience on one run). */
    const watchers = bench.quick ? 100 : 500;
    const watched = async () => {
      const { runId, run } = await started('watched');
      const frames = await Promise.all(
        Array.from({ length: watchers }, async () => {
          const response = await fetch(`${gateway.url}/agui/watched/runs/${runId}/events`, { headers: { accept: 'text/event-stream' } });
          return (await response.text()).split('\n\n').filter((frame) => frame.includes('data:')).length;
        }),
      );
      const problem = runProblem(await run, 204);
      if (problem) throw new Error(`the watched run failed: ${problem}`);
      const short = frames.filter((count) => count < 204).length;
      if (short > 0) throw new Error(`${short} of ${watchers} readers of the watched run read less than its 204 events`);
    };

    /** 500 runs at once, each on a thread of its own and read to its end by its own caller. */
    const streams = bench.quick ? 100 : 500;
    const streaming = async () => {
      const reads = await Promise.all(Array.from({ length: streams }, () => readRun(`${gateway.url}/agui/streamed`, { threadId: randomUUID(), runId: randomUUID() })));
      const failed = reads.map((read) => runProblem(read, STREAMED_EVENTS)).filter((problem) => problem !== undefined);
      if (failed.length > 0) throw new Error(`${failed.length} of ${streams} streamed runs failed, the first: ${failed[0]}`);
    };

    const p99 = { burst: [] as number[], readers: [] as number[], watchers: [] as number[], streams: [] as number[] };
    const p50 = { burst: [] as number[], readers: [] as number[], watchers: [] as number[], streams: [] as number[] };
    const loop = { burst: [] as number[], readers: [] as number[], watchers: [] as number[], streams: [] as number[] };
    for (let rep = 0; rep < reps; rep++) {
      const loaded = await gateway.profiled(`burst-${rep + 1}`, () => measured(burst));
      const stalled = await gateway.profiled(`readers-${rep + 1}`, () => measured(unread));
      const audience = await gateway.profiled(`watchers-${rep + 1}`, () => measured(watched));
      const streamed = await gateway.profiled(`streams-${rep + 1}`, () => measured(streaming));
      for (const [key, got] of [['burst', loaded], ['readers', stalled], ['watchers', audience], ['streams', streamed]] as const) {
        p99[key].push(percentile(got.latencies, 99));
        p50[key].push(percentile(got.latencies, 50));
        loop[key].push(got.loop?.p99 ?? Number.NaN);
      }
      bench.log(
        `  rep ${rep + 1}: ${posts} × 340 KB POSTs (${loaded.value.taken} taken, ${loaded.value.refused} refused 503): /healthz p50 ${p50.burst.at(-1)!.toFixed(1)} / p99 ${p99.burst.at(-1)!.toFixed(1)} ms, event loop p99 ${fmt(loaded.loop?.p99)} max ${fmt(loaded.loop?.max)} ms; ` +
          `12 unread readers: /healthz p50 ${p50.readers.at(-1)!.toFixed(1)} / p99 ${p99.readers.at(-1)!.toFixed(1)} ms, event loop p99 ${fmt(stalled.loop?.p99)} max ${fmt(stalled.loop?.max)} ms; ` +
          `${watchers} readers of one run: /healthz p50 ${p50.watchers.at(-1)!.toFixed(1)} / p99 ${p99.watchers.at(-1)!.toFixed(1)} ms, event loop p99 ${fmt(audience.loop?.p99)} max ${fmt(audience.loop?.max)} ms; ` +
          `${streams} runs streaming at once: /healthz p50 ${p50.streams.at(-1)!.toFixed(1)} / p99 ${p99.streams.at(-1)!.toFixed(1)} ms, event loop p99 ${fmt(streamed.loop?.p99)} max ${fmt(streamed.loop?.max)} ms`,
      );
    }
    const reference = percentile(quiet.latencies, 99);
    bench.log(`  alone: /healthz p50 ${percentile(quiet.latencies, 50).toFixed(1)} / p99 ${reference.toFixed(1)} ms, event loop p99 ${fmt(quiet.loop?.p99)} ms`);
    const base = { scenario: 9, name: NAME, unit: 'ms' };
    return [
      row({ ...base, metric: `GET /healthz p99, ${posts} × 340 KB POSTs at once`, reference, referenceIs: 'p99 with no load', target: '≤ 50 ms' }, spread(p99.burst), (v) => v <= 50),
      row({ ...base, metric: 'GET /healthz p50, meanwhile', reference: percentile(quiet.latencies, 50), referenceIs: 'p50 with no load', target: null }, spread(p50.burst)),
      row({ ...base, metric: "gateway's event loop delay p99, meanwhile", reference: quiet.loop?.p99 ?? null, referenceIs: 'with no load', target: null }, spread(loop.burst)),
      row({ ...base, metric: 'GET /healthz p99, 12 readers that never read 100 × 380 KB', reference, referenceIs: 'p99 with no load', target: '≤ 50 ms' }, spread(p99.readers), (v) => v <= 50),
      row({ ...base, metric: 'GET /healthz p50, meanwhile', reference: percentile(quiet.latencies, 50), referenceIs: 'p50 with no load', target: null }, spread(p50.readers)),
      row({ ...base, metric: "gateway's event loop delay p99, meanwhile", reference: quiet.loop?.p99 ?? null, referenceIs: 'with no load', target: null }, spread(loop.readers)),
      row({ ...base, metric: `GET /healthz p99, ${watchers} readers of one run of 204 events`, reference, referenceIs: 'p99 with no load', target: '≤ 50 ms' }, spread(p99.watchers), (v) => v <= 50),
      row({ ...base, metric: 'GET /healthz p50, meanwhile', reference: percentile(quiet.latencies, 50), referenceIs: 'p50 with no load', target: null }, spread(p50.watchers)),
      row({ ...base, metric: "gateway's event loop delay p99, meanwhile", reference: quiet.loop?.p99 ?? null, referenceIs: 'with no load', target: null }, spread(loop.watchers)),
      row({ ...base, metric: `GET /healthz p99, ${streams} runs streaming at once (${STREAMED_EVENTS} events every 20 ms), each to its own reader`, reference, referenceIs: 'p99 with no load', target: '≤ 50 ms' }, spread(p99.streams), (v) => v <= 50),
      row({ ...base, metric: 'GET /healthz p50, meanwhile', reference: percentile(quiet.latencies, 50), referenceIs: 'p50 with no load', target: null }, spread(p50.streams)),
      row({ ...base, metric: "gateway's event loop delay p99, meanwhile", reference: quiet.loop?.p99 ?? null, referenceIs: 'with no load', target: null }, spread(loop.streams)),
    ];
  } finally {
    await gateway.stop();
  }
}

const fmt = (ms: number | undefined) => (ms === undefined ? '—' : ms.toFixed(1));

/** One run with a 340 KB message, read to its end: its status (503 when admission refused it). */
async function postLarge(url: string): Promise<number> {
  const runId = randomUUID();
  const body = JSON.stringify({ threadId: randomUUID(), runId, messages: [{ id: `m-${runId}`, role: 'user', content: LARGE }], tools: [], context: [], state: {}, forwardedProps: {} });
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream' }, body });
  await response.arrayBuffer();
  return response.status;
}

/** A reader of a run's events that takes nothing past the response's head (fetch reads its socket only as its body is taken). */
async function stalledReader(url: string): Promise<Response> {
  return fetch(url, { headers: { accept: 'text/event-stream' } });
}
