import { randomUUID } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { recordProjections } from '../core/a2a/task-state.js';
import { createGateway, type Gateway } from '../core/gateway.js';
import { segmentCheck } from '../adapters/crypto/audit-seal.js';
import type { Budget } from '../core/model.js';
import type { Clock, IdSource, RunStore } from '../core/ports.js';
import { composeRunLife, type RunLife } from '../core/run-life.js';
import { telemetryObservers } from '../adapters/otel/observers.js';
import type { Tracing } from '../adapters/otel/tracing.js';
import { apiKeyResolver, type ApiKeys } from '../doors/api-keys.js';
import { createApp } from '../doors/app.js';
import { openMode } from '../doors/principal.js';
import { createDynamoStore } from '../adapters/aws/dynamodb/store/store.js';
import type { TableNames } from '../adapters/aws/dynamodb/tables.js';
import { HttpPushSender, type PushSenderSettings } from '../adapters/http/push-sender.js';
import { InProcessAskTimer } from '../adapters/local/ask-timer.js';
import { InProcessChangeFeed } from '../adapters/local/change-feed.js';
import { InProcessPushDriver, noticingPushConfigs } from './push-driver.js';
import { dynaliteDirError, holdsOnlyDynalite, inUseError, markHolder, recordFile } from '../adapters/local/data-dir.js';
import { ensureTables, inProcessDynamoClient, startDynalite } from '../adapters/local/dynalite.js';
import { createSqliteStore, StoreLocked, type SqliteStore } from '../adapters/local/sqlite/store.js';
import { InProcessThreadQueue } from '../adapters/local/thread-queue.js';
import { takeTurn, takingTurns } from '../adapters/local/turns.js';
import { systemClock } from '../adapters/system-clock.js';
import { stockClientRules } from '../adapters/agui/stock-client-rules.js';
import { agentCatalog } from '../providers/definition.js';
import { DEMO_AGENT } from '../providers/demo.js';
import { readAgentsFile, unusableAgents } from './agents-file.js';
import { createProviders, PROVIDER_KINDS } from './providers.js';
import { localPushKeys } from './push-keys.js';
import { localLink } from './link/local.js';
import { lostAudit } from '../doors/audit-routes.js';
import { LINK_PATH } from '../../packages/provider/src/wire.js';
import type { Server } from 'node:http';
import type { LinkSettings } from '../core/settings.js';
import type { RetentionPolicy } from '../core/retention/policy.js';
import { linkSettings, LOCAL_SETTINGS } from './settings.js';

export type LocalStoreKind = 'sqlite' | 'dynamodb';

