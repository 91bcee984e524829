import { decodePageCursor, encodePageCursor } from './page-cursor.js';

/**
 * The operators' thread listing's cursor, the same on both stores: the last thread of a page by
 * its last activity and its key, where the next page starts (before it).
 */
export function threadListCursor(at: string, key: string): string {
  return encodePageCursor({ at, key });
}

export function threadListPlace(cursor: string): { at: string; key: string } {
  const place = decodePageCursor(cursor) as { at?: unknown; key?: unknown } | undefined;
  if (typeof place !== 'object' || place === null || typeof place.at !== 'string' || typeof place.key !== 'string' || Object.keys(place).length !== 2) {
    throw new RangeError('invalid page cursor');
  }
  return { at: place.at, key: place.key };
}
