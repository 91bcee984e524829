import type { LocalStoreKind } from '../../lambdas/runtimes/local.js';
import type { Bench, Row } from '../support/bench.js';
import { startChild } from '../support/child.js';
import { row } from '../support/bench.js';
import { startOtlpReceiver } from '../support/otlp-receiver.js';
import { scriptQuery, type Script } from '../support/script.js';
import { percentile, spread } from '../support/stats.js';
import { readWithStockClient, type StockRead } from './stock-agui.js';

const NAME = 'paced relay';

/** A run as short as a run gets (RUN_STARTED, a message of one delta, RUN_FINISHED), for its first event. */
const SHORT: Script = { events: 5, intervalMs: 0, deltaChars: 6 };
/** Short runs each way per repetition: a first event is one sample a run, so its p50 needs many. */
const FIRST_RUNS = 20;

/**
 * 500 events, one every 10 ms, read with the stock @ag-ui/client straight from the agent and
 * through funduq (local gateway, durable store), the agent reached at its URL (agui-http) and
 * the same agent over a provider link (its process dialled out; `@funduq/provider`). Latency of an event = its arrival at the
 * client − the agent's send time; funduq's added latency is the difference of the two
 * distributions' percentiles in the same repetition (the clock offset between the agent's
 * process and the harness's cancels out). A second gateway traces every run (sampling 1.0) to
 * a local OTLP receiver; its reads go beside the others in each repetition, so tracing on and off
 * are measured on the same machine at the same time. The time to the first event is measured
 * again over FIRST_RUNS short runs each way in every repetition (one sample per run is noise),
 * the three ways in turn: direct, through funduq, and through a bare relay that only forwards the
 * bytes between the same two hops (the floor of any relay on this machine).
 */
