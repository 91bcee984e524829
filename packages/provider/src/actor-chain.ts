import { createHash, type KeyObject } from 'node:crypto';
import { normalizePublicKey, rawPublicKey, signText, verifyText } from './ed25519.js';

/**
 * Signed actor chains: who acts for whom. A chain is a JSON array of compact JWS tokens (EdDSA,
 * Ed25519), one per hop, each signed by the private half of its own `actorPublicKey` and naming the
 * previous hop by the SHA-256 (hex) of its whole token. Hop 0's signer is the head (the party
 * responsible), the last hop's the presenter. Hops carry no `iat`/`exp`: they do not expire.
 */

/** At most this many hops, and this many bytes of the chain as JSON: a chain is checked before anything is written. */
export const MAX_CHAIN_HOPS = 16;
export const MAX_CHAIN_BYTES = 16 * 1024;

/** One hop as its token says it: its signer, the link to the hop before, and whatever else its payload holds. */
export interface ActorHop {
  /** Base64url of the signer's 32-byte Ed25519 public key. */
  actorPublicKey: string;
  /** Null for the head; else the SHA-256 hex of the previous hop's token. */
  prevHash: string | null;
  /** funduq's hop: the agent it dispatched to and the provider that serves it. */
  dispatchedTo?: { agent: string; provider: string };
  /** The payload whole, as signed. */
  payload: Record<string, unknown>;
}

/** A chain that does not verify: `code` is funduq's failure code, `message` names the hop and what failed. */
export class ActorChainError extends Error {
  readonly code = 'invalid_chain';
  /** The hop (0-based) that failed, when one did. */
  readonly hop: number | undefined;
  constructor(message: string, hop?: number) {
    super(message);
    this.name = 'ActorChainError';
    this.hop = hop;
  }
}

/**
 * Reads a chain and checks every hop: its signature by its own `actorPublicKey`, and its link to the
 * hop before (`prevHash`), so a tampered, spliced or reordered chain, or one whose head was dropped,
 * is refused. Throws `ActorChainError`.
 */
export function readActorChain(chain: unknown): ActorHop[] {
  if (!Array.isArray(chain) || chain.length === 0) throw new ActorChainError('actorChain must be a non-empty JSON array of compact JWS tokens');
  if (chain.length > MAX_CHAIN_HOPS) throw new ActorChainError(`actorChain has ${chain.length} hops; at most ${MAX_CHAIN_HOPS} are taken`);
  const bytes = Buffer.byteLength(JSON.stringify(chain), 'utf8');
  if (bytes > MAX_CHAIN_BYTES) throw new ActorChainError(`actorChain is ${bytes} bytes; at most ${MAX_CHAIN_BYTES} are taken`);
  const hops: ActorHop[] = [];
  chain.forEach((token: unknown, index) => {
    const hop = readHop(token, index);
    const expected = index === 0 ? null : sha256Hex(chain[index - 1] as string);
    if (index === 0 && hop.prevHash !== null) {
      throw new ActorChainError('hop 0 has a prevHash: the head of the chain is missing (a chain begins with prevHash null)', 0);
    }
    if (hop.prevHash !== expected) {
      throw new ActorChainError(`hop ${index} (key ${hop.actorPublicKey}) does not follow hop ${index - 1}: its prevHash is not the SHA-256 of hop ${index - 1}'s token`, index);
    }
    hops.push(hop);
  });
  return hops;
}

/** What an agent learns from the chain funduq relayed (`forwardedProps.funduq.actorChain`). */
export interface VerifiedActorChain {
  /** The head's key: the party the chain acts for. */
  head: string;
  /** The key that presented the chain to funduq: the signer of the hop before funduq's. */
  presenter: string;
  /** Where funduq dispatched the run, as its hop says. */
  dispatchedTo: { agent: string; provider: string };
  hops: ActorHop[];
}

/**
 * Verifies a chain funduq relayed: every hop (`readActorChain`), and a last hop signed by funduq's
 * own key (the one a provider pins) that names where it dispatched the run. Throws `ActorChainError`.
 */
