import { randomUUID } from 'node:crypto';
import { createParser } from 'eventsource-parser';
import { AwsBox, BOX_CONTEXT } from '../../test/support/aws-box/box.js';
import { REGION_LATENCY } from '../../test/support/aws-box/latency.js';
import type { Bench, Row } from '../support/bench.js';
import { row } from '../support/bench.js';
import { scriptQuery, type Script } from '../support/script.js';
import { now } from '../support/sse-reader.js';
import { percentile, spread } from '../support/stats.js';

const NAME = 'first event on AWS (the box, a modeled region)';
const SHORT: Script = { events: 3, intervalMs: 0, deltaChars: 8 };
/** A run the next one queues behind: half a second of events. */
const HOLD: Script = { events: 10, intervalMs: 50, deltaChars: 8 };
const PACED: Script = { events: 20, intervalMs: 50, deltaChars: 8 };

interface Read {
  startedAt: number;
  arrivals: number[];
  /** Per event: arrival − the agent's send time (`rawEvent.sentAt`). */
  latencies: number[];
  last?: string;
}

/** A run read to its end by a bare SSE reader, with each event's arrival and its latency from the agent's send. */
async function read(url: string, threadId: string, headers: Record<string, string> = {}, onHeaders?: () => void, forwardedProps: Record<string, unknown> = {}): Promise<Read> {
  const startedAt = now();
  const runId = randomUUID();
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...headers },
    body: JSON.stringify({ threadId, runId, messages: [{ id: `u-${runId}`, role: 'user', content: 'go' }], tools: [], context: [], state: {}, forwardedProps }),
  });
  onHeaders?.();
  if (!response.ok || !response.body) throw new Error(`${url}: HTTP ${response.status} ${(await response.text()).slice(0, 200)}`);
  const got: Read = { startedAt, arrivals: [], latencies: [] };
  const parser = createParser({
    onEvent: (message) => {
      const at = now();
      got.arrivals.push(at);
      const sent = /"sentAt":([0-9.]+)/.exec(message.data);
      if (sent) got.latencies.push(at - Number(sent[1]));
      got.last = /"type":"([A-Z_]+)"/.exec(message.data)?.[1];
    },
  });
  const decoder = new TextDecoder();
  try {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) parser.feed(decoder.decode(chunk, { stream: true }));
  } catch (error) {
    throw new Error(`${url}: the stream broke off after ${got.arrivals.length} events (${String(error)})`);
  }
  if (got.last !== 'RUN_FINISHED') throw new Error(`${url}: the run ended with ${got.last ?? 'nothing'}`);
  return got;
}

const firstEvent = (got: Read) => got.arrivals[0] - got.startedAt;

interface Figures {
  idle: number[];
  queued: number[];
  perEvent: number[];
  refs: { idle: number[]; queued: number[]; perEvent: number[] };
}

/**
 * Issue 29's first event on AWS: the stack as `cdk deploy` makes it, in the AWS box, with every AWS
 * call, queue hand-off and API request taking a region's typical time (`REGION_LATENCY`, cited in
 * `test/support/aws-box/latency.ts`), and the scripted agent on loopback. Three figures, each the
 * median of three repetitions' p50s, beside the agent read straight: the added time to first event
 * of a run on an idle thread, of a run queued behind another (from its predecessor's last event to
 * its own first, against a caller that starts the next run itself the moment the last ended), and
 * the added latency of each event of a paced run. The same box with no latency model is measured
 * beside them: what the design's own waits (the doors' polls of the log, the queue's hand-off) and
 * the box cost with every AWS call answered at once.
 */
export async function awsFirstEvent(bench: Bench): Promise<Row[]> {
  const runs = bench.quick ? 6 : 20;
  const modeled = await measure(bench, runs, true);
  const bare = await measure(bench, runs, false);
  const note = "every AWS call, queue hand-off and API request waits a region's median (test/support/aws-box/latency.ts); the agent on loopback";
  const base = { scenario: 14, name: NAME, unit: 'ms' };
  const ref = (samples: number[]) => spread(samples).median;
  const atOnce = 'the same box answering every AWS call at once (diagnostic)';
  return [
    row({ ...base, note, metric: `added time to first event, a run on an idle thread, p50 of ${runs}`, reference: ref(modeled.refs.idle), referenceIs: 'the agent read straight', target: '≤ 150 ms' }, spread(modeled.idle), (v) => v <= 150),
    row(
      { ...base, note, metric: "added time to first event, a run queued behind another (its predecessor's last event → its first), p50", reference: ref(modeled.refs.queued), referenceIs: 'a caller re-running straight at the agent', target: '≤ 150 ms' },
      spread(modeled.queued),
      (v) => v <= 150,
    ),
    row({ ...base, note, metric: `added latency per event, a run of ${PACED.events} events every ${PACED.intervalMs} ms, p50`, reference: ref(modeled.refs.perEvent), referenceIs: 'the agent read straight', target: '≤ 30 ms' }, spread(modeled.perEvent), (v) => v <= 30),
    row({ ...base, metric: `${atOnce}: added time to first event, idle thread`, reference: ref(bare.refs.idle), referenceIs: 'the agent read straight', target: null }, spread(bare.idle)),
    row({ ...base, metric: `${atOnce}: added time to first event, queued behind another`, reference: ref(bare.refs.queued), referenceIs: 'a caller re-running straight at the agent', target: null }, spread(bare.queued)),
    row({ ...base, metric: `${atOnce}: added latency per event`, reference: ref(bare.refs.perEvent), referenceIs: 'the agent read straight', target: null }, spread(bare.perEvent)),
  ];
}

