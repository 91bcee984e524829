import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

export interface Hot {
  what: string;
  ms: number;
  pct: number;
}

export interface ProfileSummary {
  wallMs: number;
  busyMs: number;
  /** Busy time by layer: native time counts for the JavaScript that called it. */
  byLayer: Hot[];
  /** Busy time by package or funduq file, the same way. */
  byModule: Hot[];
  /** Busy time by function (self time; native time counts for its JavaScript caller). */
  byFunction: Hot[];
}

/** A frame's package (node_modules), funduq file (lambdas/…), or Node module. */
function moduleOf(url: string): string {
  if (!url) return '';
  const path = url.replace(/^file:\/\//, '');
  const modules = path.lastIndexOf('node_modules/');
  if (modules >= 0) {
    const rest = path.slice(modules + 'node_modules/'.length).split('/');
    return rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  for (const root of ['/lambdas/', '/bench/']) {
    const at = path.indexOf(root);
    if (at >= 0) return path.slice(at + 1);
  }
  return path.replace(/^node:internal\//, 'node:');
}

const STORE = /^(better-sqlite3|lambdas\/adapters\/local\/sqlite\/[a-z-]+\.ts|dynalite|classic-level|abstract-level|level|level-.*|memory-level|lazy|async|big\.js|buffer-crc32|lock|once|module-error|maybe-combine-errors|napi-macros)$/;
const SDK = /^(@smithy\/|@aws-sdk\/|@aws-crypto\/|fast-xml-parser|tslib|node:crypto|node:_http_client|node:_http_agent)/;
const HTTP = /^(hono|@hono\/|undici|node:deps\/undici|node:_http_server|node:_http_outgoing|node:_http_common|node:http|node:net|node:stream|node:streams|node:webstreams|node:stream_base_commons|node:encoding)/;
const PARSE = /^(zod|eventsource-parser|@ag-ui\/)/;

function layerOf(module: string): string {
  if (STORE.test(module)) return 'store: SQLite (better-sqlite3 and its adapter), or dynalite + LevelDB';
  if (module.startsWith('lambdas/')) return 'funduq code (lambdas/)';
  if (SDK.test(module)) return 'AWS SDK client: marshalling, signing, HTTP to the store';
  if (HTTP.test(module)) return 'HTTP and streams: Hono, node-server, undici, sockets';
  if (PARSE.test(module)) return 'event validation and SSE parsing: zod, eventsource-parser';
  if (module === '(garbage collector)') return 'garbage collector';
  if (module === 'node:inspector') return 'the profiler itself (stop and write)';
  return 'other (event loop, timers, Node internals)';
}

/**
 * A V8 CPU profile (the format `node --cpu-prof` writes) reduced to where the busy time went.
 * Native frames (JSON, LevelDB, sockets, hashing) count for the closest JavaScript frame that
 * called them, so "store" includes LevelDB's native reads and "funduq" includes its JSON work.
 */
export function summarize(path: string, top = 15): ProfileSummary {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  const layer = new Map<string, number>();
  const module = new Map<string, number>();
  const fn = new Map<string, number>();
  const add = (map: Map<string, number>, key: string, ms: number) => map.set(key, (map.get(key) ?? 0) + ms);
  let busy = 0;
  for (let i = 0; i < samples.length; i++) {
    const ms = (deltas[i] ?? 0) / 1000;
    const leaf = byId.get(samples[i]);
    if (!leaf || leaf.callFrame.functionName === '(idle)') continue;
    let owner: ProfileNode | undefined;
    for (let id: number | undefined = leaf.id; id !== undefined && !owner; id = parent.get(id)) {
      const node = byId.get(id);
      if (node?.callFrame.url) owner = node;
    }
    const name = owner ? moduleOf(owner.callFrame.url) : leaf.callFrame.functionName;
    if (name === 'node:inspector') continue;
    busy += ms;
    add(layer, layerOf(name), ms);
    add(module, name, ms);
    const frame = owner ?? leaf;
    add(fn, `${frame.callFrame.functionName || '(anonymous)'} ${name}${owner ? `:${owner.callFrame.lineNumber + 1}` : ''}`, ms);
  }
  const rank = (map: Map<string, number>, n: number) =>
    [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([what, ms]) => ({ what, ms: Math.round(ms), pct: Math.round((ms / busy) * 1000) / 10 }));
  return {
    wallMs: Math.round((profile.endTime - profile.startTime) / 1000),
    busyMs: Math.round(busy),
    byLayer: rank(layer, 10),
    byModule: rank(module, top),
    byFunction: rank(fn, top),
  };
}
