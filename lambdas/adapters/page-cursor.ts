/**
 * A listing's page cursor as callers hold it: the store's own place in the listing, as JSON in
 * base64url. What a store puts in it, and which shapes it takes back, are each store's.
 */
export function encodePageCursor(place: unknown): string {
  return Buffer.from(JSON.stringify(place)).toString('base64url');
}

/** What a cursor from a caller holds, or undefined when it is not one of ours at all; its shape is for the store to check. */
export function decodePageCursor(cursor: string): unknown {
  try {
    return JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
}
