/**
 * The gateway under test, in a process of its own so that its CPU profile and peak RSS are the
 * gateway's alone. Two shapes:
 * - `local`: `startLocalGateway`, exactly what `npm start` runs (dynalite on a thread of this
 *   process, data in a temp dir, in-process thread queue and change feed);
 * - `aws`: the AWS wiring on one machine, as the handlers build it: the doors and the dispatcher
 *   each with their own DynamoStore and polling change feed (they are separate Lambdas and
 *   cannot hear each other), sharing one dynalite; an in-process FIFO per thread stands in for
 *   SQS FIFO. The cost model runs on it, so the store requests counted are the ones AWS would bill.
 */
import { randomUUID } from 'node:crypto';
import { Session } from 'node:inspector/promises';
import { writeFile } from 'node:fs/promises';
import { mkdtemp, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { join } from 'node:path';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { serve } from '@hono/node-server';
import type { DynamoStore, StoreUsage } from '../../lambdas/adapters/aws/dynamodb/store/store.js';
import { ensureTables, localDynamoClient, startDynalite } from '../../lambdas/adapters/local/dynalite.js';
import { InProcessThreadQueue } from '../../lambdas/adapters/local/thread-queue.js';
import { createTracing, type Tracing } from '../../lambdas/adapters/otel/tracing.js';
import { systemClock } from '../../lambdas/adapters/system-clock.js';
import type { Agent, Principal, StoredEvent } from '../../lambdas/core/model.js';
import type { ApiKeys } from '../../lambdas/doors/api-keys.js';
import type { AskTimer, RunStore, ThreadQueue } from '../../lambdas/core/ports.js';
import { ENV } from '../../lambdas/runtimes/environment.js';
import { startLocalGateway, type LocalStoreKind } from '../../lambdas/runtimes/local.js';
import { serveParent } from '../support/child.js';
import { script, type Script } from '../support/script.js';

/** What dynalite reports as consumed, the way DynamoDB bills it (ReturnConsumedCapacity: TOTAL). */
interface Capacity {
  readUnits: number;
  writeUnits: number;
  requests: number;
}

interface Shape {
  url: string;
  /** Where providers link, and funduq's public key (local shape only). */
  link?: { url: string; publicKey: string };
  /** The stores whose `sent` counts the cost model adds up (one per Lambda function in the AWS shape). */
  stores: Record<string, DynamoStore>;
  capacity?: Record<string, Capacity>;
  /** Wall time of each dispatch (the dispatcher Lambda's duration), AWS shape only. */
  dispatches: number[];
  /** SQS requests: sends, receives, deletes, and the visibility changes of messages kept for runs their door relays. */
  queue: { sends: number; receives: number; deletes: number; holds: number };
  close(): Promise<void>;
}

const TABLES = { runs: 'funduq-runs', runEvents: 'funduq-run-events' };

export type GatewayMode = 'local' | 'aws';
let shape: Shape | undefined;
/** The traced gateway's tracing, flushed on the harness's word so an export's cost falls in the phase it measures. */
let tracing: Tracing | undefined;
let dataDir: string | undefined;
let loopDelay: IntervalHistogram | undefined;

async function startLocal(store: LocalStoreKind, apiKeys?: ApiKeys, traceTo?: string): Promise<Shape> {
  dataDir = await mkdtemp(join(tmpdir(), 'funduq-bench-'));
  // Traced as `npm start` with OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and OTEL_TRACES_SAMPLER=always_on would be.
  tracing = traceTo ? createTracing({ endpoint: traceTo, serviceName: 'funduq-bench', sampler: { name: 'always_on' } }) : undefined;
  const local = await startLocalGateway({ dataDir, store, host: '127.0.0.1', port: 0, threadQueueLimit: 8, heartbeatMs: 15_000, ...(apiKeys ? { apiKeys } : {}), ...(tracing ? { tracing } : {}) });
  return {
    url: local.url,
    link: local.link,
    stores: { gateway: local.store as unknown as DynamoStore },
    dispatches: [],
    queue: { sends: 0, receives: 0, deletes: 0, holds: 0 },
    close: () => local.close(),
  };
}

/**
 * Adds ReturnConsumedCapacity to every request and sums what comes back. dynalite reports 0 for
 * a query that found nothing; DynamoDB bills every read at least one unit (half for an eventually
 * consistent one), so a read is counted at that minimum.
 */
function countCapacity(client: DynamoDBClient, into: Capacity): void {
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as Record<string, unknown>;
      input.ReturnConsumedCapacity = 'TOTAL';
      const result = await next(args);
      into.requests += 1;
      const consumed = (result.output as { ConsumedCapacity?: unknown }).ConsumedCapacity;
      let units = 0;
      for (const entry of Array.isArray(consumed) ? consumed : consumed ? [consumed] : []) {
        units += (entry as { CapacityUnits?: number }).CapacityUnits ?? 0;
      }
      if (/^(Get|Query|Scan|BatchGet)/.test(context.commandName ?? '')) {
        into.readUnits += Math.max(units, input.ConsistentRead === true ? 1 : 0.5);
      } else {
        into.writeUnits += units;
      }
      return result;
    },
    { step: 'initialize', name: 'benchConsumedCapacity' },
  );
}

