import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { eventually, Gate } from '../support/core-harness.js';
import { aguiAgent, assistantText, startTestGateway, userMessage } from '../support/gateway.js';
import { linkProvider, reply, ScriptAgent, startRelay } from '../support/link.js';

let gateway: LocalGateway;
const closing: { close(): unknown }[] = [];
beforeAll(async () => {
  gateway = await startTestGateway({ link: { offerMs: 300, graceMs: 1_500, unclaimedMs: 800 } });
});
afterEach(async () => {
  for (const link of closing.splice(0)) await link.close();
});
afterAll(async () => {
  await gateway?.close();
});

let threads = 0;
const thread = () => `fault-thread-${++threads}`;

/** An agent that streams `count` chunks, stopping after `pauseAfter` until the gate opens. */
function chunkedAgent(count: number, pauseAfter: number, gate: Gate) {
  return new ScriptAgent(async function* (input) {
    const messageId = `m-${input.runId}`;
    yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
    yield { type: 'TEXT_MESSAGE_START', messageId, role: 'assistant' };
    for (let i = 1; i <= count; i++) {
      if (i === pauseAfter + 1) await gate.wait;
      yield { type: 'TEXT_MESSAGE_CONTENT', messageId, delta: `${i} ` };
    }
    yield { type: 'TEXT_MESSAGE_END', messageId };
    yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId };
  });
}

const expectedText = (count: number) => Array.from({ length: count }, (_, i) => `${i + 1} `).join('');

describe('a provider link that breaks', () => {
  it('completes a run whose provider lost its link and came back within the grace window, with no event lost or doubled', async () => {
    const relay = await startRelay(gateway.link.url);
    closing.push(relay);
    const gate = new Gate();
    const lost: string[] = [];
    const provider = await linkProvider(gateway, { providerId: 'flaky', agents: { flaky: chunkedAgent(20, 5, gate) }, url: relay.url, onError: (error) => lost.push(error.message) });
    closing.push(provider.link);

    const caller = aguiAgent(gateway, thread(), 'flaky');
    caller.messages = [userMessage('count')];
    const done = caller.runAgent();
    const run = await eventually(async () => {
      const [running] = (await gateway.store.runs.listByStatus('running')).filter((r) => r.agentId === 'flaky');
      expect(await gateway.store.events.lastSeq(running.runId)).toBe(7);
      return running;
    });
    // The network fails mid-run and stays down while the agent goes on (its events wait in the SDK).
    relay.refuse();
    relay.cut();
    gate.open();
    await eventually(() => expect(lost).toContain('the link to funduq was lost; reconnecting'));
    relay.admit();

    const { newMessages } = await done;
    expect(assistantText(newMessages)).toEqual([expectedText(20)]);
    expect(relay.connections).toBeGreaterThanOrEqual(2);
    // The caller may read the run's end from its record (its closing events ride on it) a moment
    // before the settle has appended them to the log.
    const events = await eventually(async () => {
      const stored = await gateway.store.events.read(run.runId, 0);
      expect(stored.map((e) => e.seq)).toEqual(Array.from({ length: 24 }, (_, i) => i + 1));
      return stored;
    });
    expect(events.filter((e) => e.event.type === 'TEXT_MESSAGE_CONTENT').map((e) => e.event.delta).join('')).toBe(expectedText(20));
    expect((await gateway.store.runs.get(run.runId))?.status).toBe('completed');
  });

  it('fails a run with provider_left_holding_it when its provider does not come back within the grace window', async () => {
    const relay = await startRelay(gateway.link.url);
    closing.push(relay);
    const gate = new Gate();
    const provider = await linkProvider(gateway, { providerId: 'gone', agents: { gone: chunkedAgent(10, 2, gate) }, url: relay.url, onError: () => undefined });
    closing.push(provider.link);

    const caller = aguiAgent(gateway, thread(), 'gone');
    caller.messages = [userMessage('count')];
    const errors: { code?: string; message: string }[] = [];
    const done = caller.runAgent({}, { onRunErrorEvent: ({ event }) => void errors.push(event) }).catch(() => undefined);
    await eventually(async () => {
      const [running] = (await gateway.store.runs.listByStatus('running')).filter((r) => r.agentId === 'gone');
      expect(await gateway.store.events.lastSeq(running.runId)).toBe(4);
    });
    relay.refuse();
    relay.cut();
    await done;
    expect(errors).toEqual([expect.objectContaining({ code: 'provider_left_holding_it' })]);
    expect(errors[0].message).toMatch(/did not resume it within 1.5 s/);
    gate.open();
  });

  it('fails a run no provider takes with no_provider_took_it, saying none is linked', async () => {
    const agent = new ScriptAgent((input) => reply(input, 'never'));
    const provider = await linkProvider(gateway, { providerId: 'leaver', agents: { lonely: agent } });
    await provider.link.close();
    const caller = aguiAgent(gateway, thread(), 'lonely');
    caller.messages = [userMessage('anyone?')];
    const errors: { code?: string; message: string }[] = [];
    await caller.runAgent({}, { onRunErrorEvent: ({ event }) => void errors.push(event) }).catch(() => undefined);
    expect(errors).toEqual([
      expect.objectContaining({ code: 'no_provider_took_it', message: 'no provider took the run in 0.8 s: no provider serving agent "lonely" is linked' }),
    ]);
    expect(agent.received).toHaveLength(0);
  });

  it('takes a cancel to the agent, which stops, and ends the run cancelled on the provider’s receipt', async () => {
    const gate = new Gate();
    const agent = chunkedAgent(10, 3, gate);
    const provider = await linkProvider(gateway, { providerId: 'stoppable', agents: { stoppable: agent } });
    closing.push(provider.link);
    const caller = aguiAgent(gateway, thread(), 'stoppable');
    caller.messages = [userMessage('count')];
    const done = caller.runAgent();
    const run = await eventually(async () => {
      const [running] = (await gateway.store.runs.listByStatus('running')).filter((r) => r.agentId === 'stoppable');
      expect(await gateway.store.events.lastSeq(running.runId)).toBe(5);
      return running;
    });
    const cancel = await fetch(`${gateway.url}/agui/stoppable/runs/${run.runId}/cancel`, { method: 'POST' });
    expect(cancel.status).toBe(202);
    await done;
    await eventually(() => expect(agent.aborted).toContain(run.runId));
    const settled = await gateway.store.runs.get(run.runId);
    expect(settled).toMatchObject({ status: 'cancelled', reason: 'cancel_requested', cancelRequested: true });
    // Its closing events ride on its record until the settle has appended them to the log.
    await eventually(async () => expect((await gateway.store.runs.get(run.runId))?.closingEvents).toBeUndefined());
    const events = await gateway.store.events.read(run.runId, 0);
    // The agent's own events, then funduq's closing: the open message ended, and AG-UI 1.0's cancelled outcome.
    expect(events.map((e) => e.event.type)).toEqual(['RUN_STARTED', 'TEXT_MESSAGE_START', 'TEXT_MESSAGE_CONTENT', 'TEXT_MESSAGE_CONTENT', 'TEXT_MESSAGE_CONTENT', 'TEXT_MESSAGE_END', 'RUN_FINISHED']);
    expect(events.at(-1)?.event).toMatchObject({ outcome: { type: 'cancelled' } });
    gate.open();
  });
});
