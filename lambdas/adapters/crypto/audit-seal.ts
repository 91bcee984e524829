import * as nodeCrypto from 'node:crypto';
import { createHash, createPublicKey, type KeyObject } from 'node:crypto';
import { CompactSign, compactVerify } from 'jose';
import { canonicalHashOf } from '../../core/audit/lines.js';
import type { AuditSeal } from '../../core/audit/seal.js';
import type { VerifyDeps } from '../../core/audit/verify.js';
import { privateKeyOf, rawPublicKey } from '../../../packages/provider/src/ed25519.js';

/**
 * The audit log's seal with funduq's identity key: the Ed25519 key its link and its actor-chain hops
 * are signed with (derived from the same secret, as `link-keys.ts` derives it), so an operator
 * verifies the log against the key providers already pin. Segments are compact JWS (RFC 7515) with
 * EdDSA (RFC 8037), signed by `jose`.
 */
export function auditSealFromSecret(secret: string): AuditSeal {
  const privateKey = privateKeyOf(createHash('sha256').update(secret, 'utf8').digest());
  const publicKey = rawPublicKey(privateKey);
  return {
    publicKey,
    sign: (payload) => new CompactSign(new TextEncoder().encode(payload)).setProtectedHeader({ alg: 'EdDSA', kid: publicKey }).sign(privateKey),
    sha256Hex,
  };
}

/** SHA-256 (hex) of a text's UTF-8: Node's one-shot `crypto.hash` where it has one (20.12, 21.7), a third faster for short texts. */
export const sha256Hex: (text: string) => string =
  typeof (nodeCrypto as { hash?: unknown }).hash === 'function'
    ? (text) => (nodeCrypto as unknown as { hash(algorithm: string, data: string, encoding: 'hex'): string }).hash('sha256', text, 'hex')
    : (text) => createHash('sha256').update(text, 'utf8').digest('hex');

/** The Ed25519 public key a verifier is given: the base64url of its 32 bytes, or a JWK (`{"kty":"OKP","crv":"Ed25519","x":…}`); undefined when it is neither. */
export function auditPublicKey(given: string): KeyObject | undefined {
  const text = given.trim();
  try {
    if (text.startsWith('{')) {
      const jwk = JSON.parse(text) as { kty?: unknown; crv?: unknown; x?: unknown };
      if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') return undefined;
      return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: jwk.x }, format: 'jwk' });
    }
    if (!/^[A-Za-z0-9_-]{43}$/.test(text)) return undefined;
    return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: text }, format: 'jwk' });
  } catch {
    return undefined;
  }
}

/** A segment's payload when `jws` is signed by `key` with EdDSA, else undefined. */
export function segmentVerifier(key: KeyObject): (jws: string) => Promise<string | undefined> {
  const decoder = new TextDecoder();
  return async (jws) => {
    try {
      const { payload } = await compactVerify(jws, key, { algorithms: ['EdDSA'] });
      return decoder.decode(payload);
    } catch {
      return undefined;
    }
  };
}

/** What the verifier needs, for the key given. */
export function verifierDeps(key: KeyObject): VerifyDeps {
  return { sha256Hex, canonicalHash: (text) => canonicalHashOf(text, sha256Hex), verifySignature: segmentVerifier(key) };
}

/** A check of a sealed segment's signature by funduq's audit key (its public half as the gateway publishes it), for the console; none when the log is not sealed. */
export function segmentCheck(publicKey: string | undefined): { verifySegment?: (jws: string) => Promise<string | undefined> } {
  const key = publicKey === undefined ? undefined : auditPublicKey(publicKey);
  return key ? { verifySegment: segmentVerifier(key) } : {};
}
