import { createHash } from 'node:crypto';
import { HttpAgent, type RunAgentInput } from '@ag-ui/client';
import { CompactSign, exportJWK, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../lambdas/core/model.js';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { verifyActorChain } from '../../packages/provider/src/index.js';
import { a2aClient, asTask, BINDINGS, funduq, send, userMessage as a2aMessage } from '../support/a2a.js';
import { startHeldAgent, type HeldAgent } from '../support/held-agent.js';
import { readSse, startTestGateway, userMessage } from '../support/gateway.js';

/** An actor: an Ed25519 key pair made by jose, and its public key as the wire names it. */
interface Actor {
  key: CryptoKey;
  publicKey: string;
}

async function actor(): Promise<Actor> {
  const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
  return { key: privateKey, publicKey: (await exportJWK(publicKey)).x! };
}

const sha256Hex = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

async function hop(by: Actor, prevHash: string | null, extra: Record<string, unknown> = {}): Promise<string> {
  const payload = new TextEncoder().encode(JSON.stringify({ actorPublicKey: by.publicKey, prevHash, ...extra }));
  return new CompactSign(payload).setProtectedHeader({ alg: 'EdDSA' }).sign(by.key);
}

/** A chain of hops by these actors, head first, each naming the one before. */
async function chainOf(actors: readonly Actor[]): Promise<string[]> {
  const chain: string[] = [];
  for (const by of actors) chain.push(await hop(by, chain.length === 0 ? null : sha256Hex(chain.at(-1)!)));
  return chain;
}

async function sign(by: Actor, text: string): Promise<string> {
  const key = by.key;
  const signature = await crypto.subtle.sign('Ed25519', key, new TextEncoder().encode(text));
  return Buffer.from(signature).toString('base64url');
}

const KEYS = new Map<string, Principal>([
  ['key-alice-0123456789', { id: 'alice', tenant: 'acme' }],
  ['key-bob-0123456789', { id: 'bob', tenant: 'acme' }],
  ['key-travel-0123456789', { id: 'travel', tenant: 'acme' }],
  ['key-provider-0123456789', { id: 'provider', tenant: 'acme' }],
]);
const [ALICE, BOB, TRAVEL, PROVIDER] = [...KEYS.keys()];

let gateway: LocalGateway;
let agent: HeldAgent;
let held: HeldAgent;
let user: Actor;
let assistant: Actor;
let travel: Actor;
let stranger: Actor;
let provider: Actor;

beforeAll(async () => {
  [user, assistant, travel, stranger, provider] = await Promise.all([actor(), actor(), actor(), actor(), actor()]);
  agent = await startHeldAgent();
  agent.release();
  held = await startHeldAgent();
  gateway = await startTestGateway({ apiKeys: KEYS });
  const definition = { description: 'an AG-UI agent on loopback', takesInterjections: false, timeoutSeconds: 30, idleTimeoutSeconds: 30 };
  await gateway.gateway.putAgent({ ...definition, id: 'echo', provider: { kind: 'agui-http', url: agent.url }, publicKey: provider.publicKey });
  await gateway.gateway.putAgent({ ...definition, id: 'held', provider: { kind: 'agui-http', url: held.url } });
  // alice presents with her assistant's key; travel (an agent calling on) with its own; bob has none.
  for (const [principal, keys] of [['alice', [assistant.publicKey]], ['travel', [travel.publicKey]], ['provider', [provider.publicKey]]] as const) {
    const put = await admin('PUT', `/tenants/acme/principals/${principal}`, { publicKeys: keys });
    expect(put.status).toBe(201);
  }
});
afterAll(async () => {
  held?.release();
  await gateway?.close();
  await agent?.close();
  await held?.close();
});

const id = (name: string) => `${name}-${Math.random().toString(36).slice(2)}`;

function admin(method: string, path: string, body?: unknown) {
  return fetch(`${gateway.url}/admin${path}`, { method, headers: { 'Content-Type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
}

function post(path: string, body: unknown, key: string) {
  return fetch(`${gateway.url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json', 'x-api-key': key }, body: JSON.stringify(body) });
}

function run(threadId: string, forwardedProps: Record<string, unknown>, content = 'hi', runId = id('r')) {
  return { threadId, runId, messages: [userMessage(content)], forwardedProps };
}

async function refusal(response: Response) {
  return { status: response.status, code: ((await response.json()) as { error: { code: string } }).error.code };
}

/** Nothing of a refused request is in the record: not its run, not its thread. */
async function leftNothing(body: { threadId: string; runId: string }) {
  expect(await gateway.store.runs.get(body.runId)).toBeUndefined();
  expect(await gateway.store.threads.get({ tenant: 'acme', threadId: body.threadId })).toBeUndefined();
}

describe('a chain at the AG-UI door', () => {
  it.each([1, 3, 5])('relays a valid %i-hop chain with funduq’s hop appended, which the SDK’s verifier takes', async (hops) => {
    const actors = { 1: [assistant], 3: [user, travel, assistant], 5: [user, stranger, travel, stranger, assistant] }[hops]!;
    const chain = await chainOf(actors);
    const threadId = id('t');
    // The stock client: the chain rides in forwardedProps.
    const client = new HttpAgent({ url: `${gateway.url}/agui/echo`, threadId, headers: { 'x-api-key': ALICE } });
    client.addMessage(userMessage('book a flight'));
    await client.runAgent({ forwardedProps: { actorChain: chain, note: 'kept' } });
    const received = agent.received.find((input) => input.threadId === threadId) as RunAgentInput;
    const props = received.forwardedProps as { actorChain: string[]; note: string; funduq: { actorChain: string[] } };
    expect(props.actorChain).toEqual(chain);
    expect(props.note).toBe('kept');
    const relayed = props.funduq.actorChain;
    expect(relayed.slice(0, hops)).toEqual(chain);
    const verified = verifyActorChain(relayed, { funduqPublicKey: gateway.link.publicKey });
    expect(verified).toMatchObject({ head: actors[0].publicKey, presenter: assistant.publicKey, dispatchedTo: { agent: 'echo', provider: provider.publicKey } });
    expect(verified.hops).toHaveLength(hops + 1);
    expect((await gateway.store.runs.get(received.runId))?.actorChain).toEqual(relayed);
    expect((await gateway.store.threads.get({ tenant: 'acme', threadId }))?.head).toBe(actors[0].publicKey);
    // Its audit record names who acted for whom: the chain's head and its presenter.
    const { records } = await gateway.store.audit.list({ target: `run:${received.runId}`, from: new Date(Date.now() - 3_600_000).toISOString(), to: new Date(Date.now() + 3_600_000).toISOString(), limit: 10 });
    expect(records.map((record) => record.actor)).toEqual([{ kind: 'principal', principal: 'alice', credentialId: expect.any(String), chainHead: actors[0].publicKey, chainPresenter: assistant.publicKey }]);
  });

  it('refuses a tampered, broken, spliced, reordered or headless chain with invalid_chain, leaving nothing in the record', async () => {
    const good = await chainOf([user, travel, assistant]);
    const other = await chainOf([stranger, travel, assistant]);
    const [h, p, s] = good[1].split('.');
    const tampered = [good[0], `${h}.${p}.${s.slice(0, -2)}${s.endsWith('AA') ? 'BA' : 'AA'}`, good[2]];
    const broken = [good[0], await hop(travel, sha256Hex('something else')), await hop(assistant, null)];
    const spliced = [other[0], good[1], good[2]];
    const reordered = [good[1], good[0], good[2]];
    const headless = good.slice(1);
    for (const chain of [tampered, broken, spliced, reordered, headless]) {
      const body = run(id('t'), { actorChain: chain });
      expect(await refusal(await post('/agui/echo', body, ALICE))).toEqual({ status: 403, code: 'invalid_chain' });
      await leftNothing(body);
    }
  });

  it('names the hop that failed', async () => {
    const good = await chainOf([user, assistant]);
    const response = await post('/agui/echo', run(id('t'), { actorChain: [good[0], await hop(assistant, null)] }), ALICE);
    expect(((await response.json()) as { error: { message: string } }).error.message).toMatch(/hop 1 .* does not follow hop 0/);
  });

  it('refuses a chain whose last hop is not the presenter’s (invalid_chain) and one from a principal with no key (presenter_required)', async () => {
    const wrong = run(id('t'), { actorChain: await chainOf([user, travel]) });
    expect(await refusal(await post('/agui/echo', wrong, ALICE))).toEqual({ status: 403, code: 'invalid_chain' });
    await leftNothing(wrong);
    const keyless = run(id('t'), { actorChain: await chainOf([user, assistant]) });
    expect(await refusal(await post('/agui/echo', keyless, BOB))).toEqual({ status: 403, code: 'presenter_required' });
    await leftNothing(keyless);
  });

  it('refuses a chain of 17 hops or over 16 KB', async () => {
    const long = await chainOf([user, ...Array.from({ length: 15 }, () => travel), assistant]);
    const wide: string[] = [await hop(user, null, { note: 'x'.repeat(17_000) })];
    wide.push(await hop(assistant, sha256Hex(wide[0])));
    for (const chain of [long, wide]) {
      const body = run(id('t'), { actorChain: chain });
      expect(await refusal(await post('/agui/echo', body, ALICE))).toEqual({ status: 403, code: 'invalid_chain' });
      await leftNothing(body);
    }
  });

  it('relays nothing for a request without a chain', async () => {
    const body = run(id('t'), {});
    const response = await post('/agui/echo', body, BOB);
    expect(response.status).toBe(200);
    await readSse(response);
    const received = agent.received.find((input) => input.runId === body.runId)!;
    expect((received.forwardedProps as { funduq: Record<string, unknown> }).funduq.actorChain).toBeUndefined();
    expect((await gateway.store.threads.get({ tenant: 'acme', threadId: body.threadId }))?.head).toBeUndefined();
  });
});

describe('a thread bound to its head', () => {
  it('refuses a chainless writer and a chain with another head, and takes the same head and the serving provider', async () => {
    const threadId = id('t');
    const first = run(threadId, { actorChain: await chainOf([user, assistant]) });
    expect((await post('/agui/echo', first, ALICE)).status).toBe(200);
    // Another party acting for the same head (travel, calling on for the user) writes to it.
    const sameHead = await post('/agui/echo', run(threadId, { actorChain: await chainOf([user, travel]) }), TRAVEL);
    expect(sameHead.status).toBe(200);
    const chainless = run(threadId, {});
    expect(await refusal(await post('/agui/echo', chainless, BOB))).toEqual({ status: 403, code: 'thread_membership_required' });
    expect(await gateway.store.runs.get(chainless.runId)).toBeUndefined();
    const otherHead = run(threadId, { actorChain: await chainOf([stranger, assistant]) });
    expect(await refusal(await post('/agui/echo', otherHead, ALICE))).toEqual({ status: 403, code: 'thread_membership_required' });
    expect(await gateway.store.runs.get(otherHead.runId)).toBeUndefined();
    // The agent's serving provider (the key its definition names) writes with a chain of its own.
    expect((await post('/agui/echo', run(threadId, { actorChain: await chainOf([provider]) }), PROVIDER)).status).toBe(200);
    expect((await gateway.store.threads.get({ tenant: 'acme', threadId }))?.head).toBe(user.publicKey);
  });

  it('stays open when born without a chain: a later chain cannot lock it', async () => {
    const threadId = id('t');
    await readSse(await post('/agui/echo', run(threadId, {}), BOB));
    await readSse(await post('/agui/echo', run(threadId, { actorChain: await chainOf([user, assistant]) }), ALICE));
    expect((await post('/agui/echo', run(threadId, {}), BOB)).status).toBe(200);
    expect((await gateway.store.threads.get({ tenant: 'acme', threadId }))?.head).toBeUndefined();
  });
});

/** A bound thread whose demo run asks: the chain, the waiting run and the text its resolution signs. */
async function boundAsk() {
  const threadId = id('t');
  const actorChain = await chainOf([user, assistant]);
  const asked = run(threadId, { actorChain }, '/ask 60');
  const { events } = await readSse(await post('/agui/demo', asked, ALICE));
  const [interrupt] = (events.at(-1)!.data.outcome as { interrupts: { id: string }[] }).interrupts;
  const text = `funduq-resolve:${asked.runId}:${sha256Hex([interrupt.id].sort().join('\0'))}`;
  const answer = (resolution?: unknown) => ({
    threadId,
    runId: id('answer'),
    messages: [],
    resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { approved: true } }],
    forwardedProps: { actorChain, ...(resolution ? { resolution } : {}) },
  });
  return { threadId, asked, text, answer };
}

describe('answers on a bound thread', () => {
  it('needs the head’s signature: none, a middle party’s or a bad one is refused invalid_resolution and the ask stays open', async () => {
    const { asked, text, answer } = await boundAsk();
    const refusals = [
      answer(),
      answer({ publicKey: assistant.publicKey, signature: await sign(assistant, text) }),
      answer({ publicKey: user.publicKey, signature: await sign(user, `${text}x`) }),
    ];
    for (const body of refusals) expect(await refusal(await post('/agui/demo', body, ALICE))).toEqual({ status: 403, code: 'invalid_resolution' });
    expect(Object.values((await gateway.store.runs.get(asked.runId))!.asks!).map((ask) => ask.state)).toEqual(['open']);
    const good = await post('/agui/demo', answer({ publicKey: user.publicKey, signature: await sign(user, text) }), ALICE);
    expect(good.status).toBe(200);
    expect((await readSse(good)).events.at(-1)?.data.type).toBe('RUN_FINISHED');
  });

  it('of 50 concurrent answers, a bad proof never wins: exactly one good one does, and a bad one before it is refused for its proof', async () => {
    const { text, answer } = await boundAsk();
    const good = { publicKey: user.publicKey, signature: await sign(user, text) };
    const bad = { publicKey: user.publicKey, signature: await sign(stranger, text) };
    const bodies = Array.from({ length: 50 }, (_, i) => ({ good: i % 2 === 0, body: answer(i % 2 === 0 ? good : bad) }));
    const answers = await Promise.all(bodies.map(async ({ good: isGood, body }) => ({ isGood, response: await post('/agui/demo', body, ALICE) })));
    const won = answers.filter(({ response }) => response.status === 200);
    expect(answers.filter(({ response }) => response.status === 403).every(({ isGood }) => !isGood)).toBe(true);
    expect(won).toHaveLength(1);
    expect(won[0].isGood).toBe(true);
    for (const { isGood, response } of answers) {
      if (response.status === 200) await readSse(response);
      // A bad proof that came after the good one won finds no ask to answer; one that came before is refused for its proof.
      else expect(await refusal(response)).toEqual(isGood ? { status: 409, code: 'no_open_ask' } : { status: expect.any(Number), code: expect.stringMatching(/^(invalid_resolution|no_open_ask)$/) });
    }
  });

  it('take an unbound thread’s answer as today: no resolution', async () => {
    const threadId = id('t');
    const { events } = await readSse(await post('/agui/demo', run(threadId, {}, '/ask 60'), BOB));
    const [interrupt] = (events.at(-1)!.data.outcome as { interrupts: { id: string }[] }).interrupts;
    const answered = await post('/agui/demo', { threadId, runId: id('a'), messages: [], resume: [{ interruptId: interrupt.id, status: 'resolved', payload: {} }] }, BOB);
    expect(answered.status).toBe(200);
    await readSse(answered);
  });
});

describe('cancels on a bound thread', () => {
  it('need a fresh signature of the head: refused invalid_cancel before saying whether the run is cancellable, and who asked is recorded', async () => {
    const threadId = id('t');
    const body = run(threadId, { actorChain: await chainOf([user, assistant]) });
    const started = await post('/agui/held', body, ALICE);
    expect(started.status).toBe(200);
    const cancel = (proof?: unknown) => post(`/agui/held/runs/${body.runId}/cancel`, proof ? { cancel: proof } : {}, ALICE);
    const now = Date.now();
    expect(await refusal(await cancel())).toEqual({ status: 403, code: 'invalid_cancel' });
    const stale = now - 120_000;
    expect(await refusal(await cancel({ publicKey: user.publicKey, timestamp: stale, signature: await sign(user, `funduq-cancel:${body.runId}:${stale}`) }))).toEqual({ status: 403, code: 'invalid_cancel' });
    expect(await refusal(await cancel({ publicKey: assistant.publicKey, timestamp: now, signature: await sign(assistant, `funduq-cancel:${body.runId}:${now}`) }))).toEqual({ status: 403, code: 'invalid_cancel' });
    const accepted = await cancel({ publicKey: user.publicKey, timestamp: now, signature: await sign(user, `funduq-cancel:${body.runId}:${now}`) });
    expect(accepted.status).toBe(202);
    expect((await gateway.store.runs.get(body.runId))?.cancelRequestedBy).toBe(user.publicKey);
    await readSse(started);
  });
});

describe('principals’ keys at the admin door', () => {
  it('are read, replaced and deleted; a key that is none is refused', async () => {
    expect(await (await admin('GET', '/tenants/acme/principals/alice')).json()).toEqual({ tenant: 'acme', principal: 'alice', publicKeys: [assistant.publicKey] });
    expect((await admin('PUT', '/tenants/acme/principals/carol', { publicKeys: ['not-a-key'] })).status).toBe(400);
    expect((await admin('PUT', '/tenants/acme/principals/carol', { publicKeys: [stranger.publicKey] })).status).toBe(201);
    expect((await admin('PUT', '/tenants/acme/principals/carol', { publicKeys: [travel.publicKey] })).status).toBe(200);
    expect((await admin('DELETE', '/tenants/acme/principals/carol')).status).toBe(204);
    expect((await admin('GET', '/tenants/acme/principals/carol')).status).toBe(404);
  });
});

describe.each(BINDINGS)('a chain at the A2A door (%s)', (binding) => {
  it('relays the request-level metadata.actorChain with funduq’s hop; one in the message’s own metadata binds nothing', async () => {
    const client = await a2aClient(gateway, binding, 'echo', ALICE);
    const chain = await chainOf([user, travel, assistant]);
    const task = asTask(await client.sendMessage(send(a2aMessage('book'), {}, { actorChain: chain })));
    const received = agent.received.find((input) => input.threadId === task.contextId)!;
    const relayed = (received.forwardedProps as { funduq: { actorChain: string[] } }).funduq.actorChain;
    expect(verifyActorChain(relayed, { funduqPublicKey: gateway.link.publicKey })).toMatchObject({ head: user.publicKey, presenter: assistant.publicKey });
    expect((await gateway.store.threads.get({ tenant: 'acme', threadId: task.contextId }))?.head).toBe(user.publicKey);

    const loose = asTask(await client.sendMessage(send(a2aMessage('book', { metadata: { actorChain: chain } }))));
    expect((await gateway.store.threads.get({ tenant: 'acme', threadId: loose.contextId }))?.head).toBeUndefined();
  });

  it('refuses a bad chain and a chainless writer of a bound context, the code in the message', async () => {
    const client = await a2aClient(gateway, binding, 'echo', ALICE);
    await expect(client.sendMessage(send(a2aMessage('x'), {}, { actorChain: await chainOf([user, travel]) }))).rejects.toThrow(/invalid_chain/);
    const bound = asTask(await client.sendMessage(send(a2aMessage('book'), {}, { actorChain: await chainOf([user, assistant]) })));
    const bob = await a2aClient(gateway, binding, 'echo', BOB);
    await expect(bob.sendMessage(send(a2aMessage('me too', { contextId: bound.contextId })))).rejects.toThrow(/thread_membership_required/);
    await expect(bob.sendMessage(send(a2aMessage('me too'), {}, { actorChain: await chainOf([user, assistant]) }))).rejects.toThrow(/presenter_required/);
  });

  it('answers a bound task only with metadata.resolution, and cancels it only with metadata.cancel', async () => {
    const client = await a2aClient(gateway, binding, 'demo', ALICE);
    const actorChain = await chainOf([user, assistant]);
    const asked = asTask(await client.sendMessage(send(a2aMessage('/ask 60'), {}, { actorChain })));
    const [ask] = funduq(asked).openAsks as { id: string }[];
    const text = `funduq-resolve:${asked.id}:${sha256Hex(ask.id)}`;
    const reply = (resolution?: unknown) => send(a2aMessage('yes', { taskId: asked.id, contextId: asked.contextId }), {}, { actorChain, ...(resolution ? { resolution } : {}) });
    await expect(client.sendMessage(reply())).rejects.toThrow(/invalid_resolution/);
    await expect(client.sendMessage(reply({ publicKey: user.publicKey, signature: await sign(stranger, text) }))).rejects.toThrow(/invalid_resolution/);
    const answered = asTask(await client.sendMessage(reply({ publicKey: user.publicKey, signature: await sign(user, text) })));
    expect(answered.id).toBe(asked.id);

    const waiting = asTask(await client.sendMessage(send(a2aMessage('/ask 60'), {}, { actorChain })));
    await expect(client.cancelTask({ id: waiting.id, tenant: '', metadata: {} })).rejects.toThrow(/invalid_cancel/);
    const now = Date.now();
    const cancel = { publicKey: user.publicKey, timestamp: now, signature: await sign(user, `funduq-cancel:${waiting.id}:${now}`) };
    if (binding === 'JSONRPC') {
      const cancelled = await client.cancelTask({ id: waiting.id, tenant: '', metadata: { cancel } });
      expect(funduq(cancelled).openAsks).toBeUndefined();
    } else {
      // The stock HTTP+JSON client sends CancelTask with no body (its metadata is dropped): the body is the caller's own.
      const response = await fetch(`${gateway.url}/a2a/demo/rest/tasks/${encodeURIComponent(waiting.id)}:cancel`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'A2A-Version': '1.0', 'x-api-key': ALICE },
        body: JSON.stringify({ metadata: { cancel } }),
      });
      expect(response.status).toBe(200);
    }
    expect(funduq(await client.getTask({ id: waiting.id, tenant: '' })).openAsks).toBeUndefined();
  });
});
