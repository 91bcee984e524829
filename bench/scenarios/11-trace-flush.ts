import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { AwsBox, BOX_CONTEXT } from '../../test/support/aws-box/box.js';
import type { Bench, Row } from '../support/bench.js';
import { row } from '../support/bench.js';
import { percentile, spread } from '../support/stats.js';

/**
 * What a Lambda invocation's flush of its spans costs, on the deployed shape: the stack as
 * `cdk deploy -c otlpCloudWatch=true` makes it, in the AWS box (Node 22 functions, each export
 * signed with SigV4 and checked by the box's CloudWatch endpoint). The same buffered door route
 * is asked in pairs, alternating which goes first: one request sampled (its server span is
 * exported by the flush before the invocation returns), one not (`traceparent` flags 00: the
 * flush has nothing to send). The difference of the pair is the flush; the median over each
 * repetition's pairs, three repetitions.
 */
export async function traceFlush(bench: Bench): Promise<Row[]> {
  const pairs = bench.quick ? 15 : 40;
  const box = await AwsBox.start({ context: { ...BOX_CONTEXT, otlpCloudWatch: 'true' } });
  try {
    const threadId = `t-${randomUUID()}`;
    const ask = async (sampled: boolean): Promise<number> => {
      const traceparent = `00-${randomUUID().replaceAll('-', '')}-${'5'.repeat(16)}-${sampled ? '01' : '00'}`;
      const started = performance.now();
      const response = await box.request('GET', `/threads/${threadId}`, undefined, { traceparent });
      await response.arrayBuffer();
      return performance.now() - started;
    };
    // Cold starts and the first export's credentials, out of the measure.
    for (let i = 0; i < 4; i++) await ask(i % 2 === 0);
    const before = box.cloudWatchTraces.spans.length;
    const added: number[] = [];
    const unsampled: number[] = [];
    for (let rep = 0; rep < 3; rep++) {
      const differences: number[] = [];
      const plain: number[] = [];
      for (let i = 0; i < pairs; i++) {
        const sampledFirst = i % 2 === 0;
        const first = await ask(sampledFirst);
        const second = await ask(!sampledFirst);
        const [on, off] = sampledFirst ? [first, second] : [second, first];
        differences.push(on - off);
        plain.push(off);
      }
      added.push(percentile(differences, 50));
      unsampled.push(percentile(plain, 50));
      bench.log(`  rep ${rep + 1}: flush adds p50 ${added[rep].toFixed(2)} ms (p90 ${percentile(differences, 90).toFixed(2)} ms) to a ${unsampled[rep].toFixed(2)} ms request, ${pairs} pairs`);
    }
    const exported = box.cloudWatchTraces.spans.length - before;
    const refused = box.cloudWatchTraces.refusals.length;
    bench.log(`  ${exported} spans taken by the box's CloudWatch endpoint (${3 * pairs} sampled requests), ${refused} exports refused`);
    const base = { scenario: 11, name: 'trace flush on AWS (the box, otlpCloudWatch)', unit: 'ms', reference: spread(unsampled).median, referenceIs: 'the same request unsampled (nothing to flush), p50' };
    return [row({ ...base, metric: 'added to a buffered door invocation by its flush (SigV4-signed export), p50 of pairs', target: '≤ 50 ms', ...(refused > 0 ? { met: false, note: `${refused} exports refused` } : {}) }, spread(added), (v) => v <= 50)];
  } finally {
    await box.close();
  }
}
