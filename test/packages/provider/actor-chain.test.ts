import { createHash, createPrivateKey } from 'node:crypto';
import { CompactSign, exportJWK, generateKeyPair } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { ActorChainError, appendHop, readActorChain, verifyActorChain } from '../../../packages/provider/src/index.js';

interface Actor {
  key: CryptoKey;
  publicKey: string;
}

async function actor(): Promise<Actor> {
  const { privateKey, publicKey } = await generateKeyPair('Ed25519', { extractable: true });
  return { key: privateKey, publicKey: (await exportJWK(publicKey)).x! };
}

const sha256Hex = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

async function hop(by: Actor, prevHash: string | null, extra: Record<string, unknown> = {}, alg = 'EdDSA'): Promise<string> {
  return new CompactSign(new TextEncoder().encode(JSON.stringify({ actorPublicKey: by.publicKey, prevHash, ...extra }))).setProtectedHeader({ alg }).sign(by.key);
}

async function chainOf(actors: readonly Actor[]): Promise<string[]> {
  const chain: string[] = [];
  for (const by of actors) chain.push(await hop(by, chain.length === 0 ? null : sha256Hex(chain.at(-1)!)));
  return chain;
}

let user: Actor;
let agent: Actor;
let other: Actor;
let funduq: Actor;
/** funduq's key as node:crypto holds it, to append its hop as the gateway does. */
let funduqKey: ReturnType<typeof createPrivateKey>;

beforeAll(async () => {
  [user, agent, other, funduq] = await Promise.all([actor(), actor(), actor(), actor()]);
  funduqKey = createPrivateKey({ key: (await exportJWK(funduq.key)) as never, format: 'jwk' });
});

function refusal(check: () => unknown): { hop: number | undefined; message: string } {
  try {
    check();
  } catch (error) {
    expect(error).toBeInstanceOf(ActorChainError);
    return { hop: (error as ActorChainError).hop, message: (error as Error).message };
  }
  throw new Error('the chain was taken');
}

describe('verifyActorChain', () => {
  it('returns the head, the presenter and the hops of a chain funduq relayed, jose-built hops and funduq’s alike', async () => {
    const chain = await chainOf([user, other, agent]);
    const relayed = appendHop(chain, funduqKey, { dispatchedTo: { agent: 'travel', provider: 'p1' } });
    const verified = verifyActorChain(relayed, { funduqPublicKey: funduq.publicKey });
    expect(verified).toMatchObject({ head: user.publicKey, presenter: agent.publicKey, dispatchedTo: { agent: 'travel', provider: 'p1' } });
    expect(verified.hops.map((h) => h.actorPublicKey)).toEqual([user.publicKey, other.publicKey, agent.publicKey, funduq.publicKey]);
  });

  it('takes RFC 9864’s fully specified Ed25519 alg beside EdDSA', async () => {
    const first = await hop(user, null, {}, 'Ed25519');
    expect(readActorChain([first, await hop(agent, sha256Hex(first))]).map((h) => h.actorPublicKey)).toEqual([user.publicKey, agent.publicKey]);
  });

  it('refuses a chain whose last hop is not funduq’s, or not by the pinned key', async () => {
    const chain = await chainOf([user, agent]);
    expect(refusal(() => verifyActorChain(chain, { funduqPublicKey: funduq.publicKey }))).toMatchObject({ hop: 1, message: /not funduq's/ });
    const impostor = createPrivateKey({ key: (await exportJWK((await actor()).key)) as never, format: 'jwk' });
    const relayed = appendHop(chain, impostor, { dispatchedTo: { agent: 'a', provider: 'p' } });
    expect(refusal(() => verifyActorChain(relayed, { funduqPublicKey: funduq.publicKey })).hop).toBe(2);
  });

  it('refuses a tampered signature, a broken link, a splice, a reorder and a dropped head, naming the hop', async () => {
    const good = await chainOf([user, other, agent]);
    const elsewhere = await chainOf([agent, other, user]);
    const [h, p] = good[1].split('.');
    const forged = `${h}.${p}.${good[0].split('.')[2]}`;
    expect(refusal(() => readActorChain([good[0], forged, good[2]]))).toMatchObject({ hop: 1, message: /signature/ });
    const unlinked = await hop(other, sha256Hex('x'));
    expect(refusal(() => readActorChain([good[0], unlinked, good[2]]))).toMatchObject({ hop: 1, message: /does not follow hop 0/ });
    expect(refusal(() => readActorChain([good[0], elsewhere[1], good[2]])).hop).toBe(1);
    expect(refusal(() => readActorChain([good[0], good[2], good[1]])).hop).toBe(1);
    expect(refusal(() => readActorChain(good.slice(1)))).toMatchObject({ hop: 0, message: /head of the chain is missing/ });
  });

  it('refuses what is no chain: not an array, empty, 17 hops, over 16 KB, a token that is no JWS', async () => {
    expect(refusal(() => readActorChain('a.b.c')).message).toMatch(/JSON array/);
    expect(refusal(() => readActorChain([])).message).toMatch(/non-empty/);
    expect(refusal(() => readActorChain(Array.from({ length: 17 }, () => 'a.b.c'))).message).toMatch(/17 hops/);
    const wide = await hop(user, null, { pad: 'x'.repeat(16_500) });
    expect(refusal(() => readActorChain([wide])).message).toMatch(/bytes/);
    expect(refusal(() => readActorChain(['not a token']))).toMatchObject({ hop: 0 });
  });
});