export interface LocalSettings {
  /** How often the audit log is sealed (default `AUDIT_SEAL_MS`, a minute). */
  auditSealMs?: number;
  /** How long the record keeps what it holds, for tenants with no policy of their own (each left out: `DEFAULT_RETENTION`'s). */
  retention?: Partial<RetentionPolicy>;
  /** How often retention's pass deletes what retention ended (default `RETENTION_PASS_MS`, an hour). */
  retentionPassMs?: number;
  /** Where the record is kept (see `DATA_DIR_FILES`); undefined keeps it in memory (tests). */
  dataDir?: string;
  /** `sqlite` (the default), or `dynamodb`: the AWS adapter on dynalite, to see the AWS data model on one machine. */
  store?: LocalStoreKind;
  host: string;
  /** 0 picks a free port. */
  port: number;
  threadQueueLimit: number;
  /** Runs a tenant may start per minute; absent, no limit. */
  tenantRunsPerMinute?: number;
  /** Runs a tenant may have queued or running at once; absent, no limit. */
  tenantConcurrentRuns?: number;
  /** The budget of every tenant without one of its own; absent, none. */
  tenantBudget?: Budget;
  /** Callers' API keys and whom each speaks for; absent, open mode: every caller is `anonymous`, and a warning says so. */
  apiKeys?: ApiKeys;
  heartbeatMs: number;
  /** Admission (see `LOCAL_SETTINGS`): requests with a body in flight at once, the megabytes they declare, and how long one waits for room. */
  maxInflightRequests?: number;
  maxInflightMb?: number;
  admissionWaitMs?: number;
  /** Runs handed from the threads' queues to their agents at once (see `LOCAL_SETTINGS`). */
  maxRunningRuns?: number;
  /** Required as `Authorization: Bearer` on the admin routes; without it they are open, and a warning says so. */
  adminToken?: string;
  /** Signs in to the console read-only (`/console`: its pages, never its acts). */
  consoleReadToken?: string;
  /** The console leaves message text and tool arguments out of its pages. */
  consoleHideContent?: boolean;
  /** A JSON file `{ "agents": [ … ] }` of agent definitions registered at start (replacing agents of the same id). */
  agentsFile?: string;
  /** The demo agent's pace for `/slow N`. */
  demoSlowIntervalMs?: number;
  /** Where callers reach the gateway, for the absolute URLs of agent cards; else each request's origin. */
  publicUrl?: string;
  /** Push notification delivery. */
  push?: Partial<PushSenderSettings>;
  /** Push targets on loopback are allowed (`FUNDUQ_PUSH_ALLOW_LOOPBACK`): for trying push on one machine; a warning says so. */
  pushAllowLoopback?: boolean;
  /** A provider that lost its link keeps its runs this long for a resume (`FUNDUQ_LINK_GRACE_SECONDS`). */
  linkGraceSeconds?: number;
  /** A link run no provider took this long fails `no_provider_took_it` (`FUNDUQ_LINK_UNCLAIMED_SECONDS`). */
  linkUnclaimedSeconds?: number;
  /** The link's clocks in ms, over the two above (tests). */
  link?: Partial<LinkSettings>;
  /** Push targets over plain `http:` are allowed (`FUNDUQ_PUSH_ALLOW_HTTP`): for trying push on one machine; a warning says so. */
  pushAllowHttp?: boolean;
  /**
   * The store's thread ended under the gateway (dynalite's, with `store: 'dynamodb'`): runs can be
   * neither recorded nor settled, and their readers would wait. `npm start` exits, so that a
   * restart's recovery settles them.
   */
  onStoreLost?: (error: Error) => void;
  clock?: Clock;
  ids?: IdSource;
  /** Who watches runs' lives (tests, tracing); none by default: one machine writes no metrics. */
  observers?: readonly RunLife[];
  /** Traces requests and runs (`createTracing`, from the OTEL_* variables in `bin/local.ts`); absent, nothing is traced. */
  tracing?: Tracing;
  log?: (line: string) => void;
}

export interface LocalGateway {
  url: string;
  gateway: Gateway;
  /** The record, for a look from tests and the bench. */
  store: RunStore;
  queue: InProcessThreadQueue;
  pushes: InProcessPushDriver;
  /** Where providers that dial out open their link, and funduq's public key they pin. */
  link: { url: string; publicKey: string };
  /** Where the record is, for a look from outside. */
  record: LocalRecord;
  close(): Promise<void>;
}

/** The record as its store keeps it: a SQLite file (none in memory), or dynalite's endpoint and tables. */
export type LocalRecord =
  | { store: 'sqlite'; file?: string; census(): Record<string, number> }
  | { store: 'dynamodb'; endpoint: string; tables: TableNames };

export { DEMO_AGENT };

const TABLES = { runs: 'funduq-runs', runEvents: 'funduq-run-events' };

/**
 * The whole gateway on one machine: its record in SQLite (or, with `store: 'dynamodb'`, the
 * DynamoDB adapter on dynalite), and in-process stand-ins for the thread queue (SQS FIFO), the ask
 * timer (Step Functions) and the change feed (DynamoDB streams).
 */
