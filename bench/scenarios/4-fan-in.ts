import { randomUUID } from 'node:crypto';
import { availableParallelism } from 'node:os';
import type { LocalStoreKind } from '../../lambdas/runtimes/local.js';
import type { Bench, Row } from '../support/bench.js';
import { row } from '../support/bench.js';
import { startOtlpReceiver } from '../support/otlp-receiver.js';
import { scriptQuery, type Script } from '../support/script.js';
import { readRun, runProblem, type Read } from '../support/sse-reader.js';
import { percentile, spread } from '../support/stats.js';

const NAME = 'fan-in';
const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);
const MB = 1024 * 1024;

interface Wave {
  runsPerSecond: number;
  /** Per run: request start → its last event. */
  toLast: number[];
  errors: string[];
}

/** `runs` runs at once, each on a thread of its own, read with the bare SSE reader. */
async function wave(url: string, runs: number, events: number): Promise<Wave> {
  const startedAt = performance.now();
  const reads: Read[] = await Promise.all(
    Array.from({ length: runs }, () => readRun(url, { threadId: randomUUID(), runId: randomUUID() })),
  );
  const seconds = (performance.now() - startedAt) / 1000;
  const errors = reads.map((read) => runProblem(read, events)).filter((problem): problem is string => problem !== undefined);
  return {
    runsPerSecond: runs / seconds,
    toLast: reads.filter((read) => read.arrivals.length > 0).map((read) => read.arrivals.at(-1)! - read.startedAt),
    errors,
  };
}

/**
 * 200 runs at once on 200 threads, 100 events each as fast as the agent sends them. The
 * gateway's RSS is sampled in its own process every 20 ms; the same wave straight to the agent
 * is the reference. A second gateway traces every run (sampling 1.0) to a local OTLP receiver,
 * its wave after the untraced one in each repetition: its CPU per run beside the untraced one's.
 */
