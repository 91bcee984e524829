import { z } from 'zod';
import type { FromProvider, LinkProof, ToProvider } from '../core/link/frames.js';

export { proofText, welcomeText } from '../core/link/frames.js';

/**
 * The provider link's wire: JSON frames `{ v: 1, type, … }`, one zod schema each, shared by funduq
 * (which parses what providers send) and providers (`funduq/provider`, which parse what funduq sends).
 *
 * The shape is API Gateway WebSocket's (https://docs.aws.amazon.com/apigateway/latest/developerguide/limits.html):
 * a message holds at most 128 KB and a frame 32 KB, so a frame whose JSON is larger than `PART_BYTES`
 * travels as `part` frames, and the provider's SDK sends a message larger than `WS_FRAME_BYTES` in
 * WebSocket fragments.
 */

/** Where a provider opens its link on the gateway's own server. */
export const LINK_PATH = '/link';
/** The upgrade request's header that carries the proof (base64url of its JSON). */
export const LINK_PROOF_HEADER = 'funduq-link-proof';
/** Of a refused upgrade: the refusal's code (the body is `{ error: { code, message } }`). */
export const LINK_REFUSAL_HEADER = 'funduq-link-refusal';
/** The most a frame's JSON may be before it is sent in parts: under a message's 128 KB with room for the part's own fields. */
export const PART_BYTES = 96 * 1024;
/** A WebSocket frame's most on API Gateway. */
export const WS_FRAME_BYTES = 32 * 1024;
/** A WebSocket message's most on API Gateway: the link on one machine holds providers to it too. */
export const WS_MESSAGE_BYTES = 128 * 1024;

const id = z.string().min(1).max(512);
const v = z.literal(1);

const SkillSchema = z
  .object({ id: z.string().min(1), name: z.string().min(1), description: z.string(), tags: z.array(z.string()), examples: z.array(z.string()).optional() })
  .strict();

export const LinkProofSchema = z
  .object({ v, providerId: z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/), nonce: z.string().min(16).max(128), time: z.number().int(), gatewayKey: z.string().min(1).max(256), signature: z.string().min(1).max(256) })
  .strict();

export const AgentCardSchema = z
  .object({ name: z.string().min(1), description: z.string().min(1), skills: z.array(SkillSchema).optional(), takesInterjections: z.boolean().optional() })
  .strict();

/** What a provider sends. */
export const FromProviderSchema = z.discriminatedUnion('type', [
  z.object({ v, type: z.literal('register'), agents: z.array(AgentCardSchema).max(100) }),
  z.object({ v, type: z.literal('accept'), runId: id, offer: z.number().int().positive() }),
  z.object({ v, type: z.literal('decline'), runId: id, offer: z.number().int().positive(), reason: z.string().max(1024).optional() }),
  z.object({ v, type: z.literal('refuse'), runId: id, offer: z.number().int().positive(), reason: z.string().min(1).max(1024) }),
  z.object({ v, type: z.literal('events'), runId: id, events: z.array(z.object({ seq: z.number().int().positive(), event: z.unknown() })).min(1) }),
  z.object({ v, type: z.literal('cancelled'), runId: id, lastSeq: z.number().int().nonnegative() }),
  z.object({ v, type: z.literal('resume'), runs: z.array(id).max(10_000) }),
  z.object({ v, type: z.literal('heartbeat') }),
  z.object({ v, type: z.literal('hello') }),
]);

const ResumedRun = z.object({ runId: id, lastSeq: z.number().int().nonnegative() });

/** What funduq sends. */
export const ToProviderSchema = z.discriminatedUnion('type', [
  z.object({ v, type: z.literal('welcome'), connectionId: id, signature: z.string(), heartbeatSeconds: z.number().positive() }),
  z.object({ v, type: z.literal('registered'), agents: z.array(z.string()), refused: z.array(z.object({ name: z.string(), reason: z.string() })) }),
  // The input is the agent's: AG-UI's own schema is the agent's client's to hold it to.
  z.object({ v, type: z.literal('run'), runId: id, offer: z.number().int().positive(), agent: z.string(), input: z.custom<Extract<ToProvider, { type: 'run' }>['input']>((value) => typeof value === 'object' && value !== null) }),
  z.object({ v, type: z.literal('cancel'), runId: id, reason: z.string() }),
  z.object({ v, type: z.literal('settled'), runId: id }),
  z.object({ v, type: z.literal('resumed'), runs: z.array(ResumedRun), gone: z.array(id) }),
  z.object({ v, type: z.literal('heartbeat') }),
  z.object({ v, type: z.literal('error'), code: z.string(), message: z.string(), runId: id.optional() }),
]);