export async function startLocalGateway(settings: LocalSettings): Promise<LocalGateway> {
  const log = settings.log ?? (() => {});
  const clock = settings.clock ?? systemClock;
  const ids = settings.ids ?? { newId: () => randomUUID() };
  // Read before anything starts: a bad file stops the start with nothing to clean up.
  const fileAgents = settings.agentsFile === undefined ? [] : await readAgentsFile(settings.agentsFile);
  const opened = await openRecord(settings, log);
  // The push driver is told of every config written, so runs of tasks without one cost it no reads.
  const store = noticingPushConfigs(opened.store, (taskId) => pushes.configsChanged(taskId));
  const report = (what: string) => (error: unknown, runId: string) =>
    log(`${what}${runId ? ` ${runId}` : ''} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  const queue = new InProcessThreadQueue(report('dispatch of run'), settings.maxRunningRuns ?? LOCAL_SETTINGS.maxRunningRuns.default);
  const timer = new InProcessAskTimer(clock, report('expiry of the asks of run'));
  const feed = new InProcessChangeFeed();
  const pushKeys = await localPushKeys({ dataDir: settings.dataDir, clock, issuer: settings.publicUrl });
  const link = await localLink({ dataDir: settings.dataDir, clock, ids, heartbeatMs: settings.link?.heartbeatMs, log });
  const sender = new HttpPushSender({ allowHttp: settings.pushAllowHttp === true, allowLoopback: settings.pushAllowLoopback === true, ...settings.push }, async () => pushKeys);
  const gateway = createGateway(
    {
      store,
      queue,
      timer,
      feed,
      providers: createProviders({ clock, ids, demoSlowIntervalMs: settings.demoSlowIntervalMs }),
      rules: stockClientRules,
      clock,
      ids,
      link: link.deps,
      proofs: link.proofs,
      auditSeal: link.seal,
      auditLost: (entry, error) => log(lostAudit(entry, error).message),
      turn: takeTurn,
      life: composeRunLife([...(settings.observers ?? []), ...telemetryObservers(settings.tracing)], (error, moment) => report(`an observer of runs (${moment})`)(error, '')),
      settings: {
        threadQueueLimit: settings.threadQueueLimit,
        ...(settings.tenantRunsPerMinute !== undefined ? { tenantRunsPerMinute: settings.tenantRunsPerMinute } : {}),
        ...(settings.tenantConcurrentRuns !== undefined ? { tenantConcurrentRuns: settings.tenantConcurrentRuns } : {}),
        ...(settings.tenantBudget !== undefined ? { tenantBudget: settings.tenantBudget } : {}),
        link: { ...linkSettings(settings), ...settings.link },
        ...(settings.retention !== undefined ? { retention: settings.retention } : {}),
      },
    },
    { a2a: { push: sender } },
  );
  // An agent registered under the demo's id keeps it across restarts; the built-in is refreshed.
  const demo = await store.agents.get(DEMO_AGENT.id);
  if (!demo || demo.provider.kind === DEMO_AGENT.provider.kind) await store.agents.put(DEMO_AGENT);
  for (const agent of fileAgents) await store.agents.put(agent);
  if (fileAgents.length > 0) log(`registered ${fileAgents.map((agent) => agent.id).join(', ')} from ${settings.agentsFile}`);
  for (const { id, problem } of unusableAgents(await store.agents.list())) {
    log(`warning: the agent "${id}" cannot be used as it is stored, and its runs will fail: ${problem}; register it again (PUT /admin/agents/${id}) to fix it`);
  }
  const recovery = await gateway.recover();
  if (recovery.orphaned + recovery.requeued + recovery.rearmed + recovery.givenBack > 0) {
    log(
      `recovered: ${recovery.orphaned} run(s) failed orphaned_by_restart, ${recovery.requeued} queued again, ${recovery.rearmed} ask timer(s) re-armed, ${recovery.givenBack} unrecorded request(s) gave back what they took`,
    );
  }
  const pushes = new InProcessPushDriver({ store, clock }, sender, (error) => report('a push notification')(error, ''));
  feed.subscribeAll((change) => pushes.onChange(change));
  const app = createApp({
    gateway,
    sse: {
      heartbeatMs: settings.heartbeatMs,
      onReaderBehind: () => log(`a reader fell behind (nothing taken for ${settings.heartbeatMs} ms) and its stream was ended; it resumes with Last-Event-ID`),
    },
    admission: {
      requests: settings.maxInflightRequests ?? LOCAL_SETTINGS.maxInflightRequests.default,
      bytes: (settings.maxInflightMb ?? LOCAL_SETTINGS.maxInflightMb.default) * 1024 * 1024,
      waitMs: settings.admissionWaitMs ?? LOCAL_SETTINGS.admissionWaitMs.default,
      turn: takeTurn,
    },
    principal: settings.apiKeys ? apiKeyResolver(settings.apiKeys) : openMode,
    admin: { token: settings.adminToken, agents: agentCatalog(PROVIDER_KINDS), onAuditLost: (entry, error) => log(lostAudit(entry, error).message) },
    console: { adminToken: settings.adminToken, readToken: settings.consoleReadToken, hideContent: settings.consoleHideContent ?? false, ...segmentCheck(gateway.audit.publicKey) },
    onAuditLost: (entry, error) => log(lostAudit(entry, error).message),
    a2a: { publicUrl: settings.publicUrl },
    pushKeys: async () => pushKeys.published(),
    onError: (error) => report('request')(error, ''),
    ...(settings.tracing?.enabled ? { tracing: settings.tracing } : {}),
  });
  // Listening comes before the queue runs anything: a port that is taken stops the start with nothing dispatched.
  const server = await listen(app.fetch, settings).catch(async (error: unknown) => {
    await opened.close();
    throw error;
  });
  link.start(server as Server, gateway);
  queue.start((runId, delivery) => gateway.dispatchRun(runId, delivery));
  timer.start((runId) => gateway.expireAsks(runId));
  // The audit log is sealed every minute (and at the end): a record stays pending at most that long.
  const sealing = startSealing(gateway, settings.auditSealMs ?? AUDIT_SEAL_MS, report('sealing the audit log'));
  // What retention ended is deleted within the hour (reads stop showing it at once).
  const retention = every(settings.retentionPassMs ?? RETENTION_PASS_MS, () => gateway.retention.apply(), report('deleting what retention ended'), true);

  const { port } = server.address() as AddressInfo;
  const host = settings.host.includes(':') ? `[${settings.host}]` : settings.host;
  if (settings.apiKeys === undefined) {
    log('warning: FUNDUQ_API_KEYS is not set: open mode, every caller is the principal "anonymous" of the tenant "anonymous" and sees every other caller\'s threads and tasks');
  }
  if (settings.pushAllowLoopback) {
    log('warning: FUNDUQ_PUSH_ALLOW_LOOPBACK is on: push notifications may be sent to this machine (127.0.0.0/8, ::1), so any caller can make the gateway POST to a service listening here; for development only');
  }
  if (settings.pushAllowHttp) {
    log('warning: FUNDUQ_PUSH_ALLOW_HTTP is on: push notifications may be sent over plain http, where their credentials and signed tokens can be read on the way; for development only');
  }
  if (settings.adminToken === undefined) {
    log(`warning: FUNDUQ_ADMIN_TOKEN is not set, so anyone who reaches http://${host}:${port}/admin/agents can register, change and delete agents, and anyone who reaches http://${host}:${port}/console can read every thread and act on it`);
    if (settings.consoleReadToken !== undefined) log('warning: FUNDUQ_CONSOLE_READ_TOKEN has no effect without FUNDUQ_ADMIN_TOKEN: the console is open to everyone');
  }
  return {
    url: `http://${host}:${port}`,
    gateway,
    link: { url: `ws://${host}:${port}${LINK_PATH}`, publicKey: link.deps.keys.publicKey },
    store,
    queue,
    pushes,
    record: opened.record,
    async close() {
      timer.stop();
      link.stop();
      await retention.stop();
      await sealing.stop();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        (server as { closeAllConnections?: () => void }).closeAllConnections?.();
      });
      await opened.close();
    },
  };
}

