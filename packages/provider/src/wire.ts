import type { RunAgentInput } from '@ag-ui/core';
import { z } from 'zod';

/**
 * The provider link's wire: JSON frames `{ v: 1, type, … }`, one zod schema each and its type
 * `z.infer` of it, shared by funduq (which parses what providers send) and providers (which parse
 * what funduq sends). This module is their one definition.
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

/** What an agent can do, in A2A's `AgentSkill` words (https://a2a-protocol.org/latest/specification/#agentskill): its card and the roster say it. */
export const AgentSkillSchema = z
  .object({ id: z.string().min(1), name: z.string().min(1), description: z.string(), tags: z.array(z.string()), examples: z.array(z.string()).optional() })
  .strict();

/** The handshake's proof, carried by the WebSocket upgrade request (a message cannot precede API Gateway's `$connect`). */
export const LinkProofSchema = z
  .object({
    v,
    providerId: z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/),
    /** Fresh per connection attempt; never accepted twice. */
    nonce: z.string().min(16).max(128),
    /** Epoch ms when the proof was made. */
    time: z.number().int(),
    /** funduq's public key as the provider pinned it. */
    gatewayKey: z.string().min(1).max(256),
    /** The provider's Ed25519 signature over `proofText`. */
    signature: z.string().min(1).max(256),
  })
  .strict();

/** An agent a provider serves on its link, as it registers it. */
export const AgentCardSchema = z
  .object({ name: z.string().min(1), description: z.string().min(1), skills: z.array(AgentSkillSchema).optional(), takesInterjections: z.boolean().optional() })
  .strict();

/** What a provider sends (`part` frames, which carry a larger one in pieces, are joined first). */
export const FromProviderSchema = z.discriminatedUnion('type', [
  z.object({ v, type: z.literal('register'), agents: z.array(AgentCardSchema).max(100) }),
  z.object({ v, type: z.literal('accept'), runId: id, offer: z.number().int().positive() }),
  z.object({ v, type: z.literal('decline'), runId: id, offer: z.number().int().positive(), reason: z.string().max(1024).optional() }),
  z.object({ v, type: z.literal('refuse'), runId: id, offer: z.number().int().positive(), reason: z.string().min(1).max(1024) }),
  // AG-UI events of a run, each with its seq (1, 2, … per run), in order within a frame.
  z.object({ v, type: z.literal('events'), runId: id, events: z.array(z.object({ seq: z.number().int().positive(), event: z.unknown() })).min(1) }),
  // The receipt of a cancel: the agent was stopped after the events through `lastSeq`.
  z.object({ v, type: z.literal('cancelled'), runId: id, lastSeq: z.number().int().nonnegative() }),
  // After a reconnect: the runs the provider still holds.
  z.object({ v, type: z.literal('resume'), runs: z.array(id).max(10_000) }),
  z.object({ v, type: z.literal('heartbeat') }),
  // The first frame on a link. API Gateway sends nothing before `$connect` returns, so on AWS the
  // welcome answers it (the transport's doing); on one machine the welcome went with the upgrade.
  z.object({ v, type: z.literal('hello') }),
]);

const ResumedRun = z.object({ runId: id, lastSeq: z.number().int().nonnegative() });

/** What funduq sends. */
export const ToProviderSchema = z.discriminatedUnion('type', [
  // The first frame on a link: funduq's proof of itself (a signature over the provider's nonce and the link).
  z.object({ v, type: z.literal('welcome'), connectionId: id, signature: z.string(), heartbeatSeconds: z.number().positive() }),
  z.object({ v, type: z.literal('registered'), agents: z.array(z.string()), refused: z.array(z.object({ name: z.string(), reason: z.string() })) }),
  // An offer: accept, decline (full now) or refuse (never) it, naming `offer`. The input is the
  // agent's: AG-UI's own schema is the agent's client's to hold it to. The context is the run's,
  // opaque (trace context: `traceparent`, `tracestate`), for the agent to carry on; absent, none.
  z.object({
    v,
    type: z.literal('run'),
    runId: id,
    offer: z.number().int().positive(),
    agent: z.string(),
    input: z.custom<RunAgentInput>((value) => typeof value === 'object' && value !== null),
    context: z.record(z.string()).optional(),
  }),
  // Stop the run (a cancel, a limit, an offer withdrawn) and forget it; answer `cancelled` if it was running.
  z.object({ v, type: z.literal('cancel'), runId: id, reason: z.string() }),
  // The run's end is recorded: forget it.
  z.object({ v, type: z.literal('settled'), runId: id }),
  // The answer to `resume`: for each run still the provider's, the last seq funduq stored; the others are gone.
  z.object({ v, type: z.literal('resumed'), runs: z.array(ResumedRun), gone: z.array(id) }),
  z.object({ v, type: z.literal('heartbeat') }),
  // A frame funduq could not take, and why.
  z.object({ v, type: z.literal('error'), code: z.string(), message: z.string(), runId: id.optional() }),
]);

/** One piece of a frame too large for a message: `count` of them, in any order, make its JSON. */
export const PartSchema = z.object({ v, type: z.literal('part'), id: z.string().min(1).max(64), index: z.number().int().nonnegative(), count: z.number().int().positive().max(64), data: z.string() });

export type AgentSkill = z.infer<typeof AgentSkillSchema>;
export type LinkProof = z.infer<typeof LinkProofSchema>;
export type LinkedAgentCard = z.infer<typeof AgentCardSchema>;
export type FromProviderFrame = z.infer<typeof FromProviderSchema>;
export type ToProviderFrame = z.infer<typeof ToProviderSchema>;
export type Part = z.infer<typeof PartSchema>;

/** What a provider signs to open a link: it names funduq's key, so a proof made for one gateway opens no other. */
export function proofText(proof: Pick<LinkProof, 'providerId' | 'gatewayKey' | 'nonce' | 'time'>): string {
  return `funduq-link/v1\n${proof.providerId}\n${proof.gatewayKey}\n${proof.nonce}\n${proof.time}`;
}

/** What funduq signs in its welcome: the provider's nonce and the link, so the proof cannot be replayed to another. */
export function welcomeText(providerId: string, nonce: string, connectionId: string): string {
  return `funduq-link/v1 welcome\n${providerId}\n${nonce}\n${connectionId}`;
}

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