/** One piece of a frame too large for a message: `count` of them, in any order, make its JSON. */
export const PartSchema = z.object({ v, type: z.literal('part'), id: z.string().min(1).max(64), index: z.number().int().nonnegative(), count: z.number().int().positive().max(64), data: z.string() });

export type FromProviderFrame = z.infer<typeof FromProviderSchema>;
export type ToProviderFrame = z.infer<typeof ToProviderSchema>;
export type Part = z.infer<typeof PartSchema>;

// The core's shapes and these schemas are one: either drifting fails the type check here.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const sameFromProvider: Same<FromProviderFrame, FromProvider> = true;
const sameToProvider: Same<ToProviderFrame, ToProvider> = true;
const sameProof: Same<z.infer<typeof LinkProofSchema>, LinkProof> = true;
void [sameFromProvider, sameToProvider, sameProof];

/** A frame as the messages that carry it: itself, or `part` frames when its JSON is larger than `PART_BYTES`. */
export function messagesOf(frame: FromProviderFrame | ToProviderFrame, newId: () => string): string[] {
  const json = JSON.stringify(frame);
  if (json.length <= PART_BYTES / 4 || new TextEncoder().encode(json).length <= PART_BYTES) return [json];
  // Cut by characters, each piece at most PART_BYTES of UTF-8 (4 bytes a character at most).
  const step = PART_BYTES / 4;
  const pieces: string[] = [];
  for (let at = 0; at < json.length; at += step) pieces.push(json.slice(at, at + step));
  const partId = newId();
  return pieces.map((data, index) => JSON.stringify({ v: 1, type: 'part', id: partId, index, count: pieces.length, data } satisfies Part));
}

/** Joins `part` frames back into the frame they carry; parts of a frame not whole after `maxParts` other frames are dropped. */
export class Reassembly {
  private readonly partial = new Map<string, { count: number; pieces: Map<number, string> }>();

  /** The JSON of a whole frame, once its last part is in; undefined while parts are missing. */
  take(part: Part): string | undefined {
    let held = this.partial.get(part.id);
    if (!held) {
      // A sender that never finishes its frames does not grow this without bound.
      if (this.partial.size >= 16) this.partial.delete(this.partial.keys().next().value as string);
      held = { count: part.count, pieces: new Map() };
      this.partial.set(part.id, held);
    }
    held.pieces.set(part.index, part.data);
    if (held.pieces.size < held.count) return undefined;
    this.partial.delete(part.id);
    return Array.from({ length: held.count }, (_, i) => held.pieces.get(i) ?? '').join('');
  }
}

/**
 * Reads one message: a frame, or a part of one (joined by `reassembly`). Returns the frame once
 * whole, undefined while parts are missing, or a problem that names what is wrong.
 */
export function readMessage<T>(text: string, schema: z.ZodType<T, z.ZodTypeDef, unknown>, reassembly: Reassembly): { frame: T } | { problem: string } | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { problem: 'a frame must be JSON' };
  }
  const part = PartSchema.safeParse(value);
  if (part.success) {
    const whole = reassembly.take(part.data);
    return whole === undefined ? undefined : readMessage(whole, schema, reassembly);
  }
  const parsed = schema.safeParse(value);
  if (parsed.success) return { frame: parsed.data };
  const issue = parsed.error.issues[0];
  const where = issue && issue.path.length > 0 ? ` at ${issue.path.join('.')}` : '';
  const type = typeof value === 'object' && value !== null && typeof (value as { type?: unknown }).type === 'string' ? `a "${(value as { type: string }).type}" frame` : 'a frame';
  return { problem: `${type} is not valid${where}: ${issue?.message ?? 'invalid'}` };
}
