import { createHash } from 'node:crypto';
import type { ActorProofs, LinkKeys } from '../../core/ports.js';
import { ActorChainError, appendHop, readActorChain, sha256Hex } from '../../../packages/provider/src/actor-chain.js';
import { normalizePublicKey, privateKeyOf, rawPublicKey, signText, verifyText } from '../../../packages/provider/src/ed25519.js';
import { proofText, welcomeText } from '../../../packages/provider/src/wire.js';

/**
 * funduq's link key, derived from a secret string (SHA-256 of it is the Ed25519 seed): every
 * function reading the same secret (a file in the data dir, a Secrets Manager secret) has the same
 * key, with no key material to hand around.
 */
export function linkKeysFromSecret(secret: string): LinkKeys {
  const privateKey = privateKeyOf(createHash('sha256').update(secret, 'utf8').digest());
  return {
    publicKey: rawPublicKey(privateKey),
    verifyProof: (proof, publicKey) => verifyText(publicKey, proofText(proof), proof.signature),
    signWelcome: (providerId, nonce, connectionId) => signText(privateKey, welcomeText(providerId, nonce, connectionId)),
    normalize: normalizePublicKey,
  };
}

/**
 * Actor chains checked and extended with funduq's hop, signed with the same key as the link's
 * (the one providers pin), derived from the same secret.
 */
export function actorProofsFromSecret(secret: string): ActorProofs {
  const privateKey = privateKeyOf(createHash('sha256').update(secret, 'utf8').digest());
  return {
    publicKey: rawPublicKey(privateKey),
    read(chain) {
      try {
        return { ok: true, signers: readActorChain(chain).map((hop) => hop.actorPublicKey) };
      } catch (error) {
        if (error instanceof ActorChainError) return { ok: false, message: error.message };
        throw error;
      }
    },
    extend: (chain, dispatchedTo) => appendHop(chain, privateKey, { dispatchedTo }),
    verify: verifyText,
    sha256Hex,
    normalize: normalizePublicKey,
  };
}
