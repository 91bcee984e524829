import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { Role } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
import type { LocalStoreKind } from '../../lambdas/runtimes/local.js';
import type { Bench, Row } from '../support/bench.js';
import { BENCH_DIR, row } from '../support/bench.js';
import { scriptQuery, type Script } from '../support/script.js';
import { now } from '../support/sse-reader.js';
import { median, spread } from '../support/stats.js';
import { readWithStockClient } from './stock-agui.js';

const NAME = 'A2A streaming';
const CHUNKS = 2000;

interface A2ARead {
  chunks: number;
  ms: number;
  finalState: number | undefined;
}

/** One SendStreamingMessage read with the stock client; counts artifact chunks until the stream ends. */
async function streamOnce(baseUrl: string): Promise<A2ARead> {
  const client = await new ClientFactory().createFromUrl(baseUrl);
  const startedAt = now();
  let chunks = 0;
  let lastAt = startedAt;
  let finalState: number | undefined;
  const stream = client.sendMessageStream({
    tenant: '',
    message: {
      messageId: randomUUID(),
      contextId: '',
      taskId: '',
      role: Role.ROLE_USER,
      parts: [{ content: { $case: 'text', value: 'go' }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    },
    configuration: undefined,
    metadata: undefined,
  });
  for await (const response of stream) {
    lastAt = now();
    const payload = response.payload;
    // A chunk carries text; the empty update that only says `lastChunk` closes an artifact.
    if (payload?.$case === 'artifactUpdate' && (payload.value.artifact?.parts.length ?? 0) > 0) chunks += 1;
    else if (payload?.$case === 'statusUpdate') finalState = payload.value.status?.state;
    else if (payload?.$case === 'task') finalState = payload.value.status?.state;
  }
  return { chunks, ms: lastAt - startedAt, finalState };
}

const RECORDED_ID = 'bench-recording';

/** funduq's raw SSE answer to one SendStreamingMessage, as it went over the wire. */
async function recordStream(endpoint: string): Promise<string> {
  const response = await fetch(endpoint, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'A2A-Version': '1.0', Accept: 'text/event-stream' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: RECORDED_ID,
      method: 'SendStreamingMessage',
      params: { message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'go' }] } },
    }),
  });
  if (!response.ok) throw new Error(`recording funduq's A2A stream: HTTP ${response.status}`);
  return response.text();
}

/** The A2A door is there when its module exists and the gateway serves the demo's agent card. */
async function a2aDoor(url: string): Promise<{ ok: boolean; why: string }> {
  const doors = join(BENCH_DIR, '..', 'lambdas', 'doors');
  const files = existsSync(doors) ? readdirSync(doors).filter((name) => name.startsWith('a2a')) : [];
  if (files.length === 0) return { ok: false, why: 'no lambdas/doors/a2a*' };
  const card = await fetch(`${url}/a2a/demo/.well-known/agent-card.json`).catch(() => undefined);
  if (!card || card.status !== 200) return { ok: false, why: `GET /a2a/demo/.well-known/agent-card.json answered ${card?.status ?? 'nothing'}` };
  return { ok: true, why: '' };
}

/**
 * The same 2,000 chunks through funduq's A2A door (the scripted AG-UI agent behind it: each
 * TEXT_MESSAGE_CONTENT becomes an artifact chunk) and from the @a2a-js/sdk reference server
 * (DefaultRequestHandler + InMemoryTaskStore + an AgentExecutor), both read with the stock
 * client's `sendMessageStream`. The target's reference is the agent's own stream read straight
 * (by the stock AG-UI client: the A2A client cannot read it), in the same repetition.
 */
