import { randomUUID } from 'node:crypto';
import type { StoreUsage } from '../../lambdas/adapters/aws/dynamodb/store/store.js';
import type { Bench, Row } from '../support/bench.js';
import { row } from '../support/bench.js';
import { PRICES } from '../support/prices.js';
import type { Script } from '../support/script.js';
import { readRun, runProblem } from '../support/sse-reader.js';
import { functionShape, type FunctionShape } from '../support/stack.js';
import { mean, spread } from '../support/stats.js';

const NAME = 'cost model (AWS shape)';
const RUNS_PRICED = 1000;

interface Capacity {
  readUnits: number;
  writeUnits: number;
  requests: number;
}

interface Usage {
  usage: Record<string, StoreUsage>;
  capacity: Record<string, Capacity>;
  dispatches: number[];
  queue: { sends: number; receives: number; deletes: number; holds: number };
}

/** Per run, over one wave. */
interface WaveFigures {
  writeRequests: number;
  writeUnits: number;
  /** Of the write units, the run's usage record (table and index): what metering adds. */
  usageRecordUnits: number;
  readRequests: number;
  /** As dynalite bills them (ReturnConsumedCapacity), reads and writes. */
  consumedReadUnits: number;
  consumedWriteUnits: number;
  queueRequests: number;
  dispatcherSeconds: number;
  streamSeconds: number;
  /** CPU of the whole gateway process (doors, dispatcher and dynalite), per run. */
  cpuMs: number;
}

const sum = (parts: Record<string, StoreUsage>, key: keyof StoreUsage) => Object.values(parts).reduce((total, part) => total + part[key], 0);
const sumCapacity = (parts: Record<string, Capacity>, key: keyof Capacity) => Object.values(parts).reduce((total, part) => total + part[key], 0);

/** Lambda bills duration rounded up to the millisecond. */
const billedSeconds = (ms: number) => Math.ceil(ms) / 1000;

export interface CostBreakdown {
  perRuns: number;
  dynamodbWrites: number;
  dynamodbReads: number;
  lambdaCompute: number;
  lambdaRequests: number;
  sqs: number;
  apiGateway: number;
  streamHandlerEstimate: number;
  total: number;
}

/**
 * Estimated, not measured (the stream handler is not run here): with a 1 s batching window a run
 * of `seconds` meets about one batch a second; per batch its events cost an events.read and a push
 * plan (runs.get + pushConfigs.list, even with no push config), and each of its ~3 status changes a
 * push plan; ~5 ms of DynamoDB round trip per read; (events + 6) / 100 invocations' worth of records.
 */
function streamHandlerEstimate(eventsPerRun: number, seconds: number, shape: FunctionShape): { usd: number; reads: number } {
  const reads = seconds * 3 + 3 * 2;
  const gbSecond = shape.architecture === 'arm64' ? PRICES.lambda.perGbSecondArm64 : PRICES.lambda.perGbSecondX86;
  const compute = reads * 0.005 * (shape.memoryMb / 1024) * gbSecond;
  const invocations = (eventsPerRun + 6) / 100;
  return {
    usd: compute + (invocations * PRICES.lambda.perMillionRequests) / 1e6 + (reads * PRICES.dynamodb.perMillionReadRequestUnits) / 1e6,
    reads,
  };
}

/** A run's log is one DynamoDB partition: on demand, about 1,000 write units a second. */
const PARTITION_WRITE_UNITS_PER_SECOND = 1_000;
const BURST_EVENTS = 15_000;

/**
 * What a burst costs once DynamoDB throttles its log's partition: its events' write units (as this
 * wave measured them, per event), written no faster than the partition takes them; the dispatcher
 * and the caller's stream are held that long at least (throttled attempts are not billed; their
 * requests are the store's retries, backing off up to a second).
 */
