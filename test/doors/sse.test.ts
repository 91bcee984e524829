import { describe, expect, it } from 'vitest';
import { eventStream, framedByTurn, SSE_OPENING } from '../../lambdas/doors/sse.js';
import { eventually } from '../support/core-harness.js';

async function collect(source: AsyncIterable<string>): Promise<string[]> {
  const out: string[] = [];
  for await (const frames of source) out.push(frames);
  return out;
}

const frame = (n: number) => `[${n}]`;

/** A source that yields nothing until its signal aborts, and says when it was stopped. */
function quietSource() {
  const seen = { stopped: false };
  const produce = async function* (signal: AbortSignal): AsyncIterable<string> {
    await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
    seen.stopped = true;
  };
  return { seen, produce };
}

describe('SSE framing', () => {
  it('joins the frames of what a source yields within one turn into one write', async () => {
    async function* burst() {
      for (let n = 1; n <= 5; n++) yield n;
    }
    expect(await collect(framedByTurn(burst(), frame))).toEqual(['[1][2][3][4][5]']);
  });

  it('writes what a source yields a turn apart as it comes, one write each', async () => {
    async function* paced() {
      for (let n = 1; n <= 3; n++) {
        await new Promise((resolve) => setTimeout(resolve, 1));
        yield n;
      }
    }
    expect(await collect(framedByTurn(paced(), frame))).toEqual(['[1]', '[2]', '[3]']);
  });

  it('writes what the source yielded before it failed, then throws what it threw', async () => {
    async function* failing() {
      yield 1;
      yield 2;
      throw new Error('the store went away');
    }
    const written: string[] = [];
    await expect(
      (async () => {
        for await (const frames of framedByTurn(failing(), frame)) written.push(frames);
      })(),
    ).rejects.toThrow('the store went away');
    expect(written).toEqual(['[1][2]']);
  });
});

describe('an SSE body', () => {
  it('writes its opening comment at once, before any item or heartbeat', async () => {
    const { produce } = quietSource();
    const reader = eventStream(produce, String, { heartbeatMs: 60_000 }).getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toBe(SSE_OPENING);
    await reader.cancel();
  });

  it('stops following its source when nothing it wrote is taken for a whole heartbeat interval', async () => {
    const { seen, produce } = quietSource();
    // Read once, as a copy to a response that failed would, then never again.
    const reader = eventStream(produce, String, { heartbeatMs: 20 }).getReader();
    await reader.read();
    await eventually(() => expect(seen.stopped).toBe(true), 2_000);
  });

  it('goes on following while its reader keeps taking what it writes', async () => {
    const { seen, produce } = quietSource();
    const reader = eventStream(produce, String, { heartbeatMs: 20 }).getReader();
    const texts: string[] = [];
    while (texts.filter((text) => text.includes('heartbeat')).length < 5) texts.push(new TextDecoder().decode((await reader.read()).value));
    expect(seen.stopped).toBe(false);
    await reader.cancel();
    await eventually(() => expect(seen.stopped).toBe(true));
  });
});
