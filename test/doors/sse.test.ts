import { describe, expect, it } from 'vitest';
import { eventStream, framedByTurn, SSE_OPENING } from '../../lambdas/doors/sse.js';
import { streamResponse } from '../../lambdas/doors/a2a/wire.js';
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

describe("the A2A door's SSE response", () => {
  async function chunksOf(response: Response): Promise<string[]> {
    const decoder = new TextDecoder();
    const chunks: string[] = [];
    const reader = response.body!.getReader();
    for (let next = await reader.read(); !next.done; next = await reader.read()) chunks.push(decoder.decode(next.value));
    return chunks;
  }
  const sse = { heartbeatMs: 60_000 };
  const update = (n: number) => ({ result: { statusUpdate: { metadata: { funduq: { cursor: `c${n}` } } }, n } });

  it("joins the updates of one turn into one write, each its own SSE event with its cursor as id", async () => {
    async function* burst() {
      for (let n = 2; n <= 50; n++) yield n;
    }
    const rest = burst();
    const response = streamResponse({ done: false, value: 1 }, rest, new AbortController(), update, () => ({}), sse);
    const [opening, ...writes] = await chunksOf(response);
    expect(opening).toBe(SSE_OPENING);
    expect(writes).toHaveLength(1);
    const events = writes[0].split('\n\n').filter(Boolean);
    expect(events).toHaveLength(50);
    expect(events[49]).toBe(`id: c50\ndata: ${JSON.stringify(update(50))}`);
  });

  it('writes the updates a failure came after, then the error event', async () => {
    async function* failing() {
      yield 2;
      throw new Error('the task store went away');
    }
    const response = streamResponse({ done: false, value: 1 }, failing(), new AbortController(), update, (error) => ({ error: String(error) }), sse);
    const body = (await chunksOf(response)).join('');
    expect(body.split('\n\n').filter(Boolean).slice(1)).toEqual([
      `id: c1\ndata: ${JSON.stringify(update(1))}`,
      `id: c2\ndata: ${JSON.stringify(update(2))}`,
      `event: error\ndata: ${JSON.stringify({ error: 'Error: the task store went away' })}`,
    ]);
  });
});