async function startAwsShape(): Promise<Shape> {
  // Imported here only: the AWS wiring loads the AWS SDK's clients, which the local gateway (npm start) never loads.
  const { createStore, createWiring } = await import('../../lambdas/runtimes/aws.js');
  const { doorsApp } = await import('../../lambdas/runtimes/aws-doors.js');
  const { createProviders } = await import('../../lambdas/runtimes/providers.js');
  dataDir = await mkdtemp(join(tmpdir(), 'funduq-bench-aws-'));
  const dynalite = await startDynalite({ path: dataDir });
  const clock = systemClock;
  const ids = { newId: () => randomUUID() };
  const capacity: Record<string, Capacity> = {};
  const clientFor = (name: string) => {
    const client = localDynamoClient(dynalite.endpoint);
    capacity[name] = { readUnits: 0, writeUnits: 0, requests: 0 };
    countCapacity(client, capacity[name]);
    return client;
  };
  const setupClient = localDynamoClient(dynalite.endpoint);
  await ensureTables(setupClient, TABLES);
  const doorsClient = clientFor('doors');
  const dispatcherClient = clientFor('dispatcher');
  // Each function's wiring as the handlers build it (lambdas/runtimes/aws.ts), on its own client:
  // an in-process FIFO per thread stands in for SQS FIFO, and the ask timer is never armed.
  const env = { [ENV.runsTable]: TABLES.runs, [ENV.runEventsTable]: TABLES.runEvents, [ENV.threadQueueLimit]: '8' };
  const timer: AskTimer = { arm: async () => {}, disarm: async () => {} };
  const counts = { sends: 0, receives: 0, deletes: 0, holds: 0 };
  const dispatches: number[] = [];
  const fifo = new InProcessThreadQueue();
  const dispatcherStore = createStore({ env, clients: { dynamodb: dispatcherClient } });
  const doorsStore = createStore({ env, clients: { dynamodb: doorsClient } });
  // The dispatcher enqueues nothing: runs come in through the doors.
  const { gateway: dispatcher } = createWiring({
    env,
    clients: { dynamodb: dispatcherClient },
    store: dispatcherStore,
    timer,
    queue: { enqueue: async () => {}, dispatchBeside: async () => {}, release: async () => {}, redeliver: async () => {} },
    providers: createProviders,
    clock,
    ids,
  });
  const doorsQueue: ThreadQueue = {
    async enqueue(message) {
      counts.sends += 1;
      await fifo.enqueue(message);
    },
    // An interjection is an asynchronous Lambda invoke on AWS; no scenario sends one.
    dispatchBeside: (message) => fifo.dispatchBeside(message),
    // A run its door relayed lets go of the message its dispatcher kept for it.
    async release() {
      counts.deletes += 1;
    },
    redeliver: () => fifo.redeliver(),
  };
  // The streaming doors relay runs on idle threads (relayAtDoor, on by default), as the handler wires them.
  const doorRelay = { keep: (work: Promise<unknown>) => void work.catch(() => undefined), deadline: () => undefined };
  const app = doorsApp({ env, clients: { dynamodb: doorsClient }, store: doorsStore, timer, queue: doorsQueue, clock, ids, doorRelay });
  fifo.start(async (runId, delivery) => {
    // The event source mapping receives the message, the function runs, and a success deletes it;
    // a message kept for a run its door relays has its visibility changed, and the run's settle deletes it.
    counts.receives += 1;
    const startedAt = performance.now();
    const result = await dispatcher.dispatchRun(runId, { ...delivery, receipt: `receipt-${runId}` });
    dispatches.push(performance.now() - startedAt);
    if (result === 'held_at_door') counts.holds += 1;
    else counts.deletes += 1;
  });
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s as Server));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stores: { doors: doorsStore, dispatcher: dispatcherStore },
    capacity,
    dispatches,
    queue: counts,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await dynalite.close();
      for (const client of [setupClient, doorsClient, dispatcherClient]) client.destroy();
    },
  };
}

function current(): Shape {
  if (!shape) throw new Error('the gateway is not started');
  return shape;
}

function anyStore(): RunStore {
  return Object.values(current().stores)[0];
}

/**
 * The store's own write ceiling: the same events written straight to the store through the
 * same adapter (SQLite transactions, or DynamoDB's BatchWriteItem of 25), no gateway in the
 * path, in four arrangements; the best is the ceiling.
 */