function burstUnderThrottling(figures: WaveFigures, shapes: { dispatcher: FunctionShape; doors: FunctionShape }, eventsPerRun: number): { writeUnits: number; seconds: number; usd: number } {
  const writeUnits = (figures.writeUnits / eventsPerRun) * BURST_EVENTS;
  const seconds = writeUnits / PARTITION_WRITE_UNITS_PER_SECOND;
  const gbSecond = (shape: FunctionShape) => (shape.architecture === 'arm64' ? PRICES.lambda.perGbSecondArm64 : PRICES.lambda.perGbSecondX86) * (shape.memoryMb / 1024);
  const usd = (writeUnits * PRICES.dynamodb.perMillionWriteRequestUnits) / 1e6 + seconds * (gbSecond(shapes.dispatcher) + gbSecond(shapes.doors));
  return { writeUnits, seconds, usd };
}

function price(figures: WaveFigures, shapes: { dispatcher: FunctionShape; doors: FunctionShape; streamHandler: FunctionShape }, eventsPerRun: number): CostBreakdown {
  const n = RUNS_PRICED;
  const gbSecond = (shape: FunctionShape) => (shape.architecture === 'arm64' ? PRICES.lambda.perGbSecondArm64 : PRICES.lambda.perGbSecondX86);
  const compute =
    figures.dispatcherSeconds * (shapes.dispatcher.memoryMb / 1024) * gbSecond(shapes.dispatcher) +
    figures.streamSeconds * (shapes.doors.memoryMb / 1024) * gbSecond(shapes.doors);
  const streamHandler = streamHandlerEstimate(eventsPerRun, figures.streamSeconds, shapes.streamHandler).usd;
  const parts = {
    dynamodbWrites: (figures.writeUnits * PRICES.dynamodb.perMillionWriteRequestUnits) / 1e6,
    dynamodbReads: (figures.consumedReadUnits * PRICES.dynamodb.perMillionReadRequestUnits) / 1e6,
    lambdaCompute: compute,
    // Two invocations a run: the streaming door that answers the POST, and the dispatcher.
    lambdaRequests: (2 * PRICES.lambda.perMillionRequests) / 1e6,
    sqs: (figures.queueRequests * PRICES.sqs.perMillionFifoRequests) / 1e6,
    apiGateway: PRICES.apiGateway.perMillionRestRequests / 1e6,
    streamHandlerEstimate: streamHandler,
  };
  const perRun = Object.values(parts).reduce((total, part) => total + part, 0);
  const scaled = Object.fromEntries(Object.entries(parts).map(([key, value]) => [key, value * n])) as Omit<CostBreakdown, 'perRuns' | 'total'>;
  return { perRuns: n, ...scaled, total: perRun * n };
}

/**
 * Runs of 100 events lasting 10 s each (one event every 100 ms), on the AWS wiring (separate
 * door and dispatcher stores, polling change feeds), several at once. The store requests and
 * write units are the adapter's own counts (`DynamoStore.sent`); read units are what
 * dynalite reports as consumed; durations are measured (the door's invocation lasts as long as
 * its stream, the dispatcher's as long as `dispatchRun`).
 */
export interface CostModel {
  rows: Row[];
  breakdown: CostBreakdown;
  /** The same measured run priced at other memory sizes (durations unchanged: the run waits on the agent, not the CPU). */
  whatIf: { dispatcherMb: number; doorsMb: number; total: number }[];
  assumptions: Record<string, unknown>;
}

