/**
 * `npm run bench`: what funduq costs, measured side by side (issues 7, 13, 14). Scenarios 1–7 against a
 * scripted AG-UI agent on loopback, the gateway in a process of its own; 1–5 on the SQLite store
 * (`npm start`'s, with the targets) and again with FUNDUQ_STORE=dynamodb (the DynamoDB adapter on
 * dynalite, no target); prints a table and writes bench/results.json. Options (after `--`):
 *   --quick                 a smaller version of every scenario, under a minute
 *   --profile               V8's CPU profiler around each measured phase, in the gateway's
 *                           process: bench/profiles/*.cpuprofile, summarised by layer
 *   --only 1,3              some scenarios (written to results-only-1-3.json)
 *   --store sqlite          the local scenarios on one store only (sqlite or dynamodb)
 * Exits non-zero only when a scenario could not run; a missed target is a figure, not a failure.
 */
import { cpus, loadavg, totalmem, type as osType, release } from 'node:os';
import { existsSync, readdirSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { BENCH_DIR, PROFILE_DIR, startGateway, type Bench, type Row } from './support/bench.js';
import { startChild } from './support/child.js';
import { stopProber } from './support/health.js';
import { PRICES } from './support/prices.js';
import { summarize } from './support/profile-summary.js';
import { pacedRelay } from './scenarios/1-paced-relay.js';
import { burstRelay } from './scenarios/2-burst-relay.js';
import { a2aStreaming } from './scenarios/3-a2a.js';
import { fanIn } from './scenarios/4-fan-in.js';
import { queueHandOff } from './scenarios/5-queue-handoff.js';
import { costModel, type CostModel } from './scenarios/6-cost.js';
import { listTasks } from './scenarios/7-list-tasks.js';
import { fairness } from './scenarios/8-fairness.js';
import { healthUnderLoad } from './scenarios/9-health-under-load.js';
import { actorChain } from './scenarios/10-actor-chain.js';
import { traceFlush } from './scenarios/11-trace-flush.js';
import { audit } from './scenarios/12-audit.js';
import { consolePages } from './scenarios/13-console.js';
import { awsFirstEvent } from './scenarios/14-aws-first-event.js';
import type { LocalStoreKind } from '../lambdas/runtimes/local.js';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const profile = args.includes('--profile');
const onlyAt = args.findIndex((arg) => arg === '--only' || arg.startsWith('--only='));
const only =
  onlyAt < 0 ? undefined : new Set((args[onlyAt].includes('=') ? args[onlyAt].split('=')[1] : args[onlyAt + 1] ?? '').split(',').map(Number));

const storeAt = args.findIndex((arg) => arg === '--store' || arg.startsWith('--store='));
const onlyStore = storeAt < 0 ? undefined : args[storeAt].includes('=') ? args[storeAt].split('=')[1] : args[storeAt + 1];

const log = (line: string) => console.log(line);
const startedAt = Date.now();
// Other work on the machine moves every figure: the load when the run began is kept with them.
const startLoad = loadavg().map((load) => Math.round(load * 100) / 100);

let cost: Omit<CostModel, 'rows'> | undefined;
/** The local stores a scenario runs on: the first carries the targets, the others are reported beside it. */
const LOCAL_STORES: readonly LocalStoreKind[] = ['sqlite', 'dynamodb'];
const scenarios: { id: number; title: string; run: (bench: Bench, store: LocalStoreKind) => Promise<Row[]>; stores: readonly (LocalStoreKind | 'aws')[] }[] = [
  { id: 1, title: 'paced relay: 500 events, one every 10 ms, stock @ag-ui/client', run: pacedRelay , stores: LOCAL_STORES },
  { id: 2, title: 'burst relay: 2,000 events as fast as the agent can', run: burstRelay , stores: LOCAL_STORES },
  { id: 3, title: "A2A: 2,000 artifact chunks, funduq's door vs the @a2a-js/sdk reference", run: a2aStreaming , stores: LOCAL_STORES },
  { id: 4, title: 'fan-in: 200 concurrent runs on 200 threads, 100 events each', run: fanIn , stores: LOCAL_STORES },
  { id: 5, title: 'queue hand-off: 50 threads × (1 running + 8 queued)', run: queueHandOff , stores: LOCAL_STORES },
  {
    id: 6,
    title: 'cost model: 100-event runs of 10 s on the AWS wiring',
    run: async (bench) => {
      const { rows, ...rest } = await costModel(bench);
      cost = rest;
      return rows;
    },
    stores: ['aws'],
  },
  { id: 7, title: 'ListTasks: a page of 50 over 10,000 tasks, filtered and not', run: listTasks, stores: LOCAL_STORES },
  { id: 8, title: "fairness: one tenant's paced stream while another bursts 2 × 15,000 events", run: fairness, stores: ['sqlite'] },
  { id: 9, title: '/healthz under 300 concurrent 340 KB POSTs, and under 12 readers that never read', run: healthUnderLoad, stores: ['sqlite'] },
  { id: 10, title: 'actor chains: checking a 5-hop chain at the door and at the agent', run: actorChain, stores: ['sqlite'] },
  { id: 11, title: "trace flush: a Lambda invocation's export of its spans to CloudWatch, in the AWS box", run: traceFlush, stores: ['aws'] },
  { id: 12, title: "audit: the offline verifier over 1,000,000 records, and a run's audit record at its admission", run: audit, stores: ['sqlite'] },
  { id: 13, title: 'console: the threads page over 10,000 threads, and a run page of 20,000 events in a browser', run: consolePages, stores: LOCAL_STORES },
  { id: 14, title: 'first event on AWS: the stack in the AWS box with a region\'s latencies, on an idle thread and behind another run', run: awsFirstEvent, stores: ['aws'] },
];

function format(value: number | null, unit: string): string {
  if (value === null || !Number.isFinite(value)) return '—';
  if (unit === 'USD') return `$${value.toFixed(3)}`;
  const abs = Math.abs(value);
  return abs >= 100 ? value.toFixed(0) : abs >= 10 ? value.toFixed(1) : value.toFixed(2);
}

function table(rows: Row[]): string {
  const header = ['#', 'store', 'metric', 'value', 'unit', 'min–max', 'reference', 'target', 'met'];
  const lines = rows.map((r) => [
    String(r.scenario),
    r.store ?? '',
    r.metric,
    format(r.value, r.unit),
    r.unit,
    r.spread ? `${format(r.spread.min, r.unit)}–${format(r.spread.max, r.unit)}` : '',
    r.reference === null ? '' : `${format(r.reference, r.unit)}${r.referenceIs ? ` (${r.referenceIs})` : ''}`,
    r.target ?? '',
    r.met === null ? (r.value === null ? 'not measured' : '') : r.met ? 'yes' : 'NO',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((line) => line[i].length)));
  const render = (cells: string[]) => cells.map((cell, i) => (i === 3 ? cell.padStart(widths[i]) : cell.padEnd(widths[i]))).join('  ').trimEnd();
  return [render(header), widths.map((w) => '-'.repeat(w)).join('  '), ...lines.map(render)].join('\n');
}

function machine() {
  const cpu = cpus();
  return {
    cpu: cpu[0]?.model ?? 'unknown',
    cores: cpu.length,
    memoryGb: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    os: `${osType()} ${release()}`,
    node: process.version,
    loadAverageAtStart: startLoad,
  };
}

async function main(): Promise<number> {
  if (profile) await rm(PROFILE_DIR, { recursive: true, force: true });
  const agent = await startChild('agent.ts', { name: 'scripted agent' });
  const agentUrl = await agent.call<string>('url');
  const bench: Bench = {
    quick,
    profile,
    agentUrl,
    agent,
    log,
    startGateway: (mode, name, store, options) => startGateway(agentUrl, agent, mode, name, profile, store, options),
  };
  log(`funduq bench (${quick ? 'quick' : 'full'}) on ${machine().cores} × ${machine().cpu}, Node ${process.version}, load average ${startLoad.join(' ')}`);
  if (startLoad[0] > cpus().length * 0.75) log('  the machine is busy with other work: every figure below moves with it');
  const rows: Row[] = [];
  const failures: string[] = [];
  const selected = scenarios.filter((s) => !only || only.has(s.id));
  const runScenario = async (scenario: (typeof scenarios)[number], store: LocalStoreKind | 'aws') => {
    log(`\n[${scenario.id}] ${scenario.title}${store === 'aws' ? '' : ` (${store === 'sqlite' ? 'SQLite, as npm start' : 'FUNDUQ_STORE=dynamodb'})`}`);
    const began = Date.now();
    try {
      const got = await scenario.run(bench, store === 'aws' ? 'dynamodb' : store);
      log(`    (${((Date.now() - began) / 1000).toFixed(1)} s)`);
      // The targets are the default store's; the others are reported beside it.
      return got.map((r): Row => (store === LOCAL_STORES[0] || store === 'aws' ? { ...r, store } : { ...r, store, target: null, met: null }));
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      failures.push(`scenario ${scenario.id} (${store}): ${message}`);
      log(`    could not run: ${message}`);
      return [{ scenario: scenario.id, store, name: scenario.title, metric: 'could not run', value: null, unit: '', reference: null, target: null, met: null, note: message }];
    }
  };
  for (const scenario of selected) {
    for (const store of scenario.stores) if (!onlyStore || store === onlyStore || store === 'aws') rows.push(...(await runScenario(scenario, store)));
  }

  await agent.stop();
  await stopProber();

  // Scenario by scenario, each store's rows together (the sort is stable).
  const storeOrder = (r: Row) => (r.store === undefined ? 0 : ['aws', ...LOCAL_STORES].indexOf(r.store));
  rows.sort((a, b) => a.scenario - b.scenario || storeOrder(a) - storeOrder(b));
  log(`\n${table(rows)}`);
  for (const r of rows.filter((r) => r.note)) log(`  [${r.scenario}${r.store ? ` ${r.store}` : ''}] ${r.metric}: ${r.note}`);
  if (cost) {
    log(`\ncost of ${cost.breakdown.perRuns} runs (USD, ${PRICES.region}, prices as of ${PRICES.asOf}):`);
    for (const [part, usd] of Object.entries(cost.breakdown)) if (part !== 'perRuns') log(`  ${part.padEnd(22)} ${usd.toFixed(4)}`);
    log('  the same runs at other memory sizes (dispatcher / streaming door):');
    for (const option of cost.whatIf) log(`    ${option.dispatcherMb} / ${option.doorsMb} MB: $${option.total.toFixed(3)}`);
  }

  const profiles: Record<string, ReturnType<typeof summarize>> = {};
  if (profile && existsSync(PROFILE_DIR)) {
    for (const file of readdirSync(PROFILE_DIR).filter((name) => name.endsWith('.cpuprofile'))) {
      const summary = summarize(join(PROFILE_DIR, file), 12);
      profiles[file] = summary;
      log(`\nprofile ${file}: ${summary.busyMs} ms busy of ${summary.wallMs} ms`);
      for (const hot of summary.byLayer) log(`  ${hot.pct.toFixed(1).padStart(5)}%  ${hot.what}`);
      log('  by function (self, native counted for its caller):');
      for (const hot of summary.byFunction.slice(0, 10)) log(`  ${hot.pct.toFixed(1).padStart(5)}%  ${hot.what}`);
    }
  }

  const results = {
    generatedAt: new Date().toISOString(),
    mode: quick ? 'quick' : 'full',
    durationSeconds: Math.round((Date.now() - startedAt) / 1000),
    machine: { ...machine(), loadAverageAtEnd: loadavg().map((load) => Math.round(load * 100) / 100) },
    layout:
      'three processes on one machine: the harness (clients), the scripted agent (AG-UI endpoint and the @a2a-js/sdk reference server), the gateway (startLocalGateway on a temp dir: SQLite, or with FUNDUQ_STORE=dynamodb the DynamoDB adapter on dynalite on a thread of its own; the AWS wiring for scenario 6)',
    results: rows,
    cost: cost ? { ...cost, prices: PRICES } : undefined,
    profiles: profile ? profiles : undefined,
    failures,
  };
  // Neither a partial run (--only) nor a quick one overwrites the figures of record.
  const file = only ? `results-only-${[...only].sort().join('-')}.json` : quick ? 'results-quick.json' : 'results.json';
  await writeFile(join(BENCH_DIR, file), `${JSON.stringify(results, null, 2)}\n`);
  log(`\nwrote bench/${file} (${results.durationSeconds} s)`);
  return failures.length > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(`bench could not run: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(1);
  },
);