export async function pacedRelay(bench: Bench, store: LocalStoreKind): Promise<Row[]> {
  const plan: Script = { events: bench.quick ? 100 : 500, intervalMs: 10, deltaChars: 6 };
  const reps = bench.quick ? 3 : 5;
  const gateway = await bench.startGateway('local', `scenario-1-${store}`, store);
  const receiver = await startOtlpReceiver();
  const traced = await bench.startGateway('local', `scenario-1-${store}-traced`, store, { traceTo: receiver.url });
  const bare = await startChild('bare-relay.ts', { name: 'bare relay' });
  try {
    await traced.registerAgent('paced', plan);
    await traced.registerAgent('warm', { ...plan, events: 50, intervalMs: 1 });
    const tracedThrough = `${traced.url}/agui/paced`;
    await readWithStockClient(`${traced.url}/agui/warm`);
    await gateway.registerAgent('paced', plan);
    await gateway.registerAgent('warm', { ...plan, events: 50, intervalMs: 1 });
    await gateway.registerAgent('short', SHORT);
    await gateway.linkAgent('paced-link', plan);
    await gateway.linkAgent('warm-link', { ...plan, events: 50, intervalMs: 1 });
    const direct = `${bench.agentUrl}/agui?${scriptQuery(plan)}`;
    const through = `${gateway.url}/agui/paced`;
    const linked = `${gateway.url}/agui/paced-link`;
    const shortDirect = `${bench.agentUrl}/agui?${scriptQuery(SHORT)}`;
    const shortThrough = `${gateway.url}/agui/short`;
    const { url: shortBare } = await bare.call<{ url: string }>('listen', { target: shortDirect });
    const { url: pacedBare } = await bare.call<{ url: string }>('listen', { target: direct });
    // Unmeasured: warms the JIT on both paths and opens the gateway's connection to the agent.
    await readWithStockClient(`${bench.agentUrl}/agui?${scriptQuery({ ...plan, events: 50, intervalMs: 1 })}`);
    await readWithStockClient(`${gateway.url}/agui/warm`);
    await readWithStockClient(`${gateway.url}/agui/warm-link`);

    const p50: number[] = [];
    const p99: number[] = [];
    const first: number[] = [];
    const directP50: number[] = [];
    const directP99: number[] = [];
    const directFirst: number[] = [];
    const link = { p50: [] as number[], p99: [] as number[], first: [] as number[] };
    /** The paced run through the bare relay: the floor of a relay's added latency on this machine. */
    const bareFloor = { p50: [] as number[], p99: [] as number[] };
    // Per repetition: the p50 of FIRST_RUNS short runs each way, alternated.
    const firstP50 = { added: [] as number[], direct: [] as number[], bare: [] as number[] };
    const tracing = { p50: [] as number[], p99: [] as number[] };
    await gateway.profiled('relay', async () => {
      for (let rep = 0; rep < reps; rep++) {
        // Alternate which side goes first, so neither always runs on a cooler machine.
        let d: StockRead;
        let f: StockRead;
        if (rep % 2 === 0) {
          d = await readWithStockClient(direct);
          f = await readWithStockClient(through);
        } else {
          f = await readWithStockClient(through);
          d = await readWithStockClient(direct);
        }
        const l = await readWithStockClient(linked);
        const t = await readWithStockClient(tracedThrough);
        const b = await readWithStockClient(pacedBare);
        bareFloor.p50.push(percentile(b.latencies, 50) - percentile(d.latencies, 50));
        bareFloor.p99.push(percentile(b.latencies, 99) - percentile(d.latencies, 99));
        tracing.p50.push(percentile(t.latencies, 50) - percentile(d.latencies, 50));
        tracing.p99.push(percentile(t.latencies, 99) - percentile(d.latencies, 99));
        for (const [side, read] of [['direct', d], ['funduq', f], ['funduq over a link', l], ['funduq traced', t]] as const) {
          if (read.events !== plan.events) bench.log(`  ${side}: ${read.events} events of ${plan.events} (last ${read.lastType})`);
        }
        p50.push(percentile(f.latencies, 50) - percentile(d.latencies, 50));
        p99.push(percentile(f.latencies, 99) - percentile(d.latencies, 99));
        first.push(f.firstEventMs - d.firstEventMs);
        directP50.push(percentile(d.latencies, 50));
        directP99.push(percentile(d.latencies, 99));
        directFirst.push(d.firstEventMs);
        link.p50.push(percentile(l.latencies, 50) - percentile(d.latencies, 50));
        link.p99.push(percentile(l.latencies, 99) - percentile(d.latencies, 99));
        link.first.push(l.firstEventMs - d.firstEventMs);
        const added: number[] = [];
        const straight: number[] = [];
        const floor: number[] = [];
        for (let run = 0; run < FIRST_RUNS; run++) {
          // Three ways a run, in an order that turns with each run (direct, funduq, the bare relay).
          const order = [shortDirect, shortThrough, shortBare].map((_, i, all) => all[(i + run) % all.length]);
          const read = new Map<string, StockRead>();
          for (const url of order) read.set(url, await readWithStockClient(url));
          const z = read.get(shortDirect)!;
          straight.push(z.firstEventMs);
          added.push(read.get(shortThrough)!.firstEventMs - z.firstEventMs);
          floor.push(read.get(shortBare)!.firstEventMs - z.firstEventMs);
        }
        firstP50.added.push(percentile(added, 50));
        firstP50.direct.push(percentile(straight, 50));
        firstP50.bare.push(percentile(floor, 50));
        bench.log(
          `  rep ${rep + 1}: first event over ${FIRST_RUNS} short runs each way, added p50 ${firstP50.added.at(-1)!.toFixed(2)} ms, a bare relay's ${firstP50.bare.at(-1)!.toFixed(2)} ms (direct p50 ${firstP50.direct.at(-1)!.toFixed(2)} ms)`,
        );
        bench.log(
          `  rep ${rep + 1}: added p50 ${p50.at(-1)!.toFixed(2)} ms, p99 ${p99.at(-1)!.toFixed(2)} ms, first event +${first.at(-1)!.toFixed(2)} ms; over a link ${link.p50.at(-1)!.toFixed(2)}, ${link.p99.at(-1)!.toFixed(2)}, +${link.first.at(-1)!.toFixed(2)} ms; traced ${tracing.p50.at(-1)!.toFixed(2)}, ${tracing.p99.at(-1)!.toFixed(2)} ms`,
        );
      }
    });
    const base = { scenario: 1, name: NAME, unit: 'ms' };
    await traced.child.call('flushTraces');
    const spans = receiver.received();
    const exported = `spans received by the OTLP receiver: ${spans.spans} in ${spans.requests} exports`;
    const ref = (samples: number[]) => spread(samples).median;
    return [
      row({ ...base, metric: 'added latency per event, p50', reference: ref(directP50), referenceIs: 'direct p50 latency', target: '≤ 0.5 ms' }, spread(p50), (v) => v <= 0.5),
      row({ ...base, metric: 'added latency per event, p99', reference: ref(directP99), referenceIs: 'direct p99 latency', target: '≤ 3 ms' }, spread(p99), (v) => v <= 3),
      // The floor of any relay between the same two hops on this machine (bench/processes/bare-relay.ts).
      row({ ...base, metric: 'a bare relay (bytes forwarded, nothing parsed or recorded): added latency per event, p50', reference: ref(directP50), referenceIs: 'direct p50 latency', target: null }, spread(bareFloor.p50)),
      row({ ...base, metric: 'a bare relay: added latency per event, p99', reference: ref(directP99), referenceIs: 'direct p99 latency', target: null }, spread(bareFloor.p99)),
      row({ ...base, metric: 'added time to first event (the paced run)', reference: ref(directFirst), referenceIs: 'direct time to first event', target: null }, spread(first)),
      row(
        { ...base, metric: `added time to first event, p50 of ${FIRST_RUNS} short runs`, reference: ref(firstP50.direct), referenceIs: 'direct time to first event, p50', target: '≤ 3 ms' },
        spread(firstP50.added),
        (v) => v <= 3,
      ),
      // The floor: a relay that only forwards bytes between the same two hops (bench/processes/bare-relay.ts).
      row(
        { ...base, metric: `a bare relay (bytes forwarded, nothing parsed or recorded): added time to first event, p50 of ${FIRST_RUNS} short runs`, reference: ref(firstP50.direct), referenceIs: 'direct time to first event, p50', target: null },
        spread(firstP50.bare),
      ),
      row({ ...base, metric: 'over a link: added latency per event, p50', reference: ref(p50), referenceIs: 'agui-http', target: '≤ 1 ms' }, spread(link.p50), (v) => v <= 1),
      row({ ...base, metric: 'over a link: added latency per event, p99', reference: ref(p99), referenceIs: 'agui-http', target: '≤ 5 ms' }, spread(link.p99), (v) => v <= 5),
      row({ ...base, metric: 'over a link: added time to first event', reference: ref(first), referenceIs: 'agui-http', target: '≤ 5 ms' }, spread(link.first), (v) => v <= 5),
      // Tracing on (sampling 1.0, exporting) beside off: the same reads, the difference within noise.
      row(
        { ...base, metric: 'tracing on: added latency per event, p50', reference: ref(p50), referenceIs: 'tracing off', target: '≤ 1 ms', note: exported },
        spread(tracing.p50),
        (v) => v <= 1,
      ),
      row({ ...base, metric: 'tracing on: added latency per event, p99', reference: ref(p99), referenceIs: 'tracing off', target: '≤ 5 ms' }, spread(tracing.p99), (v) => v <= 5),
    ];
  } finally {
    await gateway.stop();
    await traced.stop();
    await bare.stop();
    await receiver.close();
  }
}
