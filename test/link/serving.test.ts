import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { HttpAgent } from '@ag-ui/client';
import type { RunAgentInput } from '@ag-ui/core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { a2aClient, artifactTexts, asTask, send, stateName, userMessage as a2aMessage, BINDINGS } from '../support/a2a.js';
import { eventually, Gate } from '../support/core-harness.js';
import { aguiAgent, assistantText, startTestGateway, userMessage } from '../support/gateway.js';
import { echoAgent, lastUserText, linkProvider, rawProvider, registerProvider, reply, ScriptAgent, type TestProvider } from '../support/link.js';
import { tcpSocketsOf } from '../support/sockets.js';
import { generateKeyPair } from '../../packages/provider/src/index.js';

const ROOT = join(import.meta.dirname, '../..');

let gateway: LocalGateway;
const links: { close(): unknown }[] = [];
beforeAll(async () => {
  gateway = await startTestGateway({ link: { offerMs: 300 } });
});
afterEach(async () => {
  for (const link of links.splice(0)) await link.close();
});
afterAll(async () => {
  await gateway?.close();
});

async function linked(options: Parameters<typeof linkProvider>[1]): Promise<TestProvider> {
  const provider = await linkProvider(gateway, options);
  links.push(provider.link);
  return provider;
}

let threads = 0;
const thread = () => `link-thread-${++threads}`;

/** A provider as a process of its own, with the echo agent in it. */
async function providerProcess(providerId: string): Promise<ChildProcess> {
  const keys = generateKeyPair();
  await registerProvider(gateway, providerId, { publicKey: keys.publicKey, agents: ['echo'], maxConcurrentRuns: 4 });
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'test/support/link-provider-process.ts')], {
    cwd: ROOT,
    env: { ...process.env, LINK_URL: gateway.link.url, PROVIDER_ID: providerId, PROVIDER_KEY: keys.privateKey, FUNDUQ_KEY: gateway.link.publicKey },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  links.push({ close: () => new Promise((resolve) => (child.exitCode !== null ? resolve(undefined) : (child.once('exit', resolve), child.kill('SIGTERM')))) });
  const lines = createInterface({ input: child.stdout! });
  for await (const line of lines) if (line === 'linked') break;
  return child;
}

