import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { createGateway, type Gateway } from '../../core/gateway.js';
import type { Agent } from '../../core/model.js';
import type { Clock, IdSource } from '../../core/ports.js';
import { apiKeyResolver, type ApiKeys } from '../../doors/api-keys.js';
import { createApp } from '../../doors/app.js';
import { openMode } from '../../doors/principal.js';
import { AgUiHttpProvider } from '../../providers/agui-http.js';
import { DemoProvider } from '../../providers/demo.js';
import { DynamoRunStore } from '../aws/dynamodb/run-store.js';
import type { TableNames } from '../aws/dynamodb/tables.js';
import { HttpPushSender, type PushSenderSettings } from '../http/push-sender.js';
import { readAgentsFile } from './agents-file.js';
import { InProcessAskTimer } from './ask-timer.js';
import { InProcessChangeFeed } from './change-feed.js';
import { InProcessPushDriver, noticingPushConfigs } from './push-driver.js';
import { ensureTables, inProcessDynamoClient, startDynalite } from './dynalite.js';
import { InProcessThreadQueue } from './thread-queue.js';

export interface LocalSettings {
  /** Where dynalite keeps its data; undefined keeps it in memory (tests). */
  dataDir?: string;
  host: string;
  /** 0 picks a free port. */
  port: number;
  threadQueueLimit: number;
  /** Runs a tenant may start per minute; absent, no limit. */
  tenantRunsPerMinute?: number;
  /** Runs a tenant may have queued or running at once; absent, no limit. */
  tenantConcurrentRuns?: number;
  /** Callers' API keys and whom each speaks for; absent, open mode: every caller is `anonymous`, and a warning says so. */
  apiKeys?: ApiKeys;
  heartbeatMs: number;
  /** Required as `Authorization: Bearer` on the admin routes; without it they are open, and a warning says so. */
  adminToken?: string;
  /** A JSON file `{ "agents": [ … ] }` of agent definitions registered at start (replacing agents of the same id). */
  agentsFile?: string;
  /** The demo agent's pace for `/slow N`. */
  demoSlowIntervalMs?: number;
  /** Where callers reach the gateway, for the absolute URLs of agent cards; else each request's origin. */
  publicUrl?: string;
  /** Push notification delivery (locally `http:` targets are allowed). */
  push?: Partial<PushSenderSettings>;
  /**
   * The store's thread ended under the gateway: runs can be neither recorded nor settled, and
   * their readers would wait. `npm start` exits, so that a restart's recovery settles them.
   */
  onStoreLost?: (error: Error) => void;
  clock?: Clock;
  ids?: IdSource;
  log?: (line: string) => void;
}

export interface LocalGateway {
  url: string;
  gateway: Gateway;
  queue: InProcessThreadQueue;
  pushes: InProcessPushDriver;
  /** Where its DynamoDB (dynalite) listens, and the tables: for a look at the record from outside. */
  dynamo: { endpoint: string; tables: TableNames };
  close(): Promise<void>;
}

export const DEMO_AGENT: Agent = {
  id: 'demo',
  description: 'The built-in demo agent: echoes text; /ask, /tool, /slow N and /fail show interrupts, tool calls, queueing and failures.',
  provider: { kind: 'demo' },
  takesInterjections: false,
  timeoutSeconds: 900,
  idleTimeoutSeconds: 300,
};

const TABLES = { runs: 'funduq-runs', runEvents: 'funduq-run-events' };

/**
 * The whole gateway on one machine: dynalite for DynamoDB, and in-process stand-ins for the
 * thread queue (SQS FIFO), the ask timer (Step Functions) and the change feed (DynamoDB streams).
 */