export function verifyActorChain(chain: unknown, options: { funduqPublicKey: string }): VerifiedActorChain {
  const funduq = normalizePublicKey(options.funduqPublicKey);
  if (!funduq) throw new TypeError('funduqPublicKey must be an Ed25519 public key (base64url of its 32 bytes, or PEM)');
  const hops = readActorChain(chain);
  const last = hops.length - 1;
  if (hops.length < 2 || hops[last].actorPublicKey !== funduq) {
    throw new ActorChainError(`the last hop (hop ${last}) is not funduq's: it is signed by ${hops[last].actorPublicKey}, not by the pinned key ${funduq}`, last);
  }
  const { dispatchedTo } = hops[last];
  if (!dispatchedTo) throw new ActorChainError(`funduq's hop (hop ${last}) names no dispatchedTo`, last);
  return { head: hops[0].actorPublicKey, presenter: hops[last - 1].actorPublicKey, dispatchedTo, hops };
}

/**
 * The chain with one more hop, signed by `privateKey` (a `KeyObject` of Ed25519): what an agent
 * that calls another agent on to does, and what funduq does to every chain it relays.
 */
export function appendHop(chain: readonly string[], privateKey: KeyObject, extra: Record<string, unknown> = {}): string[] {
  const payload = { ...extra, actorPublicKey: rawPublicKey(privateKey), prevHash: chain.length === 0 ? null : sha256Hex(chain[chain.length - 1]) };
  const signingInput = `${base64url(JSON.stringify({ alg: 'EdDSA', typ: 'JWT' }))}.${base64url(JSON.stringify(payload))}`;
  return [...chain, `${signingInput}.${signText(privateKey, signingInput)}`];
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** RFC 8037: EdDSA (or RFC 9864's fully specified Ed25519) over the ASCII of `header.payload`. */
const ALGORITHMS = new Set(['EdDSA', 'Ed25519']);
const BASE64URL = /^[A-Za-z0-9_-]+$/;
const HEX_SHA256 = /^[0-9a-f]{64}$/;

function readHop(token: unknown, index: number): ActorHop {
  if (typeof token !== 'string') throw new ActorChainError(`hop ${index} is not a string: each hop is a compact JWS`, index);
  const parts = token.split('.');
  if (parts.length !== 3 || !parts.every((part) => BASE64URL.test(part))) throw new ActorChainError(`hop ${index} is not a compact JWS (three base64url parts)`, index);
  const header = json(parts[0]);
  if (!header || !ALGORITHMS.has(header.alg as string) || header.crit !== undefined) {
    throw new ActorChainError(`hop ${index}'s header must name alg "EdDSA" (Ed25519), with no crit`, index);
  }
  const payload = json(parts[1]);
  if (!payload) throw new ActorChainError(`hop ${index}'s payload is not a JSON object`, index);
  const key = typeof payload.actorPublicKey === 'string' ? normalizePublicKey(payload.actorPublicKey) : undefined;
  if (!key || key !== payload.actorPublicKey) throw new ActorChainError(`hop ${index}'s actorPublicKey is not the base64url of a 32-byte Ed25519 key`, index);
  const { prevHash } = payload;
  if (prevHash !== null && !(typeof prevHash === 'string' && HEX_SHA256.test(prevHash))) {
    throw new ActorChainError(`hop ${index}'s prevHash must be null or a SHA-256 in lowercase hex`, index);
  }
  if (!verifyText(key, `${parts[0]}.${parts[1]}`, parts[2])) {
    throw new ActorChainError(`hop ${index}'s signature is not by its actorPublicKey ${key}`, index);
  }
  const hop: ActorHop = { actorPublicKey: key, prevHash, payload };
  const to = payload.dispatchedTo as { agent?: unknown; provider?: unknown } | undefined;
  if (to && typeof to.agent === 'string' && typeof to.provider === 'string') hop.dispatchedTo = { agent: to.agent, provider: to.provider };
  return hop;
}

function json(part: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function base64url(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64url');
}