/** How often the audit log is sealed on one machine. */
export const AUDIT_SEAL_MS = 60_000;

/** How often retention's pass runs on one machine (and once at start). */
export const RETENTION_PASS_MS = 3_600_000;

/** Seals the audit log every `everyMs`, one seal at a time; `stop` waits for the one under way and seals what is left. */
function startSealing(gateway: Gateway, everyMs: number, report: (error: unknown, runId: string) => void) {
  const sealing = every(everyMs, () => gateway.audit.seal(), report);
  return {
    async stop() {
      await sealing.stop();
      await sealing.now();
    },
  };
}

/** Runs `work` every `everyMs`, one at a time (once at once when `atStart`); `stop` ends the timer and waits for the one under way. */
function every(everyMs: number, work: () => Promise<unknown>, report: (error: unknown, runId: string) => void, atStart = false) {
  let running: Promise<unknown> = Promise.resolve();
  const now = () => (running = running.then(work).catch((error: unknown) => report(error, '')));
  const interval = setInterval(now, everyMs);
  interval.unref();
  if (atStart) void now();
  return {
    now,
    async stop() {
      clearInterval(interval);
      await running;
    },
  };
}

/** The port is taken by another process. */
export class PortTaken extends Error {
  readonly code = 'port_taken';
}

function listen(fetch: Parameters<typeof serve>[0]['fetch'], settings: Pick<LocalSettings, 'host' | 'port'>): Promise<ServerType> {
  return new Promise<ServerType>((resolve, reject) => {
    const server = serve({ fetch, hostname: settings.host, port: settings.port }, () => {
      server.off('error', refused);
      resolve(server);
    });
    const refused = (error: NodeJS.ErrnoException) =>
      reject(
        error.code === 'EADDRINUSE'
          ? new PortTaken(`port ${settings.port} on ${settings.host} is taken by another process: stop it, or set PORT to another port (0 picks a free one)`)
          : error,
      );
    server.once('error', refused);
  });
}

