import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { readSse, startTestGateway, userMessage } from '../support/gateway.js';
import { createParser } from 'eventsource-parser';

let gateway: LocalGateway;
beforeAll(async () => {
  gateway = await startTestGateway();
});
afterAll(async () => {
  await gateway?.close();
});

function post(body: object): Promise<Response> {
  return fetch(`${gateway.url}/agui/demo`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
}

/** Reads an SSE response until its RUN_FINISHED, and returns that event the moment it arrives. */
async function untilFinished(response: Response): Promise<Record<string, unknown>> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let finished: Record<string, unknown> | undefined;
  const parser = createParser({
    onEvent: (event) => {
      const data = JSON.parse(event.data) as Record<string, unknown>;
      if (data.type === 'RUN_FINISHED') finished ??= data;
    },
  });
  while (!finished) {
    const { value, done } = await reader.read();
    if (done) throw new Error('the stream ended without RUN_FINISHED');
    parser.feed(decoder.decode(value, { stream: true }));
  }
  void reader.cancel();
  return finished;
}

describe('an answer sent the moment its interrupt arrives', () => {
  it('is accepted, every time: the record has the open ask before the caller can read it', async () => {
    for (let i = 0; i < 25; i++) {
      const threadId = `quick-${i}`;
      const finished = await untilFinished(await post({ threadId, runId: `${threadId}-ask`, messages: [userMessage('/ask 60')] }));
      const [interrupt] = (finished.outcome as { interrupts: { id: string }[] }).interrupts;
      const answer = await post({
        threadId,
        runId: `${threadId}-answer`,
        messages: [],
        resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { approved: true } }],
      });
      expect([i, answer.status]).toEqual([i, 200]);
      const { events } = await readSse(answer);
      expect(events.at(-1)?.data.type).toBe('RUN_FINISHED');
    }
  });
});
