import { randomUUID } from 'node:crypto';
import type { LocalStoreKind } from '../../lambdas/runtimes/local.js';
import type { Bench, Row } from '../support/bench.js';
import { row } from '../support/bench.js';
import { scriptQuery, type Script } from '../support/script.js';
import { readRun, runProblem } from '../support/sse-reader.js';
import { median, spread } from '../support/stats.js';
import { readWithStockClient } from './stock-agui.js';

const NAME = 'burst relay';

/** Events/s of one run: its events over request start → last event. */
const rateOf = (events: number, ms: number) => events / (ms / 1000);

/**
 * 2,000 events as fast as the agent can send them. Throughput through funduq and straight from
 * the agent, each read two ways: with the stock @ag-ui/client (what a caller sees, and the
 * reference: the agent's own stream read straight by the same client is the physical limit of a
 * relay) and with a bare SSE parser (what the gateway delivers, without the client's own
 * per-event work). The store's own write ceiling for the same events is measured in the
 * gateway's process, through the same adapter, in the same run.
 */
export async function burstRelay(bench: Bench, store: LocalStoreKind): Promise<Row[]> {
  const plan: Script = { events: 2000, intervalMs: 0, deltaChars: 6 };
  const reps = bench.quick ? 2 : 5;
  const gateway = await bench.startGateway('local', `scenario-2-${store}`, store);
  try {
    await gateway.registerAgent('burst', plan);
    await gateway.linkAgent('burst-link', plan);
    const direct = `${bench.agentUrl}/agui?${scriptQuery(plan)}`;
    const through = `${gateway.url}/agui/burst`;
    const linked = `${gateway.url}/agui/burst-link`;
    const bare = async (url: string) => {
      const read = await readRun(url, { threadId: randomUUID(), runId: randomUUID() });
      const problem = runProblem(read, plan.events);
      if (problem) throw new Error(`burst run failed: ${problem}`);
      return rateOf(read.arrivals.length, read.arrivals.at(-1)! - read.startedAt);
    };
    const stock = async (url: string) => {
      const read = await readWithStockClient(url);
      if (read.events !== plan.events) throw new Error(`burst run failed: ${read.events} events, last ${read.lastType}${read.error ? ` (${read.error})` : ''}`);
      return rateOf(read.events, read.totalMs);
    };
    // Unmeasured: two runs each way warm the JIT on both sides.
    for (let i = 0; i < 2; i++) {
      await stock(direct);
      await stock(through);
      await bare(through);
      await stock(linked);
    }
    const rates = { funduqStock: [] as number[], directStock: [] as number[], funduqBare: [] as number[], directBare: [] as number[], linkStock: [] as number[] };
    // The direct reads run first in each repetition, outside the profiled part.
    for (let rep = 0; rep < reps; rep++) {
      rates.directStock.push(await stock(direct));
      rates.directBare.push(await bare(direct));
      await gateway.profiled(`relay-${rep + 1}`, async () => {
        rates.funduqStock.push(await stock(through));
        rates.funduqBare.push(await bare(through));
        rates.linkStock.push(await stock(linked));
      });
      bench.log(
        `  rep ${rep + 1}: funduq ${rates.funduqStock.at(-1)!.toFixed(0)} ev/s (bare ${rates.funduqBare.at(-1)!.toFixed(0)}), over a link ${rates.linkStock.at(-1)!.toFixed(0)} ev/s, direct ${rates.directStock.at(-1)!.toFixed(0)} ev/s (bare ${rates.directBare.at(-1)!.toFixed(0)})`,
      );
    }
    const ceilings = await gateway.profiled('store-ceiling', () => gateway.child.call<Record<string, number[]>>('ceiling', { plan, rounds: reps }));
    for (const [arrangement, samples] of Object.entries(ceilings)) bench.log(`  store: ${arrangement}: ${median(samples).toFixed(0)} ev/s`);
    // The ceiling is the best arrangement's median; its spread is that arrangement's.
    const [bestName, bestSamples] = Object.entries(ceilings).sort((a, b) => median(b[1]) - median(a[1]))[0];
    const ceiling = median(bestSamples);
    const base = { scenario: 2, name: NAME, unit: 'events/s' };
    const straight = median(rates.directStock);
    const ofDirect = (samples: number[]) => spread(samples.map((rate) => (rate / straight) * 100));
    return [
      row(
        { ...base, metric: 'through funduq, stock client', reference: straight, referenceIs: 'direct from the agent, stock client', target: '≥ 80% of direct' },
        spread(rates.funduqStock),
        (v) => v >= 0.8 * straight,
      ),
      row({ ...base, metric: 'through funduq ÷ direct, stock client', unit: '%', reference: 100, target: '≥ 80%' }, ofDirect(rates.funduqStock), (v) => v >= 80),
      row({ ...base, metric: 'through funduq, bare SSE reader', reference: median(rates.directBare), referenceIs: 'direct, bare SSE reader', target: null }, spread(rates.funduqBare)),
      // Issue 29's lean reader (frames split, JSON parsed, nothing else): the burst's time through funduq over its time direct, each repetition's pair.
      row(
        { ...base, metric: "bare SSE reader: the burst's time through funduq ÷ direct", unit: '×', reference: 1, referenceIs: 'the same reader straight at the agent', target: '≤ 2×' },
        spread(rates.funduqBare.map((rate, i) => rates.directBare[i] / rate)),
        (v) => v <= 2,
      ),
      row(
        { ...base, metric: 'over a link, stock client', reference: straight, referenceIs: 'direct from the agent, stock client', target: '≥ 50% of direct' },
        spread(rates.linkStock),
        (v) => v >= 0.5 * straight,
      ),
      row({ ...base, metric: 'over a link ÷ direct, stock client', unit: '%', reference: 100, target: '≥ 50%' }, ofDirect(rates.linkStock), (v) => v >= 50),
      row({ ...base, metric: 'direct from the agent, stock client', reference: null, target: null }, spread(rates.directStock)),
      row({ ...base, metric: 'direct from the agent, bare SSE reader', reference: null, target: null }, spread(rates.directBare)),
      row({ ...base, metric: `store's own write ceiling (${bestName})`, reference: null, target: null }, spread(bestSamples)),
      row({ ...base, metric: 'through funduq ÷ store ceiling', unit: '%', reference: 100, target: null }, spread(rates.funduqStock.map((rate) => (rate / ceiling) * 100))),
    ];
  } finally {
    await gateway.stop();
  }
}
