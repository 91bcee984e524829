import { lostAudit } from '../audit-routes.js';
import type { Gateway } from '../../core/gateway.js';
import type { LinkChannels } from '../../core/ports.js';
import { FromProviderSchema, LinkProofSchema, messagesOf, PartSchema, readMessage, Reassembly, type Part } from '../../../packages/provider/src/wire.js';

/** A transport of a link's text messages: the gateway's own WebSockets locally, API Gateway's connections on AWS. */
export interface LinkTransport {
  send(connectionId: string, text: string): Promise<boolean>;
  close(connectionId: string, reason: string): Promise<void>;
}

/** The core's frames as a transport's messages: a frame too large for one message goes in `part` frames. */
export function linkChannels(transport: LinkTransport, newId: () => string): LinkChannels {
  return {
    async send(connectionId, frame) {
      for (const message of messagesOf(frame, newId)) if (!(await transport.send(connectionId, message))) return false;
      return true;
    },
    close: (connectionId, reason) => transport.close(connectionId, reason),
  };
}

/**
 * Where the `part` frames of a larger frame wait for the rest: in memory for the links of one
 * process; in the record on AWS, where each message is an invocation of its own.
 */
export interface LinkParts {
  /** The JSON of the whole frame once this part completes it; undefined while parts are missing. */
  take(connectionId: string, part: Part): Promise<string | undefined>;
  forget(connectionId: string): Promise<void>;
}

/** The parts of each link's frames in this process's memory. */
export function partsInMemory(): LinkParts {
  const parts = new Map<string, Reassembly>();
  return {
    async take(connectionId, part) {
      let reassembly = parts.get(connectionId);
      if (!reassembly) parts.set(connectionId, (reassembly = new Reassembly()));
      return reassembly.take(part);
    },
    async forget(connectionId) {
      parts.delete(connectionId);
    },
  };
}

/**
 * The provider link's door: the handshake's proof read from the upgrade request, frames read with
 * the wire's schemas (a frame that is not one is answered with an `error` frame and goes no
 * further), and the link's end. Wire only: what each means is the core's.
 */
export function linkDoor(gateway: Gateway, transport: LinkTransport, parts: LinkParts = partsInMemory()) {
  const problem = (connectionId: string, message: string) =>
    transport.send(connectionId, JSON.stringify({ v: 1, type: 'error', code: 'link_frame_malformed', message }));
  return {
    async open(header: string | undefined, connectionId: string) {
      const proof = readProof(header);
      if (typeof proof === 'string') return { ok: false as const, status: 401, code: 'link_proof_malformed', message: proof };
      const admitted = await gateway.link.admit(proof, connectionId);
      // A provider that is registered is who the proof names, proven or not: who tried is recorded.
      if (admitted.ok || admitted.code !== 'link_unknown_provider') await linkAudit(gateway, proof.providerId, 'link.opened', connectionId, admitted.ok ? 'ok' : admitted.code);
      if (!admitted.ok) return { ok: false as const, status: 401, code: admitted.code, message: admitted.message };
      return { ok: true as const, welcome: JSON.stringify(admitted.value.welcome) };
    },
    async message(connectionId: string, text: string) {
      const whole = await joined(parts, connectionId, text);
      if (whole === undefined) return;
      const read = readMessage(whole, FromProviderSchema, new Reassembly());
      if (!read) return;
      if ('problem' in read) await problem(connectionId, read.problem);
      else await gateway.link.frame(connectionId, read.frame);
    },
    async closed(connectionId: string) {
      await parts.forget(connectionId);
      const providerId = await gateway.link.closed(connectionId);
      if (providerId !== undefined) await linkAudit(gateway, providerId, 'link.closed', connectionId, 'ok');
    },
  };
}

/** A link's audit record: the provider is the actor, the connection the target. A record not written is logged whole, as the doors' are. */
async function linkAudit(gateway: Gateway, providerId: string, action: 'link.opened' | 'link.closed', connectionId: string, outcome: string): Promise<void> {
  const entry = { actor: { kind: 'provider' as const, principal: providerId }, action, target: `link:${connectionId}`, outcome, detail: { providerId } };
  await gateway.audit.write(entry).catch((error: unknown) => console.error(lostAudit(entry, error).message));
}

/** A message as the frame it carries: itself, or, for a `part`, the whole frame once its parts are in. */
async function joined(parts: LinkParts, connectionId: string, text: string): Promise<string | undefined> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return text;
  }
  const part = PartSchema.safeParse(value);
  return part.success ? parts.take(connectionId, part.data) : text;
}

/** The proof: the base64url of its JSON, in the upgrade's `funduq-link-proof` header; a string says what is wrong. */
function readProof(header: string | undefined) {
  if (!header) return 'the upgrade request carries no funduq-link-proof header: connect with the provider SDK (@funduq/provider)';
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(header, 'base64url').toString('utf8'));
  } catch {
    return 'the funduq-link-proof header is not the base64url of a JSON proof';
  }
  const parsed = LinkProofSchema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  return `the proof is not valid${issue && issue.path.length > 0 ? ` at ${issue.path.join('.')}` : ''}: ${issue?.message ?? 'invalid'}`;
}
