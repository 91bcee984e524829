import { createECDH, createHash, createPrivateKey, hkdfSync, randomUUID, sign, type KeyObject } from 'node:crypto';

/** A public key as a JWKS publishes it (RFC 7517), for ES256 (RFC 7518 §3.4). */
export interface PublicJwk {
  kty: 'EC';
  crv: 'P-256';
  x: string;
  y: string;
  kid: string;
  alg: 'ES256';
  use: 'sig';
}

export interface PushKeysOptions {
  /** The secret every key is derived from (on AWS a Secrets Manager secret, locally a file in the data dir). */
  seed: string | Uint8Array;
  clock: { now(): number };
  /** How long one key signs before the next takes over. */
  rotationMs?: number;
  /**
   * How long the next key is published before it signs, and the previous one after: more than
   * a signed push stays valid (`PUSH_JWT_LIFETIME_SECONDS`), and more than a receiver caches the JWKS.
   */
  overlapMs?: number;
  /** Who signs: the gateway's public URL, the JWT's `iss`, when it is known. */
  issuer?: string;
}

/** A signed push is valid this long after its `iat` (its `exp`); a receiver refuses an older one. */
export const PUSH_JWT_LIFETIME_SECONDS = 300;
export const DEFAULT_ROTATION_MS = 30 * 24 * 60 * 60 * 1000;
export const DEFAULT_OVERLAP_MS = 60 * 60 * 1000;

/** The P-256 group order (SEC 2 §2.4.2): a private key is a number from 1 to n - 1. */
const P256_ORDER = BigInt('0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551');

interface SigningKey {
  kid: string;
  privateKey: KeyObject;
  jwk: PublicJwk;
}

/**
 * The keys push notifications are signed with (A2A's guidance: a JWT signed by the server, its
 * public key at a JWKS URL the receiver fetches). Time is cut into periods of `rotationMs`; each
 * period's key is derived from the seed (HKDF-SHA256, RFC 5869), so every function that reads the
 * same seed signs with the same key and publishes the same set, with nothing written anywhere,
 * and the keys rotate on their own. The JWKS holds the period's key, the next one from `overlapMs`
 * before it takes over (a receiver that cached the set already knows it), and the previous one
 * until `overlapMs` after (its last signed push has expired by then).
 */
export class PushKeys {
  private readonly seed: Uint8Array;
  private readonly rotationMs: number;
  private readonly overlapMs: number;
  private readonly keys = new Map<number, SigningKey>();

  constructor(private readonly options: PushKeysOptions) {
    this.seed = typeof options.seed === 'string' ? new TextEncoder().encode(options.seed) : options.seed;
    if (this.seed.length < 32) throw new RangeError('a push signing seed must be at least 32 bytes');
    this.rotationMs = options.rotationMs ?? DEFAULT_ROTATION_MS;
    this.overlapMs = options.overlapMs ?? DEFAULT_OVERLAP_MS;
    if (this.overlapMs * 2 > this.rotationMs) throw new RangeError('the overlap of push signing keys must be at most half their rotation');
  }

  /** The public keys a receiver may meet now (a JWKS's `keys`). */
  published(): PublicJwk[] {
    const now = this.options.clock.now();
    const period = this.periodOf(now);
    const periods = [period];
    if (now >= (period + 1) * this.rotationMs - this.overlapMs) periods.unshift(period + 1);
    if (now < period * this.rotationMs + this.overlapMs) periods.push(period - 1);
    return periods.map((n) => this.keyOf(n).jwk);
  }

  /**
   * A push's JWT (RFC 7519, ES256): when it was signed (`iat`, `exp`), for which task and receiver
   * (`task_id`, `aud`), the SHA-256 of the exact body sent (`request_body_sha256`, hex, as A2A's
   * samples name it), a `jti` for a receiver that refuses replays, and the key's id in its header.
   */
  sign(push: { taskId: string; audience: string; body: string }): string {
    const now = this.options.clock.now();
    const key = this.keyOf(this.periodOf(now));
    const iat = Math.floor(now / 1000);
    const header = { alg: 'ES256', typ: 'JWT', kid: key.kid };
    const claims = {
      ...(this.options.issuer ? { iss: this.options.issuer } : {}),
      aud: push.audience,
      iat,
      exp: iat + PUSH_JWT_LIFETIME_SECONDS,
      jti: randomUUID(),
      task_id: push.taskId,
      request_body_sha256: createHash('sha256').update(push.body, 'utf8').digest('hex'),
    };
    const signingInput = `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(claims))}`;
    // JWS wants the signature as R || S (RFC 7518 §3.4), not DER.
    const signature = sign('sha256', Buffer.from(signingInput), { key: key.privateKey, dsaEncoding: 'ieee-p1363' });
    return `${signingInput}.${base64url(signature)}`;
  }

  private periodOf(now: number): number {
    return Math.floor(now / this.rotationMs);
  }

  private keyOf(period: number): SigningKey {
    let key = this.keys.get(period);
    if (!key) {
      key = deriveKey(this.seed, period);
      this.keys.set(period, key);
    }
    return key;
  }
}

/**
 * A period's P-256 key: 48 bytes of HKDF output reduced to 1 … n - 1 (FIPS 186-5 A.2.1, whose
 * extra 16 bytes make the bias negligible), the public point computed from it.
 */
function deriveKey(seed: Uint8Array, period: number): SigningKey {
  const bytes = Buffer.from(hkdfSync('sha256', seed, 'funduq push signing', `ES256 key ${period}`, 48));
  const scalar = (BigInt(`0x${bytes.toString('hex')}`) % (P256_ORDER - 1n)) + 1n;
  const d = Buffer.from(scalar.toString(16).padStart(64, '0'), 'hex');
  const ecdh = createECDH('prime256v1');
  ecdh.setPrivateKey(d);
  const point = ecdh.getPublicKey();
  const x = base64url(point.subarray(1, 33));
  const y = base64url(point.subarray(33, 65));
  const kid = thumbprint(x, y);
  return {
    kid,
    privateKey: createPrivateKey({ key: { kty: 'EC', crv: 'P-256', x, y, d: base64url(d) }, format: 'jwk' }),
    jwk: { kty: 'EC', crv: 'P-256', x, y, kid, alg: 'ES256', use: 'sig' },
  };
}

/** The key's id: its JWK thumbprint (RFC 7638), which any receiver can compute from the key itself. */
function thumbprint(x: string, y: string): string {
  return base64url(createHash('sha256').update(JSON.stringify({ crv: 'P-256', kty: 'EC', x, y })).digest());
}

function base64url(data: string | Uint8Array): string {
  return Buffer.from(data).toString('base64url');
}