export async function fanIn(bench: Bench, store: LocalStoreKind): Promise<Row[]> {
  const runs = bench.quick ? 50 : 200;
  const plan: Script = { events: 100, intervalMs: 0, deltaChars: 6 };
  const reps = bench.quick ? 2 : 3;
  const gateway = await bench.startGateway('local', `scenario-4-${store}`, store);
  const receiver = await startOtlpReceiver();
  const traced = await bench.startGateway('local', `scenario-4-${store}-traced`, store, { traceTo: receiver.url });
  try {
    await gateway.registerAgent('fan', plan);
    await traced.registerAgent('fan', plan);
    const tracedThrough = `${traced.url}/agui/fan`;
    await wave(tracedThrough, 20, plan.events);
    await traced.child.call('flushTraces');
    const direct = `${bench.agentUrl}/agui?${scriptQuery(plan)}`;
    const through = `${gateway.url}/agui/fan`;
    // Unmeasured: a small wave each way warms the code paths and the connection pools.
    await wave(direct, 20, plan.events);
    await wave(through, 20, plan.events);
    const figures = { rate: [] as number[], p50: [] as number[], p99: [] as number[], errors: [] as number[], rss: [] as number[] };
    // CPU ms per run of each process (user + system): the three share the machine's cores.
    const cpu = { gateway: [] as number[], others: [] as number[], direct: [] as number[], traced: [] as number[] };
    const tracedCpu = async () => {
      const used = await traced.child.call<NodeJS.CpuUsage>('cpu');
      return (used.user + used.system) / 1000;
    };
    const tracedRate: number[] = [];
    let tracedErrors = 0;
    const used = async () => {
      const [g, a] = await Promise.all([gateway.child.call<NodeJS.CpuUsage>('cpu'), bench.agent.call<NodeJS.CpuUsage>('cpu')]);
      const h = process.cpuUsage();
      return { gateway: (g.user + g.system) / 1000, others: (a.user + a.system + h.user + h.system) / 1000 };
    };
    const reference = { rate: [] as number[], p50: [] as number[], p99: [] as number[] };
    for (let rep = 0; rep < reps; rep++) {
      const beforeDirect = await used();
      const d = await wave(direct, runs, plan.events);
      const afterDirect = await used();
      cpu.direct.push((afterDirect.others - beforeDirect.others) / runs);
      reference.rate.push(d.runsPerSecond);
      reference.p50.push(percentile(d.toLast, 50));
      reference.p99.push(percentile(d.toLast, 99));
      await gateway.child.call('sampleMemory');
      const before = await used();
      const f = await gateway.profiled(`wave-${rep + 1}`, () => wave(through, runs, plan.events));
      const after = await used();
      cpu.gateway.push((after.gateway - before.gateway) / runs);
      cpu.others.push((after.others - before.others) / runs);
      const memory = await gateway.child.call<{ peakRss: number; maxRss: number; atPeak: NodeJS.MemoryUsage }>('memoryPeak');
      figures.rate.push(f.runsPerSecond);
      figures.p50.push(percentile(f.toLast, 50));
      figures.p99.push(percentile(f.toLast, 99));
      figures.errors.push(f.errors.length);
      figures.rss.push(memory.peakRss / MB);
      for (const error of new Set(f.errors)) bench.log(`  error: ${error}`);
      const beforeTraced = await tracedCpu();
      const t = await wave(tracedThrough, runs, plan.events);
      await traced.child.call('flushTraces');
      cpu.traced.push(((await tracedCpu()) - beforeTraced) / runs);
      tracedRate.push(t.runsPerSecond);
      tracedErrors += t.errors.length;
      for (const error of new Set(t.errors)) bench.log(`  traced error: ${error}`);
      bench.log(`  rep ${rep + 1} traced: ${t.runsPerSecond.toFixed(1)} runs/s, gateway CPU per run ${cpu.traced.at(-1)!.toFixed(2)} ms (untraced ${cpu.gateway.at(-1)!.toFixed(2)} ms)`);
      bench.log(
        `  rep ${rep + 1}: ${f.runsPerSecond.toFixed(1)} runs/s (direct ${d.runsPerSecond.toFixed(1)}), last event p50 ${figures.p50.at(-1)!.toFixed(0)} ms p99 ${figures.p99.at(-1)!.toFixed(0)} ms, ${f.errors.length} errors, peak RSS ${figures.rss.at(-1)!.toFixed(0)} MB (V8 heap ${(memory.atPeak.heapTotal / MB).toFixed(0)} MB of which used ${(memory.atPeak.heapUsed / MB).toFixed(0)} MB, external ${(memory.atPeak.external / MB).toFixed(0)} MB)`,
      );
    }
    const base = { scenario: 4, name: `${NAME} (${runs} runs × ${plan.events} events)` };
    const ref = (samples: number[]) => spread(samples).median;
    const cores = availableParallelism();
    const machineAllows = cpu.gateway.map((g, i) => (cores * 1000) / (g + cpu.others[i]));
    return [
      row({ ...base, metric: 'runs/s', unit: 'runs/s', reference: ref(reference.rate), referenceIs: 'direct from the agent', target: '≥ 300 runs/s' }, spread(figures.rate), (v) => v >= 300),
      row({ ...base, metric: 'time to last event, p50', unit: 'ms', reference: ref(reference.p50), referenceIs: 'direct', target: null }, spread(figures.p50)),
      row({ ...base, metric: 'time to last event, p99', unit: 'ms', reference: ref(reference.p99), referenceIs: 'direct', target: null }, spread(figures.p99)),
      // Errors are added up over the repetitions, and the peak is the highest of them: a target on
      // "none" or on a peak is missed by one bad repetition, not by the median one.
      { ...row({ ...base, metric: 'errors (all repetitions)', unit: 'runs', reference: null, target: '0' }, spread(figures.errors)), value: sum(figures.errors), met: sum(figures.errors) === 0 },
      row({ ...base, metric: 'gateway CPU per run', unit: 'ms', reference: null, target: null }, spread(cpu.gateway)),
      // Issue 29: what the relay costs against what the two ends of the run cost, in the same repetition.
      row(
        { ...base, metric: "gateway CPU per run ÷ the agent's and the harness's together", unit: '×', reference: 1, referenceIs: 'agent + harness CPU per run, the same repetition', target: '≤ 1.5×' },
        spread(cpu.gateway.map((gateway, i) => gateway / cpu.others[i])),
        (v) => v <= 1.5,
      ),
      row(
        {
          ...base,
          metric: 'tracing on: gateway CPU per run',
          unit: 'ms',
          reference: ref(cpu.gateway),
          referenceIs: 'tracing off',
          target: 'within 10% of off',
          note: `sampling 1.0, exporting to a local OTLP receiver (${receiver.received().spans} spans in ${receiver.received().requests} exports); ${tracedErrors} errors; ${ref(tracedRate).toFixed(1)} runs/s`,
        },
        spread(cpu.traced),
        (v) => v <= ref(cpu.gateway) * 1.1,
      ),
      row(
        { ...base, metric: 'agent + harness CPU per run', unit: 'ms', reference: ref(cpu.direct), referenceIs: 'the same, direct', target: null },
        spread(cpu.others),
      ),
      row(
        {
          ...base,
          metric: `runs/s the machine's ${cores} cores allow (diagnostic)`,
          unit: 'runs/s',
          reference: null,
          target: null,
          note: "the cores' time over the CPU a run costs the three processes together (gateway, agent, harness): what a gateway on this machine could reach with the others' work as it is",
        },
        spread(machineAllows),
      ),
      { ...row({ ...base, metric: 'gateway peak RSS (highest repetition)', unit: 'MB', reference: null, target: '≤ 200 MB' }, spread(figures.rss)), value: Math.max(...figures.rss), met: Math.max(...figures.rss) <= 200 },
    ];
  } finally {
    await gateway.stop();
    await traced.stop();
    await receiver.close();
  }
}
