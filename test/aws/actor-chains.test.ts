import { createHash, randomUUID } from 'node:crypto';
import { CompactSign, exportJWK, generateKeyPair } from 'jose';
import { afterAll, describe, expect, it } from 'vitest';
import { verifyActorChain } from '../../packages/provider/src/index.js';
import { runInput } from '../support/aws-box/run-input.js';
import { useAwsBox } from '../support/aws-box/box.js';
import { readSse } from '../support/gateway.js';
import { startHeldAgent, type HeldAgent } from '../support/held-agent.js';

/**
 * Who acts for whom on the deployed shape: the doors check a chain with funduq's key from the link
 * key secret they already read, relay it with funduq's hop, and bind the thread to its head.
 */
const aws = useAwsBox();
/** The box's callers send its API key: each key is a tenant of its own, and its principal. */
const PRINCIPAL = encodeURIComponent('apikey:boxkey0001');
const held: HeldAgent[] = [];

afterAll(async () => {
  for (const agent of held) {
    agent.release();
    await agent.close();
  }
});

const sha256Hex = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

async function hop(actor: Awaited<ReturnType<typeof generateKeyPair>>, previous?: string): Promise<string> {
  const payload = { actorPublicKey: (await exportJWK(actor.publicKey)).x, prevHash: previous === undefined ? null : sha256Hex(previous) };
  return new CompactSign(new TextEncoder().encode(JSON.stringify(payload))).setProtectedHeader({ alg: 'EdDSA' }).sign(actor.privateKey);
}

describe('a chain on AWS', () => {
  it('is relayed with funduq’s hop, binds its thread, and a chainless writer of that thread is refused', async () => {
    const { box } = aws;
    const agent = await startHeldAgent();
    agent.release();
    held.push(agent);
    expect((await box.admin('PUT', 'agents/chained', { url: agent.url, description: 'sees the chain' })).status).toBe(201);
    const [user, assistant] = await Promise.all([generateKeyPair('Ed25519', { extractable: true }), generateKeyPair('Ed25519', { extractable: true })]);
    const put = await box.admin('PUT', `tenants/${PRINCIPAL}/principals/${PRINCIPAL}`, { publicKeys: [(await exportJWK(assistant.publicKey)).x] });
    expect([200, 201]).toContain(put.status);
    const first = await hop(user);
    const actorChain = [first, await hop(assistant, first)];
    const threadId = `chain-${randomUUID()}`;
    const input = runInput(threadId, 'hi', { forwardedProps: { actorChain } });
    const started = await box.fetch(`${box.url}/agui/chained`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(input) });
    expect(started.status, started.status === 200 ? '' : await started.text()).toBe(200);
    await readSse(started);
    const { publicKey } = (await (await box.admin('GET', 'link')).json()) as { publicKey: string };
    const received = agent.received.find((r) => r.runId === input.runId)!;
    const relayed = (received.forwardedProps as { funduq: { actorChain: string[] } }).funduq.actorChain;
    expect(verifyActorChain(relayed, { funduqPublicKey: publicKey })).toMatchObject({ head: (await exportJWK(user.publicKey)).x, dispatchedTo: { agent: 'chained' } });

    const chainless = await box.fetch(`${box.url}/agui/chained`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(runInput(threadId, 'me too')) });
    expect(chainless.status).toBe(403);
    expect(((await chainless.json()) as { error: { code: string } }).error.code).toBe('thread_membership_required');
  });
});
