/**
 * What the record can hold, checked before anything is written: a request that cannot be stored
 * is refused whole (400 or 413 naming the field), never half-written.
 *
 * The limits are the AWS record's, kept on every store, so a run accepted on one machine is one a
 * deployed gateway could hold too: a DynamoDB item holds 400 KB and 32 levels of nesting
 * (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html).
 */

/** DynamoDB's item size limit. */
export const MAX_ITEM_BYTES = 400 * 1024;
/**
 * Levels of nesting a caller's JSON may have: the item's own two (the run, its input) and this
 * stay within DynamoDB's 32.
 */
export const MAX_DEPTH = 30;
/** The sizes of a DynamoDB number (Amazon DynamoDB developer guide, "Data types": Number). */
const MIN_NUMBER = 1e-130;
/** DynamoDB's largest is 9.99…9e125 (38 nines): a double rounds that to 1e126, so 1e126 is the first too large. */
const TOO_LARGE = 1e126;
/** A run is accepted only with this much of its item left for its end (status, times, asks, usage). */
export const RUN_END_ROOM_BYTES = 16 * 1024;
/** The largest event stored in one run_events item, with room for its key. */
export const MAX_EVENT_BYTES = MAX_ITEM_BYTES - 2 * 1024;

/**
 * Why a JSON value cannot be stored, naming where (`RunAgentInput.state.a.b`), or nothing when it
 * can: numbers must be finite (JSON's `1e400` reads as Infinity), nesting at most `MAX_DEPTH`
 * levels, and no key `__proto__` (a reader would set an object's prototype with it) or
 * `constructor` (DynamoDB's marshaller takes an object's `constructor` for its type: such an object
 * would fail to store, or be stored as something else). Numbers must be in DynamoDB's range (1e-130
 * to 9.9999999999999999999999999999999999999e125 in size, or 0): a double can be larger. Iterative, so
 * a value nested 10,000 deep is measured, not a stack overflow.
 */
export function storableProblem(value: unknown, path: string): string | undefined {
  const stack: { value: unknown; path: string; depth: number }[] = [{ value, path, depth: 0 }];
  while (stack.length > 0) {
    const { value: at, path: where, depth } = stack.pop()!;
    if (typeof at === 'number') {
      if (!Number.isFinite(at)) return `${where}: a number must be finite (JSON has no Infinity or NaN)`;
      const size = Math.abs(at);
      if (size !== 0 && (size < MIN_NUMBER || size >= TOO_LARGE)) return `${where}: a number must be 0 or of a size from 1e-130 to 9.9e125 (DynamoDB's numbers)`;
      continue;
    }
    if (typeof at !== 'object' || at === null) continue;
    if (depth >= MAX_DEPTH) return `${where}: nested more than ${MAX_DEPTH} levels deep`;
    if (Array.isArray(at)) {
      for (let i = at.length - 1; i >= 0; i--) stack.push({ value: at[i], path: `${where}.${i}`, depth: depth + 1 });
      continue;
    }
    for (const key of Object.keys(at)) {
      if (key === '__proto__' || key === 'constructor') return `${where}: the key "${key}" cannot be stored`;
      stack.push({ value: (at as Record<string, unknown>)[key], path: `${where}.${key}`, depth: depth + 1 });
    }
  }
  return undefined;
}

/** True when a JSON value nests more than `levels` objects and arrays deep. Iterative, as `storableProblem`. */
export function nestedDeeperThan(value: unknown, levels: number): boolean {
  const stack: { value: unknown; depth: number }[] = [{ value, depth: 0 }];
  while (stack.length > 0) {
    const { value: at, depth } = stack.pop()!;
    if (typeof at !== 'object' || at === null) continue;
    if (depth >= levels) return true;
    for (const element of Array.isArray(at) ? at : Object.values(at)) stack.push({ value: element, depth: depth + 1 });
  }
  return false;
}

/**
 * The size of a JSON value as DynamoDB counts it in an item (names and values in UTF-8; a list or
 * map 3 bytes and 1 per element; a number up to 21 bytes; booleans and null 1): an upper bound, so
 * a value said to fit does fit. Iterative, as `storableProblem`.
 */
export function itemBytes(value: unknown): number {
  let bytes = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const at = stack.pop();
    if (typeof at === 'string') bytes += utf8Bytes(at);
    else if (typeof at === 'number') bytes += numberBytes(at);
    else if (typeof at === 'boolean' || at === null || at === undefined) bytes += 1;
    else if (Array.isArray(at)) {
      bytes += 3 + at.length;
      for (const element of at) stack.push(element);
    } else if (typeof at === 'object') {
      const entries = Object.entries(at as Record<string, unknown>).filter(([, v]) => v !== undefined);
      bytes += 3 + entries.length;
      for (const [key, element] of entries) {
        bytes += utf8Bytes(key);
        stack.push(element);
      }
    }
  }
  return bytes;
}

/** DynamoDB keeps a number's significant digits, two to a byte, and one byte more (up to 38 digits: 21 bytes). */
function numberBytes(n: number): number {
  const digits = String(Math.abs(n)).replace(/e.*$/, '').replace('.', '').replace(/^0+/, '').replace(/0+$/, '').length || 1;
  return Math.min(21, Math.ceil(digits / 2) + 1);
}

const NOT_ASCII = /[^\u0000-\u007f]/;

/** The UTF-8 size of a string, without Node's Buffer: the core runs on web-standard globals only. */
export function utf8Bytes(text: string): number {
  // Most text is ASCII, one byte a character: a native scan answers for it (a character loop over a 340 KB message took a millisecond).
  if (!NOT_ASCII.test(text)) return text.length;
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) bytes += 1;
    else if (code < 0x800) bytes += 2;
    else if (code >= 0xd800 && code <= 0xdbff && i + 1 < text.length) {
      bytes += 4;
      i += 1;
    } else bytes += 3;
  }
  return bytes;
}