async function ceiling({ plan, rounds }: { plan: Script; rounds: number }) {
  const store = anyStore();
  const make = (): StoredEvent[] => {
    const runId = randomUUID();
    const at = Date.now();
    return script({ threadId: `ceiling-${runId}`, runId }, plan).map((event, i) => ({
      runId,
      seq: i + 1,
      event: { ...event, timestamp: at, rawEvent: { sentAt: at + 0.123456 } } as StoredEvent['event'],
    }));
  };
  const arrangements: Record<string, (events: StoredEvent[]) => Promise<void>> = {
    // One call: one transaction (SQLite), or all batches of 25 in parallel (DynamoDB).
    'one call': (events) => store.events.append(events),
    // As a run's log writes a burst: slices of 100, one at a time.
    'batches of 100, one at a time': async (events) => {
      for (let i = 0; i < events.length; i += 100) await store.events.append(events.slice(i, i + 100));
    },
    // One batch of 25 at a time.
    'batches of 25, one at a time': async (events) => {
      for (let i = 0; i < events.length; i += 25) await store.events.append(events.slice(i, i + 25));
    },
    // Four writers, each a batch of 25 at a time.
    'batches of 25, four in flight': async (events) => {
      let next = 0;
      const worker = async () => {
        while (next < events.length) {
          const from = next;
          next += 25;
          await store.events.append(events.slice(from, from + 25));
        }
      };
      await Promise.all([worker(), worker(), worker(), worker()]);
    },
  };
  const rates: Record<string, number[]> = {};
  // One unmeasured pass warms the adapter and dynalite's code paths.
  for (const write of Object.values(arrangements)) await write(make());
  for (let round = 0; round < rounds; round++) {
    for (const [name, write] of Object.entries(arrangements)) {
      const events = make();
      const startedAt = performance.now();
      await write(events);
      (rates[name] ??= []).push(events.length / ((performance.now() - startedAt) / 1000));
    }
  }
  return rates;
}

let sampler: ReturnType<typeof setInterval> | undefined;
let profiler: Session | undefined;
let peakRss = 0;
/** process.memoryUsage() when the RSS peaked: how much of it is V8's heap, how much is outside. */
let atPeak: NodeJS.MemoryUsage | undefined;

serveParent(
  {
    async start({ mode, store, apiKeys, traceTo }: { mode: GatewayMode; store: LocalStoreKind; apiKeys?: Record<string, Principal>; traceTo?: string }) {
      shape = mode === 'aws' ? await startAwsShape() : await startLocal(store, apiKeys ? new Map(Object.entries(apiKeys)) : undefined, traceTo);
      return shape.url;
    },
    /** Sends the spans ended so far (the batch exporter would within 5 s): the export's CPU then falls inside the measured phase. */
    async flushTraces() {
      await tracing?.flush();
    },
    link() {
      if (!current().link) throw new Error('this gateway shape takes no provider links');
      return current().link;
    },
    async putAgent(agent: Agent) {
      // In the AWS shape both functions read one table: one write serves both.
      await anyStore().agents.put(agent);
    },
    usage() {
      const { stores, capacity, dispatches, queue } = current();
      const usage: Record<string, StoreUsage> = {};
      for (const [name, store] of Object.entries(stores)) usage[name] = { ...store.sent };
      return { usage, capacity, dispatches: [...dispatches], queue: { ...queue } };
    },
    ceiling,
    /** Samples this process's RSS every 20 ms until `memoryPeak`. */
    sampleMemory() {
      clearInterval(sampler);
      const sample = () => {
        const usage = process.memoryUsage();
        if (usage.rss >= peakRss) {
          peakRss = usage.rss;
          atPeak = usage;
        }
      };
      peakRss = 0;
      sample();
      sampler = setInterval(sample, 20);
    },
    memoryPeak() {
      clearInterval(sampler);
      return { peakRss, atPeak, maxRss: process.resourceUsage().maxRSS * 1024 };
    },
    cpu: () => process.cpuUsage(),
    /** Samples how late this process's event loop runs its timers (10 ms resolution) until `loopDelayStop`. */
    loopDelayStart() {
      loopDelay?.disable();
      loopDelay = monitorEventLoopDelay({ resolution: 10 });
      loopDelay.enable();
    },
    loopDelayStop() {
      if (!loopDelay) return undefined;
      loopDelay.disable();
      const ms = (ns: number) => ns / 1e6;
      const figures = { p50: ms(loopDelay.percentile(50)), p99: ms(loopDelay.percentile(99)), max: ms(loopDelay.max) };
      loopDelay = undefined;
      return figures;
    },
    /** Starts V8's sampling profiler on this process (the measured phase only, not the start-up). */
    async profileStart() {
      profiler = new Session();
      profiler.connect();
      await profiler.post('Profiler.enable');
      await profiler.post('Profiler.setSamplingInterval', { interval: 200 });
      await profiler.post('Profiler.start');
    },
    /** Stops it and writes the profile (Chrome DevTools' .cpuprofile) to `path`. */
    async profileStop({ path }: { path: string }) {
      if (!profiler) return;
      const { profile } = await profiler.post('Profiler.stop');
      profiler.disconnect();
      profiler = undefined;
      await writeFile(path, JSON.stringify(profile));
    },
  },
  async () => {
    clearInterval(sampler);
    await shape?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  },
);