export async function startLocalGateway(settings: LocalSettings): Promise<LocalGateway> {
  const log = settings.log ?? (() => {});
  const clock = settings.clock ?? { now: () => Date.now() };
  const ids = settings.ids ?? { newId: () => randomUUID() };
  // Read before anything starts: a bad file stops the start with nothing to clean up.
  const fileAgents = settings.agentsFile === undefined ? [] : await readAgentsFile(settings.agentsFile);
  const dynalite = await startDynalite({
    path: settings.dataDir,
    onLost: (error) => {
      log(`the store stopped: ${error.message}; nothing can be recorded until the gateway is restarted`);
      settings.onStoreLost?.(error);
    },
  });
  const client = inProcessDynamoClient(dynalite);
  await ensureTables(client, TABLES);
  const records = new DynamoRunStore({ client, tables: TABLES });
  // The push driver is told of every config written, so runs of tasks without one cost it no reads.
  const store = noticingPushConfigs(records, (taskId) => pushes.configsChanged(taskId));
  const report = (what: string) => (error: unknown, runId: string) =>
    log(`${what}${runId ? ` ${runId}` : ''} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  const queue = new InProcessThreadQueue(report('dispatch of run'));
  const timer = new InProcessAskTimer(clock, report('expiry of the asks of run'));
  const feed = new InProcessChangeFeed();
  const gateway = createGateway({
    store,
    queue,
    timer,
    feed,
    providers: {
      demo: new DemoProvider({ clock, ids, slowIntervalMs: settings.demoSlowIntervalMs }),
      'agui-http': new AgUiHttpProvider({ clock }),
    },
    clock,
    ids,
    settings: {
      threadQueueLimit: settings.threadQueueLimit,
      ...(settings.tenantRunsPerMinute !== undefined ? { tenantRunsPerMinute: settings.tenantRunsPerMinute } : {}),
      ...(settings.tenantConcurrentRuns !== undefined ? { tenantConcurrentRuns: settings.tenantConcurrentRuns } : {}),
    },
  });
  // An agent registered under the demo's id keeps it across restarts; the built-in is refreshed.
  const demo = await store.getAgent(DEMO_AGENT.id);
  if (!demo || demo.provider.kind === DEMO_AGENT.provider.kind) await store.putAgent(DEMO_AGENT);
  for (const agent of fileAgents) await store.putAgent(agent);
  if (fileAgents.length > 0) log(`registered ${fileAgents.map((agent) => agent.id).join(', ')} from ${settings.agentsFile}`);
  const recovery = await gateway.recover();
  if (recovery.orphaned + recovery.requeued + recovery.rearmed > 0) {
    log(
      `recovered: ${recovery.orphaned} run(s) failed orphaned_by_restart, ${recovery.requeued} queued again, ${recovery.rearmed} ask timer(s) re-armed`,
    );
  }
  queue.start((runId, beside) => gateway.dispatchRun(runId, beside));
  timer.start((runId) => gateway.expireAsks(runId));
  const sender = new HttpPushSender({ allowHttp: true, ...settings.push });
  const pushes = new InProcessPushDriver({ store, clock }, sender, (error) => report('a push notification')(error, ''));
  feed.subscribeAll((change) => pushes.onChange(change));

  const app = createApp({
    gateway,
    sse: { heartbeatMs: settings.heartbeatMs },
    principal: settings.apiKeys ? apiKeyResolver(settings.apiKeys) : openMode,
    admin: { token: settings.adminToken },
    a2a: { publicUrl: settings.publicUrl, push: sender },
    onError: (error) => report('request')(error, ''),
  });
  const server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: settings.host, port: settings.port }, () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  const host = settings.host.includes(':') ? `[${settings.host}]` : settings.host;
  if (settings.apiKeys === undefined) {
    log('warning: FUNDUQ_API_KEYS is not set: open mode, every caller is the principal "anonymous" of the tenant "anonymous" and sees every other caller\'s threads and tasks');
  }
  if (settings.adminToken === undefined) {
    log(`warning: FUNDUQ_ADMIN_TOKEN is not set, so anyone who reaches http://${host}:${port}/admin/agents can register, change and delete agents`);
  }
  return {
    url: `http://${host}:${port}`,
    gateway,
    queue,
    pushes,
    dynamo: { endpoint: dynalite.endpoint, tables: TABLES },
    async close() {
      timer.stop();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        (server as { closeAllConnections?: () => void }).closeAllConnections?.();
      });
      await dynalite.close();
      client.destroy();
    },
  };
}
