/**
 * `npm start`: the gateway on one machine, with dynalite under FUNDUQ_DATA_DIR, the demo agent
 * and the agents of FUNDUQ_AGENTS_FILE, callers known by the keys of FUNDUQ_API_KEYS.
 * Only this file (and lambdas/handlers on AWS) reads the environment.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { startLocalGateway } from '../lambdas/adapters/local/runtime.js';
import { parseApiKeys, type ApiKeys } from '../lambdas/doors/api-keys.js';

function numberFrom(name: string, fallback: number, min: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) {
    console.error(`funduq: ${name} must be a whole number ≥ ${min}, got "${raw}"`);
    process.exit(2);
  }
  return value;
}

function optionalNumberFrom(name: string, min: number): number | undefined {
  const raw = process.env[name];
  return raw === undefined || raw === '' ? undefined : numberFrom(name, min, min);
}

/** FUNDUQ_API_KEYS names a JSON file of keys; a file that cannot be used stops the start, naming the field. */
function apiKeysFrom(name: string): ApiKeys | undefined {
  const raw = process.env[name];
  if (!raw) return undefined;
  const path = resolve(raw);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    console.error(`funduq: the API keys file ${path} (${name}) cannot be read: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(2);
  }
  const parsed = parseApiKeys(text);
  if (!parsed.ok) {
    console.error(`funduq: the API keys file ${path} (${name}): ${parsed.message}`);
    process.exit(2);
  }
  return parsed.keys;
}

const settings = {
  dataDir: resolve(process.env.FUNDUQ_DATA_DIR || '.funduq'),
  host: process.env.HOST || '127.0.0.1',
  port: numberFrom('PORT', 8787, 0),
  threadQueueLimit: numberFrom('FUNDUQ_THREAD_QUEUE_LIMIT', 8, 0),
  tenantRunsPerMinute: optionalNumberFrom('FUNDUQ_TENANT_RUNS_PER_MINUTE', 1),
  tenantConcurrentRuns: optionalNumberFrom('FUNDUQ_TENANT_CONCURRENT_RUNS', 1),
  apiKeys: apiKeysFrom('FUNDUQ_API_KEYS'),
  heartbeatMs: numberFrom('FUNDUQ_HEARTBEAT_MS', 10_000, 100),
  adminToken: process.env.FUNDUQ_ADMIN_TOKEN || undefined,
  agentsFile: process.env.FUNDUQ_AGENTS_FILE ? resolve(process.env.FUNDUQ_AGENTS_FILE) : undefined,
  publicUrl: process.env.FUNDUQ_PUBLIC_URL || undefined,
  log: (line: string) => console.log(`funduq: ${line}`),
  // Readers of runs that can no longer be recorded would wait forever; a restart recovers them.
  onStoreLost: () => process.exit(1),
};

const local = await startLocalGateway(settings).catch((error: unknown) => {
  console.error(`funduq: could not start: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});

console.log(`funduq is listening on ${local.url}  (data: ${settings.dataDir})
  AG-UI   POST ${local.url}/agui/demo          (RunAgentInput → SSE)
  A2A     GET  ${local.url}/a2a/demo/.well-known/agent-card.json   (JSON-RPC at /a2a/demo, HTTP+JSON at /a2a/demo/rest)
  replay  GET  ${local.url}/agui/demo/runs/{runId}/events   (Last-Event-ID)
  cancel  POST ${local.url}/agui/demo/runs/{runId}/cancel
  thread  GET  ${local.url}/threads/{threadId}
  agents  GET  ${local.url}/agents
  admin   PUT  ${local.url}/admin/agents/{agentId}   (GET, DELETE; register an AG-UI agent by its URL)
  health  GET  ${local.url}/healthz`);

let closing = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (closing) process.exit(1);
    closing = true;
    console.log('funduq: stopping');
    void local.close().then(() => process.exit(0));
  });
}