interface OpenedRecord {
  store: RunStore;
  record: LocalRecord;
  close(): Promise<void>;
}

/** Opens the record in the data dir (or in memory) with the store asked for, holding the data dir against a second gateway. */
async function openRecord(settings: LocalSettings, log: (line: string) => void): Promise<OpenedRecord> {
  const dir = settings.dataDir;
  if (dir !== undefined) await mkdir(dir, { recursive: true });
  return (settings.store ?? 'sqlite') === 'sqlite' ? openSqlite(dir, log) : openDynalite(dir, settings, log);
}

function openSqlite(dir: string | undefined, log: (line: string) => void): OpenedRecord {
  if (dir !== undefined && holdsOnlyDynalite(dir)) throw dynaliteDirError(dir);
  const file = dir === undefined ? undefined : recordFile(dir);
  let store: SqliteStore;
  try {
    store = createSqliteStore(file ?? ':memory:', { projections: recordProjections, onCheckpointFailure: log });
  } catch (error) {
    if (error instanceof StoreLocked && dir !== undefined) throw inUseError(dir, error);
    throw error;
  }
  const release = dir === undefined ? () => {} : markHolder(dir);
  return {
    store: takingTurns(store),
    record: { store: 'sqlite', ...(file ? { file } : {}), census: () => store.census() },
    async close() {
      await store.close();
      release();
    },
  };
}

async function openDynalite(dir: string | undefined, settings: LocalSettings, log: (line: string) => void): Promise<OpenedRecord> {
  let starting = true;
  const dynalite = await startDynalite({
    path: dir,
    onLost: (error) => {
      if (starting) return;
      log(`the store stopped: ${error.message}; nothing can be recorded until the gateway is restarted`);
      settings.onStoreLost?.(error);
    },
  });
  const client = inProcessDynamoClient(dynalite);
  const close = async () => {
    await dynalite.close();
    client.destroy();
  };
  try {
    await ensureTables(client, TABLES);
  } catch (error) {
    await close().catch(() => undefined);
    // LevelDB takes a lock on its files; another process holding it leaves the database closed.
    if (dir !== undefined && error instanceof Error && error.message.includes('Database is closed')) throw inUseError(dir, error);
    throw error;
  }
  starting = false;
  const release = dir === undefined ? () => {} : markHolder(dir);
  return {
    store: createDynamoStore({ client, tables: TABLES, projections: recordProjections }),
    record: { store: 'dynamodb', endpoint: dynalite.endpoint, tables: TABLES },
    async close() {
      await close();
      release();
    },
  };
}