async function measure(bench: Bench, runs: number, modeled: boolean): Promise<Figures> {
  const box = await AwsBox.start({ context: BOX_CONTEXT, ...(modeled ? { latency: REGION_LATENCY } : {}) });
  try {
    for (const [id, plan] of [['short', SHORT], ['hold', HOLD], ['paced', PACED]] as const) {
      const put = await box.admin('PUT', `agents/${id}`, { url: `${bench.agentUrl}/agui?${scriptQuery(plan)}`, description: `bench: ${plan.events} events every ${plan.intervalMs} ms` });
      if (!put.ok) throw new Error(`PUT /admin/agents/${id}: ${put.status} ${await put.text()}`);
    }
    const key = { 'x-api-key': box.apiKey };
    const through = (agent: string) => `${box.url}/agui/${agent}`;
    const direct = (plan: Script) => `${bench.agentUrl}/agui?${scriptQuery(plan)}`;
    // Cold starts (each function's first invocation) out of the measure.
    for (let i = 0; i < 3; i++) await read(through('short'), randomUUID(), key);

    const figures: Figures = { idle: [], queued: [], perEvent: [], refs: { idle: [], queued: [], perEvent: [] } };
    const { idle, queued, perEvent, refs } = figures;
    for (let rep = 0; rep < 3; rep++) {
      const added: number[] = [];
      const straight: number[] = [];
      for (let i = 0; i < runs; i++) {
        const d = await read(direct(SHORT), randomUUID());
        const t = await read(through('short'), randomUUID(), key);
        straight.push(firstEvent(d));
        added.push(firstEvent(t) - firstEvent(d));
      }
      idle.push(percentile(added, 50));
      refs.idle.push(percentile(straight, 50));

      const gaps: number[] = [];
      const rerun: number[] = [];
      for (let i = 0; i < Math.ceil(runs / 2); i++) {
        const threadId = randomUUID();
        let accepted!: () => void;
        const head = new Promise<void>((resolve) => (accepted = resolve));
        const held = read(through('hold'), threadId, key, accepted);
        // Read to its end whatever happens to the next: a failure is the scenario's, never unhandled.
        held.catch(() => undefined);
        await head;
        // A thread is its agent's: the next run is the same agent's, told by `forwardedProps.bench` to be short.
        const next = await read(through('hold'), threadId, key, undefined, { bench: SHORT });
        gaps.push(next.arrivals[0] - (await held).arrivals.at(-1)!);
        // The reference: a caller that runs again straight at the agent the moment its last run ended.
        const d = await read(direct(HOLD), randomUUID());
        const again = await read(direct(SHORT), randomUUID());
        rerun.push(again.arrivals[0] - d.arrivals.at(-1)!);
      }
      queued.push(percentile(gaps, 50) - percentile(rerun, 50));
      refs.queued.push(percentile(rerun, 50));

      const d = await read(direct(PACED), randomUUID());
      const t = await read(through('paced'), randomUUID(), key);
      perEvent.push(percentile(t.latencies, 50) - percentile(d.latencies, 50));
      refs.perEvent.push(percentile(d.latencies, 50));
      bench.log(
        `  ${modeled ? 'modeled' : 'at once'}, rep ${rep + 1}: first event added p50 ${idle.at(-1)!.toFixed(1)} ms on an idle thread (direct ${refs.idle.at(-1)!.toFixed(1)} ms), ` +
          `${queued.at(-1)!.toFixed(1)} ms queued behind a run (hand-off p50 ${percentile(gaps, 50).toFixed(1)} ms, a caller re-running straight ${refs.queued.at(-1)!.toFixed(1)} ms), ` +
          `per event added p50 ${perEvent.at(-1)!.toFixed(1)} ms`,
      );
    }
    return figures;
  } catch (error) {
    bench.log(`  the box when it failed:\n    ${box.holding().join('\n    ')}`);
    throw error;
  } finally {
    await box.close();
  }
}
