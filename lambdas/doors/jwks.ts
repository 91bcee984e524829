import { Hono } from 'hono';

/** Where the gateway publishes the keys its push notifications are signed with (RFC 8615 well-known). */
export const JWKS_PATH = '/.well-known/jwks.json';

/** Public keys as a JWK Set holds them (RFC 7517 §5). */
export type PublishedKeys = () => Promise<readonly object[]>;

/**
 * The JWKS route: the public keys a receiver verifies a push notification's JWT with, for anyone
 * (a receiver brings no credential of the gateway's). A receiver caches it for less time than a
 * new key is published before it signs, so a rotation never finds it without the key.
 */
export function jwksDoor(published: PublishedKeys) {
  const door = new Hono();
  door.get(JWKS_PATH, async (c) => {
    c.header('Cache-Control', 'public, max-age=300');
    c.header('Content-Type', 'application/jwk-set+json');
    return c.body(JSON.stringify({ keys: await published() }));
  });
  return door;
}
