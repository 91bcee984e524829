import { createPrivateKey, createPublicKey, KeyObject, randomBytes, sign, verify } from 'node:crypto';

/**
 * Ed25519 keys as the link names them: a public key is the base64url of its 32 raw bytes (RFC 8032),
 * a private key the base64url of its 32-byte seed; PEM is taken too.
 */

/** PKCS #8 of an Ed25519 seed: this DER prefix (RFC 8410), then the 32 bytes. */
const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

export interface LinkKeyPair {
  /** The base64url of the 32-byte seed: keep it secret. */
  privateKey: string;
  /** The base64url of the 32-byte public key: what an admin registers (or what a provider pins). */
  publicKey: string;
}

/** A new key pair, for a provider to register its public half. */
export function generateKeyPair(): LinkKeyPair {
  const seed = randomBytes(32);
  return { privateKey: seed.toString('base64url'), publicKey: rawPublicKey(privateKeyOf(seed)) };
}

/** A private key from its 32-byte seed, its base64url, or PEM. */
export function privateKeyOf(given: string | Uint8Array | KeyObject): KeyObject {
  if (given instanceof KeyObject) return checked(given);
  if (typeof given === 'string' && given.includes('-----BEGIN')) return checked(createPrivateKey(given));
  const seed = typeof given === 'string' ? Buffer.from(given, 'base64url') : Buffer.from(given);
  if (seed.length !== 32) throw new TypeError('an Ed25519 private key is a 32-byte seed (base64url) or PEM');
  return createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });
}

/** The public key of a private one, as the base64url of its 32 bytes. */
export function rawPublicKey(privateKey: KeyObject): string {
  const jwk = createPublicKey(privateKey).export({ format: 'jwk' }) as { x?: string };
  return jwk.x!;
}

/** A public key as given (base64url of 32 bytes, or PEM) in its base64url form; undefined when it is no Ed25519 public key. */
export function normalizePublicKey(given: string): string | undefined {
  try {
    if (given.includes('-----BEGIN')) {
      const key = createPublicKey(given.trim());
      if (key.asymmetricKeyType !== 'ed25519') return undefined;
      return (key.export({ format: 'jwk' }) as { x?: string }).x;
    }
    if (!/^[A-Za-z0-9_-]{43}=?$/.test(given.trim())) return undefined;
    const raw = Buffer.from(given.trim(), 'base64url');
    return raw.length === 32 ? raw.toString('base64url') : undefined;
  } catch {
    return undefined;
  }
}

export function signText(privateKey: KeyObject, text: string): string {
  return sign(null, Buffer.from(text, 'utf8'), privateKey).toString('base64url');
}

const publicKeys = new Map<string, KeyObject>();

/** Whether `signature` (base64url) is the key's over `text`; a key or signature that does not parse does not verify. */
export function verifyText(publicKey: string, text: string, signature: string): boolean {
  try {
    let key = publicKeys.get(publicKey);
    if (!key) {
      key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: publicKey }, format: 'jwk' });
      if (publicKeys.size >= 1_000) publicKeys.clear();
      publicKeys.set(publicKey, key);
    }
    return verify(null, Buffer.from(text, 'utf8'), key, Buffer.from(signature, 'base64url'));
  } catch {
    return false;
  }
}

function checked(key: KeyObject): KeyObject {
  if (key.asymmetricKeyType !== 'ed25519') throw new TypeError(`the key is ${key.asymmetricKeyType}, not Ed25519`);
  return key;
}
