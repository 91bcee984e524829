import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { eventually } from '../support/core-harness.js';
import { readFirstSse, readSse, startTestGateway, userMessage, type SseEvent } from '../support/gateway.js';

let gateway: LocalGateway;

beforeAll(async () => {
  gateway = await startTestGateway({ demoSlowIntervalMs: 30 });
});
afterAll(async () => {
  await gateway?.close();
});

/** Reads the first `count` events of an SSE response, then goes away (the caller's connection drops). */
async function readThenDrop(response: Response, count: number, controller: AbortController): Promise<SseEvent[]> {
  const events = await readFirstSse(response, count);
  controller.abort();
  return events;
}

const json = (body: object) => ({ method: 'POST', headers: { 'Content-Type': 'application/json', 'A2A-Version': '1.0' }, body: JSON.stringify(body) });

describe('a caller that disconnects and comes back', () => {
  it('reads every event it missed, none twice, on the AG-UI door (Last-Event-ID) and on the A2A door (SubscribeToTask from its cursor)', async () => {
    // AG-UI: the run's stream, dropped after four events while the run goes on.
    const threadId = `resume-${randomUUID()}`;
    const runId = randomUUID();
    const dropped = new AbortController();
    const first = await fetch(`${gateway.url}/agui/demo`, {
      ...json({ threadId, runId, messages: [userMessage('/slow 12')] }),
      signal: dropped.signal,
    });
    const before = await readThenDrop(first, 4, dropped);
    const resumed = await readSse(await fetch(`${gateway.url}/agui/demo/runs/${runId}/events`, { headers: { 'Last-Event-ID': before.at(-1)!.id! } }));
    const whole = await readSse(await fetch(`${gateway.url}/agui/demo/runs/${runId}/events`));

    const seen = [...before, ...resumed.events];
    expect(seen.map((event) => Number(event.id))).toEqual(whole.events.map((_, i) => i + 1));
    expect(seen).toEqual(whole.events);
    expect(seen.at(-1)?.data.type).toBe('RUN_FINISHED');

    // A2A: the task's stream (SendStreamingMessage), dropped after four updates while the task goes on.
    const gone = new AbortController();
    const message = { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: '/slow 12' }] };
    const streaming = await fetch(`${gateway.url}/a2a/demo`, {
      ...json({ jsonrpc: '2.0', id: 1, method: 'SendStreamingMessage', params: { message } }),
      signal: gone.signal,
    });
    const updates = await readThenDrop(streaming, 4, gone);
    const taskId = ((updates[0].data.result as { task: { id: string } }).task).id;
    const subscribe = (cursor: string) =>
      fetch(`${gateway.url}/a2a/demo`, { ...json({ jsonrpc: '2.0', id: 2, method: 'SubscribeToTask', params: { id: taskId } }), headers: { 'Content-Type': 'application/json', 'A2A-Version': '1.0', 'Last-Event-ID': cursor } });
    // Back while the task still runs: the Task as it stood at the cursor, then what came after.
    const back = await readSse(await subscribe(updates.at(-1)!.id!));
    await eventually(async () => expect((await gateway.store.runs.get(taskId))?.status).toBe('completed'));
    // The reference: the whole task replayed from before its first event.
    const everything = await readSse(await subscribe(`0@${taskId}`));

    const cursors = (events: SseEvent[]) => events.map((event) => event.id);
    const results = (events: SseEvent[]) => events.map((event) => event.data.result);
    expect(back.events[0].id).toBe(updates.at(-1)!.id);
    // The stream opens with the Task as it stands when the stream begins (the run may be under way
    // by then); from its first update on, it is the replay's updates, none missing, none twice.
    const from = cursors(everything.events).indexOf(updates[1].id);
    expect(from).toBeGreaterThan(0);
    const after = everything.events.slice(from);
    expect(cursors([...updates.slice(1), ...back.events.slice(1)])).toEqual(cursors(after));
    expect(results([...updates.slice(1), ...back.events.slice(1)])).toEqual(results(after));
    const last = back.events.at(-1)?.data.result as { statusUpdate?: { status: { state: string } } };
    expect(last.statusUpdate?.status.state).toBe('TASK_STATE_COMPLETED');
  });
});