export async function a2aStreaming(bench: Bench, store: LocalStoreKind): Promise<Row[]> {
  const reps = bench.quick ? 1 : 5;
  const plan: Script = { events: CHUNKS + 4, intervalMs: 0, deltaChars: 6 };
  const reference = `${bench.agentUrl}/a2a-ref/${CHUNKS}/`;
  const direct = `${bench.agentUrl}/agui?${scriptQuery(plan)}`;
  const gateway = await bench.startGateway('local', `scenario-3-${store}`, store);
  try {
    const door = await a2aDoor(gateway.url);
    // Unmeasured warm-up (a reference run lasts seconds: quick mode goes without).
    if (!bench.quick) await streamOnce(reference);
    const referenceRates: number[] = [];
    const directRates: number[] = [];
    const funduqRates: number[] = [];
    const cannedRates: number[] = [];
    if (door.ok) {
      await gateway.registerAgent('burst', plan);
      await streamOnce(`${gateway.url}/a2a/burst/`);
      const frames = await bench.agent.call<number>('loadCannedA2A', { sse: await recordStream(`${gateway.url}/a2a/burst`), recordedId: RECORDED_ID });
      bench.log(`  recorded funduq's answer (${frames} SSE events) for the canned replay`);
    }
    for (let rep = 0; rep < reps; rep++) {
      const ref = await streamOnce(reference);
      if (ref.chunks !== CHUNKS) throw new Error(`the reference server sent ${ref.chunks} chunks, expected ${CHUNKS}`);
      referenceRates.push(ref.chunks / (ref.ms / 1000));
      const straight = await readWithStockClient(direct);
      directRates.push(straight.events / (straight.totalMs / 1000));
      let line = `  rep ${rep + 1}: reference ${referenceRates.at(-1)!.toFixed(0)} chunks/s, the agent's stream straight ${directRates.at(-1)!.toFixed(0)} events/s`;
      if (door.ok) {
        const through = await gateway.profiled(`a2a-${rep + 1}`, () => streamOnce(`${gateway.url}/a2a/burst/`));
        if (through.chunks !== CHUNKS) bench.log(`  funduq's A2A door sent ${through.chunks} chunks, expected ${CHUNKS}`);
        funduqRates.push(through.chunks / (through.ms / 1000));
        const replay = await streamOnce(`${bench.agentUrl}/a2a-canned/`);
        if (replay.chunks !== CHUNKS) throw new Error(`the canned replay held ${replay.chunks} chunks, expected ${CHUNKS}`);
        cannedRates.push(replay.chunks / (replay.ms / 1000));
        line += `, funduq ${funduqRates.at(-1)!.toFixed(0)} chunks/s, the same bytes from memory ${cannedRates.at(-1)!.toFixed(0)} chunks/s`;
      }
      bench.log(line);
    }
    const base = { scenario: 3, name: NAME, unit: 'chunks/s' };
    const missing = door.ok ? undefined : `not measured: A2A door missing (${door.why})`;
    const referenceMedian = median(referenceRates);
    const straight = median(directRates);
    return [
      row(
        { ...base, metric: 'through funduq A2A door', reference: straight, referenceIs: "the agent's stream straight, stock AG-UI client (events/s)", target: '≥ 60% of direct', note: missing },
        door.ok ? spread(funduqRates) : null,
        (v) => v >= 0.6 * straight,
      ),
      row(
        { ...base, metric: 'through funduq ÷ direct', unit: '%', reference: 100, target: '≥ 60%', note: missing },
        door.ok ? spread(funduqRates.map((rate) => (rate / straight) * 100)) : null,
        (v) => v >= 60,
      ),
      row({ ...base, metric: "the agent's stream straight, stock AG-UI client", unit: 'events/s', reference: null, target: null }, spread(directRates)),
      row(
        { ...base, metric: 'through funduq ÷ in-memory reference', unit: '%', reference: 100, target: null, note: missing },
        door.ok ? spread(funduqRates.map((rate) => (rate / referenceMedian) * 100)) : null,
      ),
      row({ ...base, metric: '@a2a-js/sdk reference (InMemoryTaskStore)', reference: null, target: null }, spread(referenceRates)),
      row(
        {
          ...base,
          metric: "stock client reading funduq's recorded answer from memory",
          reference: null,
          target: null,
          note: "what the stock client itself can take: funduq's own SSE bytes replayed by a server doing nothing else",
        },
        door.ok ? spread(cannedRates) : null,
      ),
      row(
        { ...base, metric: 'through funduq ÷ stock client reading from memory', unit: '%', reference: 100, target: null, note: missing },
        door.ok ? spread(funduqRates.map((rate) => (rate / median(cannedRates)) * 100)) : null,
      ),
    ];
  } finally {
    await gateway.stop();
  }
}