export async function costModel(bench: Bench): Promise<CostModel> {
  const plan: Script = { events: 100, intervalMs: 100, deltaChars: 6 };
  const waves = bench.quick ? 1 : 3;
  const perWave = bench.quick ? 4 : 10;
  const shapes = {
    dispatcher: functionShape('dispatcher.ts', 'Dispatcher'),
    doors: functionShape('doors-api.ts', 'Streaming'),
    streamHandler: functionShape('stream-handler.ts', 'StreamHandler'),
  };
  const gateway = await bench.startGateway('aws', 'scenario-6');
  try {
    await gateway.registerAgent('ten-seconds', plan);
    await gateway.registerAgent('warm', { ...plan, intervalMs: 0 });
    const url = (id: string) => `${gateway.url}/agui/${id}`;
    const settledDispatches = async (count: number) => {
      for (;;) {
        const now = await gateway.child.call<Usage>('usage');
        if (now.dispatches.length >= count) return now;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    await readRun(url('warm'), { threadId: randomUUID(), runId: randomUUID() });
    let dispatched = 1;
    await settledDispatches(dispatched);

    const waveFigures: WaveFigures[] = [];
    for (let wave = 0; wave < waves; wave++) {
      const before = await gateway.child.call<Usage>('usage');
      const cpuBefore = await gateway.child.call<NodeJS.CpuUsage>('cpu');
      const reads = await gateway.profiled(`wave-${wave + 1}`, () =>
        Promise.all(Array.from({ length: perWave }, () => readRun(url('ten-seconds'), { threadId: randomUUID(), runId: randomUUID() }))),
      );
      dispatched += perWave;
      const after = await settledDispatches(dispatched);
      const cpuAfter = await gateway.child.call<NodeJS.CpuUsage>('cpu');
      for (const problem of reads.map((read) => runProblem(read, plan.events)).filter(Boolean)) bench.log(`  error: ${problem}`);
      const delta = (key: keyof StoreUsage) => (sum(after.usage, key) - sum(before.usage, key)) / perWave;
      const consumed = (key: keyof Capacity) => (sumCapacity(after.capacity, key) - sumCapacity(before.capacity, key)) / perWave;
      const queue = (u: Usage) => u.queue.sends + u.queue.receives + u.queue.deletes + u.queue.holds;
      const figures: WaveFigures = {
        writeRequests: delta('writeRequests'),
        writeUnits: delta('writeUnits'),
        usageRecordUnits: delta('usageRecordUnits'),
        readRequests: delta('readRequests'),
        consumedReadUnits: consumed('readUnits'),
        consumedWriteUnits: consumed('writeUnits'),
        queueRequests: (queue(after) - queue(before)) / perWave,
        dispatcherSeconds: mean(after.dispatches.slice(before.dispatches.length).map(billedSeconds)),
        streamSeconds: mean(reads.map((read) => billedSeconds(read.endedAt - read.startedAt))),
        cpuMs: (cpuAfter.user + cpuAfter.system - cpuBefore.user - cpuBefore.system) / 1000 / perWave,
      };
      waveFigures.push(figures);
      const perStore = Object.entries(after.usage)
        .map(([name, u]) => `${name} ${((u.readRequests - before.usage[name].readRequests) / perWave).toFixed(0)} reads/${((u.writeRequests - before.usage[name].writeRequests) / perWave).toFixed(0)} writes`)
        .join(', ');
      bench.log(
        `  wave ${wave + 1}: per run ${figures.writeRequests.toFixed(1)} write requests, ${figures.writeUnits.toFixed(1)} WU (dynalite: ${figures.consumedWriteUnits.toFixed(1)}), ${figures.readRequests.toFixed(1)} read requests (${perStore}), ${figures.consumedReadUnits.toFixed(1)} RU; dispatcher ${figures.dispatcherSeconds.toFixed(2)} s, stream ${figures.streamSeconds.toFixed(2)} s, gateway CPU ${figures.cpuMs.toFixed(0)} ms`,
      );
    }
    const pick = (key: keyof WaveFigures) => spread(waveFigures.map((f) => f[key]));
    const costs = waveFigures.map((figures) => price(figures, shapes, plan.events));
    const totals = spread(costs.map((c) => c.total));
    const medianWave = Math.max(0, costs.findIndex((c) => c.total === totals.median));
    const breakdown = costs[medianWave];
    const whatIf = [
      [512, 512],
      [512, 256],
      [256, 256],
      [128, 128],
    ].map(([dispatcherMb, doorsMb]) => ({
      dispatcherMb,
      doorsMb,
      total: price(
        waveFigures[medianWave],
        { ...shapes, dispatcher: { ...shapes.dispatcher, memoryMb: dispatcherMb }, doors: { ...shapes.doors, memoryMb: doorsMb } },
        plan.events,
      ).total,
    }));
    const gbSeconds = waveFigures.map((f) => f.dispatcherSeconds * (shapes.dispatcher.memoryMb / 1024) + f.streamSeconds * (shapes.doors.memoryMb / 1024));
    const base = { scenario: 6, name: NAME, reference: null, target: null };
    const burst = burstUnderThrottling(waveFigures[medianWave], shapes, plan.events);
    bench.log(
      `  a ${BURST_EVENTS.toLocaleString('en-US')}-event burst, one partition at ${PARTITION_WRITE_UNITS_PER_SECOND} WU/s: ${burst.writeUnits.toFixed(0)} WU over at least ${burst.seconds.toFixed(1)} s of dispatcher and stream, $${burst.usd.toFixed(4)}`,
    );
    const rows: Row[] = [
      row({ ...base, metric: 'DynamoDB write requests per run (adapter count)', unit: 'requests' }, pick('writeRequests')),
      row({ ...base, metric: 'DynamoDB write units per run (adapter count)', unit: 'WRU' }, pick('writeUnits')),
      row({ ...base, metric: 'DynamoDB write units per run (dynalite ConsumedCapacity)', unit: 'WRU' }, pick('consumedWriteUnits')),
      row({ ...base, metric: 'of which the usage record (table + byKey index)', unit: 'WRU' }, pick('usageRecordUnits')),
      row({ ...base, metric: 'DynamoDB read requests per run (adapter count)', unit: 'requests' }, pick('readRequests')),
      row({ ...base, metric: 'DynamoDB read units per run (dynalite ConsumedCapacity)', unit: 'RRU' }, pick('consumedReadUnits')),
      row({ ...base, metric: `dispatcher Lambda duration (${shapes.dispatcher.memoryMb} MB ${shapes.dispatcher.architecture})`, unit: 's' }, pick('dispatcherSeconds')),
      row({ ...base, metric: `streaming door Lambda duration (${shapes.doors.memoryMb} MB ${shapes.doors.architecture})`, unit: 's' }, pick('streamSeconds')),
      row({ ...base, metric: 'Lambda GB-s per run', unit: 'GB-s' }, spread(gbSeconds)),
      row(
        { ...base, metric: 'gateway CPU per run (doors + dispatcher + dynalite, one process)', unit: 'ms', note: 'what the functions compute in their 10 s: sizes their memory' },
        pick('cpuMs'),
      ),
      row(
        {
          ...base,
          metric: `one run bursting ${BURST_EVENTS.toLocaleString('en-US')} events, its log's partition throttled at ${PARTITION_WRITE_UNITS_PER_SECOND} WU/s`,
          unit: 'USD',
          note: `derived from this wave's write units an event: ${burst.writeUnits.toFixed(0)} WU (throttled attempts are not billed), the dispatcher and the stream held ≥ ${burst.seconds.toFixed(1)} s while the writes are retried`,
        },
        spread([burst.usd]),
      ),
      row(
        { ...base, metric: `gateway cost of ${RUNS_PRICED} runs × 100 events × 10 s`, unit: 'USD', target: '≤ $0.20', note: `${PRICES.region} on-demand prices as of ${PRICES.asOf}` },
        totals,
        (v) => v <= 0.2,
      ),
    ];
    return {
      rows,
      breakdown,
      whatIf,
      assumptions: {
        functions: shapes,
        runsPerWave: perWave,
        waves,
        eventsPerRun: plan.events,
        eventIntervalMs: plan.intervalMs,
        notes: [
          'DynamoDB write units and requests: DynamoStore.sent (the adapter counts every call it sends); read units: what dynalite reports with ReturnConsumedCapacity=TOTAL (consistent reads, 4 KB units).',
          'The doors and the dispatcher each poll the store through PollingChangeFeed, as they do on AWS (separate Lambdas); the local runtime hands changes over in-process and reads far less.',
          'Lambda durations are measured: the streaming door invocation = the client request to the end of its SSE stream; the dispatcher = dispatchRun. Billed to the ms, no init duration (warm).',
          'SQS FIFO: one SendMessage, one ReceiveMessage and one DeleteMessage per run (the event source mapping batch of 1); its idle long polls are not per run and are left out.',
          'API Gateway REST: one request per run; streamed bytes and data transfer are left out.',
          'Stream handler (DynamoDB Streams → Lambda, push notifications): estimated, not measured: one batch a second of run, 3 reads per batch for its events and 2 per status change (push planning reads even with no push config), 5 ms a read, (events + 6) / 100 invocations.',
          'Left out: CloudWatch Logs ingestion and X-Ray traces (a few hundred bytes of logs and a few sampled traces per run), storage, free tiers.',
        ],
      },
    };
  } finally {
    await gateway.stop();
  }
}
