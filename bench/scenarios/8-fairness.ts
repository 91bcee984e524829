import { randomUUID } from 'node:crypto';
import type { LocalStoreKind } from '../../lambdas/runtimes/local.js';
import type { Bench, Row } from '../support/bench.js';
import { row } from '../support/bench.js';
import { scriptQuery, type Script } from '../support/script.js';
import { readRun, runProblem } from '../support/sse-reader.js';
import { percentile, spread } from '../support/stats.js';
import { probeHealth } from '../support/health.js';
import { readWithStockClient, type StockRead } from './stock-agui.js';

const NAME = 'fairness';

const KEYS = {
  paced: { key: 'bench-key-paced', principal: { id: 'pacer', tenant: 'tenant-paced' } },
  burst: { key: 'bench-key-burst', principal: { id: 'burster', tenant: 'tenant-burst' } },
};
const as = (who: keyof typeof KEYS) => ({ Authorization: `Bearer ${KEYS[who].key}` });

/**
 * One tenant's paced stream (an event every 10 ms, stock @ag-ui/client) while another tenant
 * bursts (two runs of 15,000 events at once, as fast as the agent sends; read with a bare SSE
 * reader). Added latency of the paced stream = its p99 through funduq − its p99 read straight from
 * the agent at the same moment (the same load on the machine on both sides); the reference is
 * the same figure with no burst, in the same run. `/healthz` is probed every 20 ms meanwhile, by
 * itself and during the burst.
 */
export async function fairness(bench: Bench, store: LocalStoreKind): Promise<Row[]> {
  const paced: Script = { events: bench.quick ? 150 : 500, intervalMs: 10, deltaChars: 6 };
  const burst: Script = { events: bench.quick ? 3_000 : 15_000, intervalMs: 0, deltaChars: 6 };
  const reps = bench.quick ? 2 : 3;
  const apiKeys = Object.fromEntries(Object.values(KEYS).map(({ key, principal }) => [key, principal]));
  const gateway = await bench.startGateway('local', `scenario-8-${store}`, store, { apiKeys });
  try {
    await gateway.registerAgent('paced', paced);
    await gateway.registerAgent('burst', burst);
    await gateway.registerAgent('warm', { ...paced, events: 50, intervalMs: 1 });
    const direct = `${bench.agentUrl}/agui?${scriptQuery(paced)}`;
    const through = `${gateway.url}/agui/paced`;
    await readWithStockClient(`${gateway.url}/agui/warm`, undefined, as('paced'));

    /** The paced stream read both ways at once: its added p99. */
    const pacedAdded = async () => {
      const [f, d] = await Promise.all([readWithStockClient(through, undefined, as('paced')), readWithStockClient(direct)]);
      for (const [side, read] of [['funduq', f], ['direct', d]] as [string, StockRead][]) {
        if (read.events !== paced.events) throw new Error(`paced run (${side}) read ${read.events} events of ${paced.events} (last ${read.lastType})`);
      }
      return { added: percentile(f.latencies, 99) - percentile(d.latencies, 99), direct: percentile(d.latencies, 99) };
    };
    const bursting = () =>
      Promise.all(
        [0, 1].map(async () => {
          const read = await readRun(`${gateway.url}/agui/burst`, { threadId: randomUUID(), runId: randomUUID() }, undefined, as('burst'));
          const problem = runProblem(read, burst.events);
          if (problem) throw new Error(`burst run failed: ${problem}`);
        }),
      );
    const probing = <T>(during: Promise<T>) => probeHealth(gateway.url, during);

    const alone: number[] = [];
    const aloneDirect: number[] = [];
    const beside: number[] = [];
    const besideDirect: number[] = [];
    const healthAlone: number[] = [];
    const healthBurst: number[] = [];
    await gateway.profiled('fairness', async () => {
      for (let rep = 0; rep < reps; rep++) {
        const quiet = await probing(pacedAdded());
        alone.push(quiet.value.added);
        aloneDirect.push(quiet.value.direct);
        healthAlone.push(percentile(quiet.latencies, 99));
        // The paced stream starts once the bursts are under way, and is read while they run.
        const bursts = bursting();
        const loaded = await probing(pacedAdded());
        await bursts;
        beside.push(loaded.value.added);
        besideDirect.push(loaded.value.direct);
        healthBurst.push(percentile(loaded.latencies, 99));
        bench.log(
          `  rep ${rep + 1}: paced stream added p99 ${loaded.value.added.toFixed(1)} ms while another tenant bursts (${quiet.value.added.toFixed(1)} ms alone); /healthz p99 ${healthBurst.at(-1)!.toFixed(1)} ms (${healthAlone.at(-1)!.toFixed(1)} ms alone)`,
        );
      }
    });
    const base = { scenario: 8, name: NAME, unit: 'ms' };
    const ref = (samples: number[]) => spread(samples).median;
    return [
      row(
        { ...base, metric: "paced stream's added latency p99, another tenant bursting", reference: ref(alone), referenceIs: 'added p99 with no burst', target: '≤ 15 ms' },
        spread(beside),
        (v) => v <= 15,
      ),
      row({ ...base, metric: 'paced stream p99 read direct, meanwhile', reference: ref(aloneDirect), referenceIs: 'with no burst', target: null }, spread(besideDirect)),
      row(
        { ...base, metric: 'GET /healthz p99, another tenant bursting', reference: ref(healthAlone), referenceIs: 'with no burst', target: '≤ 50 ms' },
        spread(healthBurst),
        (v) => v <= 50,
      ),
    ];
  } finally {
    await gateway.stop();
  }
}