describe('an agent behind a provider that dials out', () => {
  it('serves AG-UI and A2A callers with the stock clients, from a provider process that listens on no port', async () => {
    const child = await providerProcess('no-port');
    const sockets = tcpSocketsOf(child.pid!);
    expect(sockets.listening).toBe(0);
    expect(sockets.connected).toBeGreaterThanOrEqual(1);

    const agent = aguiAgent(gateway, thread(), 'echo');
    agent.messages = [userMessage('hello over the link')];
    const { newMessages } = await agent.runAgent();
    expect(assistantText(newMessages)).toEqual(['echo: hello over the link']);

    for (const binding of BINDINGS) {
      const client = await a2aClient(gateway, binding, 'echo');
      const card = await client.getAgentCard();
      expect(card.description).toBe('echoes what it is told');
      expect(card.skills.map((skill) => skill.id)).toEqual(['echo']);
      const task = asTask(await client.sendMessage(send(a2aMessage(`hello by ${binding}`))));
      expect(stateName(task.status?.state)).toBe('TASK_STATE_COMPLETED');
      expect(artifactTexts(task)).toEqual([`echo: hello by ${binding}`]);
    }
    expect(tcpSocketsOf(child.pid!).listening).toBe(0);
  });

  it('gives an A2A run the thread’s history, as every provider kind’s agent gets it', async () => {
    const seen: RunAgentInput[] = [];
    const agent = new ScriptAgent((input) => {
      seen.push(input);
      return reply(input, `heard ${input.messages.length} message(s)`);
    });
    await linked({ providerId: 'history', agents: { historian: agent } });
    const client = await a2aClient(gateway, 'JSONRPC', 'historian');
    const first = asTask(await client.sendMessage(send(a2aMessage('one'))));
    await client.sendMessage(send(a2aMessage('two', { contextId: first.contextId })));
    expect(seen.at(-1)!.messages.map((m) => (typeof m.content === 'string' ? m.content : m.role))).toEqual(['one', 'heard 1 message(s)', 'two']);
    expect((seen.at(-1)!.forwardedProps as { funduq?: { door?: string } }).funduq?.door).toBe('a2a');
  });

  it('shares an agent’s runs between two providers that serve it', async () => {
    const left = echoAgent();
    const right = echoAgent();
    await linked({ providerId: 'share-left', agents: { shared: left } });
    await linked({ providerId: 'share-right', agents: { shared: right } });
    const replies = await Promise.all(
      Array.from({ length: 6 }, async (_, i) => {
        const agent = aguiAgent(gateway, thread(), 'shared');
        agent.messages = [userMessage(`run ${i}`)];
        return assistantText((await agent.runAgent()).newMessages)[0];
      }),
    );
    expect(replies.sort()).toEqual(Array.from({ length: 6 }, (_, i) => `echo: run ${i}`).sort());
    expect(left.received.length).toBeGreaterThanOrEqual(2);
    expect(right.received.length).toBeGreaterThanOrEqual(2);
    expect(left.received.length + right.received.length).toBe(6);
  });

  it('counts a provider’s capacity across its agents: a run of one agent waits while the other holds the only place', async () => {
    const gate = new Gate();
    const alpha = new ScriptAgent(async function* (input) {
      yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
      await gate.wait;
      yield* reply(input, 'alpha done', { started: true });
    });
    const beta = echoAgent();
    await linked({ providerId: 'one-place', agents: { alpha, beta }, places: 1 });

    const alphaRun = aguiAgent(gateway, thread(), 'alpha');
    alphaRun.messages = [userMessage('hold the place')];
    const alphaDone = alphaRun.runAgent();
    await eventually(() => expect(alpha.received).toHaveLength(1));

    const betaRun = aguiAgent(gateway, thread(), 'beta');
    betaRun.messages = [userMessage('wait for it')];
    const betaDone = betaRun.runAgent();
    // Running, but offered to nobody: the provider's one place is alpha's.
    const waiting = await eventually(async () => {
      const runs = (await gateway.store.runs.listByStatus('running')).filter((run) => run.agentId === 'beta');
      expect(runs).toHaveLength(1);
      expect(runs[0].link).toMatchObject({ offers: 0 });
      return runs[0];
    });
    expect(waiting.link?.providerId).toBeUndefined();
    expect((await gateway.store.providers.get('one-place'))?.places).toBe(1);
    expect(beta.received).toHaveLength(0);

    gate.open();
    expect(assistantText((await alphaDone).newMessages)).toEqual(['alpha done']);
    expect(assistantText((await betaDone).newMessages)).toEqual(['echo: wait for it']);
    await eventually(async () => expect((await gateway.store.providers.get('one-place'))?.places).toBe(0));
  });

  it('offers a declined run again: a provider that is full declines, and runs it once it has room', async () => {
    const gate = new Gate();
    const agent = new ScriptAgent(async function* (input) {
      if (lastUserText(input) === 'long') await gate.wait;
      yield* reply(input, `done: ${lastUserText(input)}`);
    });
    // funduq would give it five runs at once; the provider itself takes one at a time and declines the rest.
    await linked({ providerId: 'full', agents: { busy: agent }, places: 5, maxConcurrentRuns: 1 });

    const long = aguiAgent(gateway, thread(), 'busy');
    long.messages = [userMessage('long')];
    const longDone = long.runAgent();
    await eventually(() => expect(agent.received.map(lastUserText)).toEqual(['long']));
    const short = aguiAgent(gateway, thread(), 'busy');
    short.messages = [userMessage('short')];
    const shortDone = short.runAgent();
    // Declined (the provider is full), then offered again every offer period: still not run.
    const declined = await eventually(async () => {
      const run = (await gateway.store.runs.listByStatus('running')).find((r) => r.input.messages[0]?.content === 'short');
      expect(run?.link?.offers).toBeGreaterThanOrEqual(2);
      return run!;
    });
    expect(declined.link?.accepted).toBeUndefined();
    expect(agent.received.map(lastUserText)).toEqual(['long']);
    gate.open();
    expect(assistantText((await longDone).newMessages)).toEqual(['done: long']);
    expect(assistantText((await shortDone).newMessages)).toEqual(['done: short']);
  });

  it('offers an unanswered offer to another provider after the offer period', async () => {
    const { privateKey, publicKey } = generateKeyPair();
    await registerProvider(gateway, 'silent', { publicKey, agents: ['answered'], maxConcurrentRuns: 5 });
    const silent = await rawProvider(gateway, 'silent', privateKey, ['answered']);
    links.push(silent);
    const agent = echoAgent();
    await linked({ providerId: 'answers', agents: { answered: agent } });

    const caller = aguiAgent(gateway, thread(), 'answered');
    caller.messages = [userMessage('anyone?')];
    const started = Date.now();
    expect(assistantText((await caller.runAgent()).newMessages)).toEqual(['echo: anyone?']);
    // The silent provider, linked first and as idle, had the first offer; it was taken back after 300 ms.
    const offers = silent.frames.filter((frame) => frame.type === 'run');
    expect(offers).toHaveLength(1);
    expect(silent.frames).toContainEqual(expect.objectContaining({ type: 'cancel', runId: offers[0].type === 'run' ? offers[0].runId : '', reason: 'offer_withdrawn' }));
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    expect(agent.received).toHaveLength(1);
  });

  it('fails a run its provider refuses, with the provider’s reason: AG-UI RUN_ERROR provider_refused, A2A REJECTED', async () => {
    const { privateKey, publicKey } = generateKeyPair();
    await registerProvider(gateway, 'refuser', { publicKey, agents: ['never'], maxConcurrentRuns: 5 });
    links.push(
      await rawProvider(gateway, 'refuser', privateKey, ['never'], (frame, answer) => {
        if (frame.type === 'run') answer({ v: 1, type: 'refuse', runId: frame.runId, offer: frame.offer, reason: 'not on Sundays' });
      }),
    );
    const caller = aguiAgent(gateway, thread(), 'never');
    caller.messages = [userMessage('please')];
    const errors: { code?: string; message: string }[] = [];
    await caller.runAgent({}, { onRunErrorEvent: ({ event }) => void errors.push(event) }).catch(() => undefined);
    expect(errors).toEqual([expect.objectContaining({ code: 'provider_refused', message: 'provider "refuser" refused the run: not on Sundays' })]);

    const client = await a2aClient(gateway, 'JSONRPC', 'never');
    const task = asTask(await client.sendMessage(send(a2aMessage('please'))));
    expect(stateName(task.status?.state)).toBe('TASK_STATE_REJECTED');
  });

  it('carries an input larger than a WebSocket message to the agent, and an event larger than one back, whole', async () => {
    const seen: RunAgentInput[] = [];
    const agent = new ScriptAgent(async function* (input) {
      seen.push(input);
      yield* reply(input, 'x'.repeat(200 * 1024));
    });
    await linked({ providerId: 'large', agents: { large: agent } });
    const caller = aguiAgent(gateway, thread(), 'large');
    const big = 'é'.repeat(100 * 1024);
    caller.messages = [userMessage(big)];
    const { newMessages } = await caller.runAgent();
    expect(lastUserText(seen[0])).toBe(big);
    expect(assistantText(newMessages)).toEqual(['x'.repeat(200 * 1024)]);
  });

  it('refuses an agent the provider may not serve, and one registered as another kind, naming why', async () => {
    const errors: string[] = [];
    const provider = await linked({ providerId: 'greedy', agents: { mine: echoAgent(), demo: echoAgent(), theirs: echoAgent() }, may: ['mine', 'demo'], onError: (error) => errors.push(error.message) });
    expect(provider.link.registered).toEqual(['mine']);
    expect(errors).toEqual([
      expect.stringMatching(/"demo": "demo" is registered as an agent of the demo kind/),
      expect.stringMatching(/"theirs": provider "greedy" may not serve "theirs"/),
    ]);
    const roster = (await (await fetch(`${gateway.url}/agents`)).json()) as { agents: { id: string }[] };
    expect(roster.agents.map((agent) => agent.id)).toContain('mine');
    expect(roster.agents.map((agent) => agent.id)).not.toContain('theirs');
  });
});

// Last in the file: the roster's providers of equal load take turns being first, and the tests
// above count on the turns the offers before them took.
describe('a run offered over the link', () => {
  it("carries the context its caller's door took (trace headers) to the provider, whose SDK hands it to the agent's preparation", async () => {
    const offered: { runId: string; agent: string; context: Readonly<Record<string, string>> }[] = [];
    await linked({ providerId: 'traced', agents: { echo: { agent: echoAgent(), prepare: (_agent, run) => offered.push(run) } } });
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const threadId = thread();
    const agent = new HttpAgent({ url: `${gateway.url}/agui/echo`, threadId, headers: { traceparent } });
    agent.messages = [userMessage('traced over the link')];
    const { newMessages } = await agent.runAgent({ runId: `${threadId}-run` });
    expect(assistantText(newMessages)).toEqual(['echo: traced over the link']);
    expect(offered).toEqual([{ runId: `${threadId}-run`, agent: 'echo', context: { traceparent } }]);
  });
});
