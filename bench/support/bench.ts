import { mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Agent } from '../../lambdas/core/model.js';
import type { LocalStoreKind } from '../../lambdas/runtimes/local.js';
import type { GatewayMode } from '../processes/gateway.js';
import { generateKeyPair } from '../../packages/provider/src/index.js';
import { startChild, type Child } from './child.js';
import { scriptQuery, type Script } from './script.js';
import type { Spread } from './stats.js';

export const BENCH_DIR = fileURLToPath(new URL('../', import.meta.url));
export const PROFILE_DIR = `${BENCH_DIR}profiles`;

/** One figure of one scenario, as `bench/results.json` holds it. */
export interface Row {
  scenario: number;
  /** The store the gateway kept its record in: `sqlite` (npm start's, with the targets), `dynamodb` (beside it), `aws` (scenario 6's wiring). */
  store?: LocalStoreKind | 'aws';
  name: string;
  metric: string;
  /** The median across repetitions; null when the figure was not measured. */
  value: number | null;
  unit: string;
  /** The figure this one is compared with (same unit), and what it is. */
  reference: number | null;
  referenceIs?: string;
  /** As written in the issue, e.g. "≤ 5 ms"; null for figures reported without a target. */
  target: string | null;
  met: boolean | null;
  median?: number;
  spread?: Omit<Spread, 'median'>;
  note?: string;
}

export interface Bench {
  quick: boolean;
  profile: boolean;
  agentUrl: string;
  /** The scripted agent's process, for calls beyond its AG-UI endpoint. */
  agent: Child;
  log(line: string): void;
  /** A fresh gateway process (fresh temp data dir) on a store (SQLite unless said); `name` names its CPU profile. */
  startGateway(mode: 'local' | 'aws', name: string, store?: LocalStoreKind, options?: GatewayOptions): Promise<Gateway>;
}

export interface GatewayOptions {
  /** Callers' API keys, key → principal (local shape only); absent, open mode. */
  apiKeys?: Record<string, { id: string; tenant: string }>;
  /** An OTLP/HTTP traces URL: the gateway traces every run at sampling 1.0 and exports there (local shape only); absent, tracing is off. */
  traceTo?: string;
}

export interface Gateway {
  child: Child;
  url: string;
  /** Registers an agui-http agent served by the scripted agent with `plan`. */
  registerAgent(id: string, plan: Script): Promise<void>;
  /** The same script as an agent of the `link` kind: the scripted agent's process dials out to the gateway and serves it. */
  linkAgent(id: string, plan: Script): Promise<void>;
  /**
   * With --profile, runs `phase` under V8's CPU profiler in the gateway's process (the same
   * sampler as `node --cpu-prof`, started and stopped around the measured part) and writes
   * bench/profiles/<name>-<label>.cpuprofile; without, just runs it.
   */
  profiled<T>(label: string, phase: () => Promise<T>): Promise<T>;
  stop(): Promise<void>;
}

export async function startGateway(
  agentUrl: string,
  agentProcess: Child,
  mode: GatewayMode,
  name: string,
  profile: boolean,
  store: LocalStoreKind = 'sqlite',
  options: GatewayOptions = {},
): Promise<Gateway> {
  const child = await startChild('gateway.ts', { name: `gateway (${name})` });
  const url = await child.call<string>('start', { mode, store, apiKeys: options.apiKeys, traceTo: options.traceTo });
  return {
    child,
    url,
    async registerAgent(id, plan) {
      const agent: Agent = {
        id,
        description: `bench: ${plan.events} events every ${plan.intervalMs} ms`,
        provider: { kind: 'agui-http', url: `${agentUrl}/agui?${scriptQuery(plan)}` },
        takesInterjections: false,
        timeoutSeconds: 900,
        idleTimeoutSeconds: 300,
      };
      await child.call('putAgent', agent);
    },
    async linkAgent(id, plan) {
      const link = await child.call<{ url: string; publicKey: string }>('link');
      const keys = generateKeyPair();
      const providerId = `bench-${id}`;
      const registered = await fetch(`${url}/admin/providers/${providerId}`, {
        method: 'PUT',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ publicKey: keys.publicKey, agents: [id], maxConcurrentRuns: 1000 }),
      });
      if (!registered.ok) throw new Error(`PUT /admin/providers/${providerId}: ${registered.status} ${await registered.text()}`);
      await agentProcess.call('link', { url: link.url, providerId, privateKey: keys.privateKey, funduqPublicKey: link.publicKey, agents: { [id]: plan } });
    },
    async profiled(label, phase) {
      if (!profile) return phase();
      await mkdir(PROFILE_DIR, { recursive: true });
      await child.call('profileStart');
      try {
        return await phase();
      } finally {
        await child.call('profileStop', { path: `${PROFILE_DIR}/${name}-${label}.cpuprofile` });
      }
    },
    stop: () => child.stop(),
  };
}

/** A row from repetitions: value = median, with the spread. */
export function row(
  base: Omit<Row, 'value' | 'median' | 'spread' | 'met'> & { met?: boolean | null },
  summary: Spread | null,
  meets?: (value: number) => boolean,
): Row {
  if (!summary || !Number.isFinite(summary.median)) return { ...base, value: null, met: base.met ?? null };
  const { median, ...rest } = summary;
  return {
    ...base,
    value: median,
    median,
    spread: rest,
    met: base.met !== undefined ? base.met : meets ? meets(median) : null,
  };
}
