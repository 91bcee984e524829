/**
 * `npm start`: the gateway on one machine, with its record under FUNDUQ_DATA_DIR (SQLite, or the
 * DynamoDB adapter on dynalite with FUNDUQ_STORE=dynamodb), the demo agent
 * and the agents of FUNDUQ_AGENTS_FILE, callers known by the keys of FUNDUQ_API_KEYS. Settings
 * are read with the one settings schema (lambdas/runtimes/settings.ts), as the AWS functions and
 * `cdk synth` read them. Only this file (and lambdas/handlers on AWS) reads the environment.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseApiKeys, type ApiKeys } from '../lambdas/doors/api-keys.js';
import { startLocalGateway } from '../lambdas/runtimes/local.js';
import { defaultBudget, GATEWAY_SETTINGS, LOCAL_SETTINGS, readSettings, retentionSettings, SettingsError } from '../lambdas/runtimes/settings.js';
import { createTracing } from '../lambdas/adapters/otel/tracing.js';
import { tracingConfig } from '../lambdas/runtimes/tracing.js';

function fail(message: string): never {
  console.error(message);
  process.exit(2);
}

/** FUNDUQ_API_KEYS names a JSON file of keys; a file that cannot be used stops the start, naming the field. */
function apiKeysFrom(file: string | undefined): ApiKeys | undefined {
  if (!file) return undefined;
  const path = resolve(file);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    fail(`funduq: the API keys file ${path} (FUNDUQ_API_KEYS) cannot be read: ${error instanceof Error ? error.message : String(error)}`);
  }
  const parsed = parseApiKeys(text);
  if (!parsed.ok) fail(`funduq: the API keys file ${path} (FUNDUQ_API_KEYS): ${parsed.message}`);
  return parsed.keys;
}

let read;
let traces;
try {
  read = readSettings({ ...GATEWAY_SETTINGS, ...LOCAL_SETTINGS }, 'env', (name) => process.env[name]);
  traces = tracingConfig((name) => process.env[name]);
} catch (error) {
  if (error instanceof SettingsError) fail(error.message);
  throw error;
}

const settings = {
  ...read,
  tenantBudget: defaultBudget(read),
  retention: retentionSettings(read),
  dataDir: resolve(read.dataDir),
  apiKeys: apiKeysFrom(read.apiKeysFile),
  agentsFile: read.agentsFile ? resolve(read.agentsFile) : undefined,
  log: (line: string) => console.log(`funduq: ${line}`),
  // Readers of runs that can no longer be recorded would wait forever; a restart recovers them.
  onStoreLost: () => process.exit(1),
  // The standard OTEL_* variables; without an endpoint nothing is traced.
  tracing: createTracing(traces),
};

// What stops a start (the data dir in use, the port taken, a record of another version) is said in one line.
const local = await startLocalGateway(settings).catch((error: unknown) => {
  console.error(`funduq: could not start: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});

const record = local.record.store === 'sqlite' ? `SQLite, ${local.record.file}` : `DynamoDB adapter on dynalite, ${settings.dataDir}`;
console.log(`funduq is listening on ${local.url}  (record: ${record})
  console      ${local.url}/console             (threads, runs, asks, usage, audit, in a browser${settings.adminToken ? ': sign in with FUNDUQ_ADMIN_TOKEN' : ''})
  AG-UI   POST ${local.url}/agui/demo          (RunAgentInput → SSE)
  A2A          ${local.url}/a2a/demo/          (the agent's A2A URL for a client: its card at .well-known/agent-card.json, JSON-RPC here, HTTP+JSON at rest)
  replay  GET  ${local.url}/agui/demo/runs/{runId}/events   (Last-Event-ID)
  cancel  POST ${local.url}/agui/demo/runs/{runId}/cancel
  thread  GET  ${local.url}/threads/{threadId}
  agents  GET  ${local.url}/agents
  admin   PUT  ${local.url}/admin/agents/{agentId}   (GET, DELETE; register an agent: a URL, or a Lambda function)
  link         ${local.link.url}   (providers that dial out: PUT ${local.url}/admin/providers/{providerId}; funduq's public key ${local.link.publicKey})
  health  GET  ${local.url}/healthz`);

let closing = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (closing) process.exit(1);
    closing = true;
    console.log('funduq: stopping');
    void local
      .close()
      .then(() => settings.tracing.shutdown())
      .then(() => process.exit(0));
  });
}
