import { randomUUID } from 'node:crypto';
import { AwsBox, BOX_CONTEXT } from '../../test/support/aws-box/box.js';
import { REGION_LATENCY } from '../../test/support/aws-box/latency.js';
import type { Bench, Row } from '../support/bench.js';
import { row } from '../support/bench.js';
import { scriptQuery, type Script } from '../support/script.js';
import { readRun, runProblem, type Read } from '../support/sse-reader.js';
import { percentile, spread } from '../support/stats.js';

const NAME = 'first event on AWS (the box, a modeled region)';
/** As short as a run gets (at least 4 events: RUN_STARTED, a message's start, end and RUN_FINISHED). */
const SHORT: Script = { events: 4, intervalMs: 0, deltaChars: 8 };
/** A run the next one queues behind: half a second of events. */
const HOLD: Script = { events: 10, intervalMs: 50, deltaChars: 8 };
const PACED: Script = { events: 20, intervalMs: 50, deltaChars: 8 };

interface ReadOptions {
  threadId?: string;
  headers?: Record<string, string>;
  onHeaders?: () => void;
  /** `bench`: the script of this run, over its agent's (`plan` is then that script). */
  forwardedProps?: Record<string, unknown>;
}

/** A run of `plan` read to its end by the bench's bare SSE reader, each event's latency from the agent's send taken; a run that did not finish whole stops the scenario. */
async function read(url: string, plan: Script, { threadId = randomUUID(), headers = {}, onHeaders, forwardedProps = {} }: ReadOptions = {}): Promise<Read> {
  const got = await readRun(url, { threadId, runId: randomUUID(), forwardedProps }, onHeaders, headers, { latencies: true });
  const problem = runProblem(got, plan.events);
  if (problem) throw new Error(`${url}: ${problem}`);
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
  // The design before the doors relayed runs on idle threads, in the same model: what relaying at the door bought.
  const queuedOnly = await measure(bench, runs, true, false);
  const note = "every AWS call, queue hand-off and API request waits a region's median (test/support/aws-box/latency.ts); the agent on loopback";
  const base = { scenario: 14, name: NAME, unit: 'ms' };
  const ref = (samples: number[]) => spread(samples).median;
  const atOnce = 'the same box answering every AWS call at once (diagnostic)';
  const relayless = 'the same model with no run relayed at its door, relayAtDoor false (diagnostic)';
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
    row({ ...base, metric: `${relayless}: added time to first event, idle thread`, reference: ref(queuedOnly.refs.idle), referenceIs: 'the agent read straight', target: null }, spread(queuedOnly.idle)),
    row({ ...base, metric: `${relayless}: added latency per event`, reference: ref(queuedOnly.refs.perEvent), referenceIs: 'the agent read straight', target: null }, spread(queuedOnly.perEvent)),
  ];
}

async function measure(bench: Bench, runs: number, modeled: boolean, relayAtDoor = true): Promise<Figures> {
  const context = relayAtDoor ? BOX_CONTEXT : { ...BOX_CONTEXT, relayAtDoor: 'false' };
  const box = await AwsBox.start({ context, ...(modeled ? { latency: REGION_LATENCY } : {}) });
  const label = `${modeled ? 'modeled' : 'at once'}${relayAtDoor ? '' : ', relayAtDoor false'}`;
  try {
    for (const [id, plan] of [['short', SHORT], ['hold', HOLD], ['paced', PACED]] as const) {
      const put = await box.admin('PUT', `agents/${id}`, { url: `${bench.agentUrl}/agui?${scriptQuery(plan)}`, description: `bench: ${plan.events} events every ${plan.intervalMs} ms` });
      if (!put.ok) throw new Error(`PUT /admin/agents/${id}: ${put.status} ${await put.text()}`);
    }
    const key = { 'x-api-key': box.apiKey };
    const through = (agent: string) => `${box.url}/agui/${agent}`;
    const direct = (plan: Script) => `${bench.agentUrl}/agui?${scriptQuery(plan)}`;
    // Cold starts (each function's first invocation) out of the measure.
    for (let i = 0; i < 3; i++) await read(through('short'), SHORT, { headers: key });

    const figures: Figures = { idle: [], queued: [], perEvent: [], refs: { idle: [], queued: [], perEvent: [] } };
    const { idle, queued, perEvent, refs } = figures;
    for (let rep = 0; rep < 3; rep++) {
      const added: number[] = [];
      const straight: number[] = [];
      for (let i = 0; i < runs; i++) {
        const d = await read(direct(SHORT), SHORT);
        const t = await read(through('short'), SHORT, { headers: key });
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
        const held = read(through('hold'), HOLD, { threadId, headers: key, onHeaders: accepted });
        // Read to its end whatever happens to the next: a failure is the scenario's, never unhandled.
        held.catch(() => undefined);
        await head;
        // A thread is its agent's: the next run is the same agent's, told by `forwardedProps.bench` to be short.
        const next = await read(through('hold'), SHORT, { threadId, headers: key, forwardedProps: { bench: SHORT } });
        gaps.push(next.arrivals[0] - (await held).arrivals.at(-1)!);
        // The reference: a caller that runs again straight at the agent the moment its last run ended.
        const d = await read(direct(HOLD), HOLD);
        const again = await read(direct(SHORT), SHORT);
        rerun.push(again.arrivals[0] - d.arrivals.at(-1)!);
      }
      queued.push(percentile(gaps, 50) - percentile(rerun, 50));
      refs.queued.push(percentile(rerun, 50));

      const d = await read(direct(PACED), PACED);
      const t = await read(through('paced'), PACED, { headers: key });
      perEvent.push(percentile(t.latencies!, 50) - percentile(d.latencies!, 50));
      refs.perEvent.push(percentile(d.latencies!, 50));
      bench.log(
        `  ${label}, rep ${rep + 1}: first event added p50 ${idle.at(-1)!.toFixed(1)} ms on an idle thread (direct ${refs.idle.at(-1)!.toFixed(1)} ms), ` +
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
