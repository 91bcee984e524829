import type { Core } from './deps.js';
import { ok, refuse, type Result } from './errors.js';
import type { Agent, Principal, Run, Thread } from './model.js';
import { openAsks } from './outcome.js';
import type { ActorProofs } from './ports.js';

/**
 * Who acts for whom (issue 26). A request may carry a signed actor chain (`forwardedProps.actorChain`
 * on AG-UI, the request's `metadata.actorChain` on A2A); its last hop must be signed by a key
 * registered for the authenticated principal. funduq relays it with a hop of its own, and a thread
 * whose first run carried one is bound to the chain's head: later writers present a chain with the
 * same head (or come from the agent's serving provider), and its answers and cancels are signed by
 * the head or the serving provider. All of it is checked before the request writes anything.
 */

/** What a verified chain gives the run that carries it. */
export interface Actors {
  /** The head's key: hop 0's signer. */
  head: string;
  /** The presenter's key: the last hop's signer, one of the principal's keys. */
  presenter: string;
  /** The chain as relayed: the caller's hops and funduq's. */
  relayed: string[];
}

/** An answer's proof: the head's or serving provider's signature over `resolutionText`. */
export interface Resolution {
  publicKey: string;
  signature: string;
}

/** A cancel's proof: over `cancelText`, fresh within `CANCEL_FRESH_MS`. */
export interface CancelProof {
  publicKey: string;
  /** Epoch milliseconds, as the signer wrote it (its text is signed as it is). */
  timestamp: number | string;
  signature: string;
}

/** A cancel's signature is good this long either side of funduq's clock. */
export const CANCEL_FRESH_MS = 60_000;

/** The bytes an answer's resolution signs: the asking run and its open asks. */
export function resolutionText(proofs: Pick<ActorProofs, 'sha256Hex'>, waiting: Run): string {
  const ids = openAsks(waiting)
    .map((ask) => ask.id)
    .sort();
  return `funduq-resolve:${waiting.runId}:${proofs.sha256Hex(ids.join('\0'))}`;
}

export function cancelText(runId: string, timestamp: number | string): string {
  return `funduq-cancel:${runId}:${timestamp}`;
}

/** What the checks need of a request: who sent it, its bag, where it lands. */
export interface ActingRequest {
  principal: Principal;
  forwardedProps: unknown;
  agent: Agent;
  thread?: Thread;
  /** The waiting run it answers, when it is an answer whose asks are still to close. */
  answers?: Run;
}

/**
 * The request's chain verified and relayed, its thread's binding kept, its answer's resolution
 * checked; `undefined` actors for a request without a chain.
 */
export async function checkActors(core: Core, request: ActingRequest): Promise<Result<Actors | undefined>> {
  const bag = isObject(request.forwardedProps) ? request.forwardedProps : {};
  const chain = bag.actorChain;
  const actors = chain === undefined ? ok(undefined) : await verifyPresented(core, request, chain);
  if (!actors.ok) return actors;
  const head = request.thread?.head;
  if (head === undefined) return actors;
  const serving = await servingKeys(core, request.agent);
  const presenter = actors.value?.presenter;
  if (actors.value?.head !== head && !(presenter !== undefined && serving.includes(presenter))) {
    const what = actors.value ? `this chain's head is ${actors.value.head}` : 'this request carries no actorChain';
    return refuse('thread_membership_required', `thread "${request.thread!.threadId}" is bound to the head ${head}: ${what}; present a chain whose hop 0 is signed by ${head}`);
  }
  if (request.answers) {
    const { proofs } = core;
    if (!proofs) return refuse('invalid_resolution', 'this gateway has no identity key to check a resolution with');
    const resolution = proofOf(bag.resolution, ['publicKey', 'signature']) as Resolution | undefined;
    if (!resolution) return refuse('invalid_resolution', `thread "${request.thread!.threadId}" is bound: an answer carries resolution {publicKey, signature} by its head ${head} or its serving provider`);
    if (resolution.publicKey !== head && !serving.includes(resolution.publicKey)) {
      return refuse('invalid_resolution', `resolution.publicKey ${resolution.publicKey} is neither the thread's head ${head} nor its serving provider's: a middle party may not answer`);
    }
    if (!proofs.verify(resolution.publicKey, resolutionText(proofs, request.answers), resolution.signature)) {
      return refuse('invalid_resolution', `resolution.signature is not ${resolution.publicKey}'s over funduq-resolve:${request.answers.runId}:{sha256 hex of the open ask ids, sorted, joined by NUL}`);
    }
  }
  return actors;
}

/**
 * A cancel of a run on a bound thread: a proof by the head or the serving provider, fresh. Returns
 * who asked (the key), or nothing for a run on an unbound thread.
 */
export async function checkCancel(core: Core, run: Run, given: unknown): Promise<Result<string | undefined>> {
  const thread = await core.store.threads.get(run);
  const head = thread?.head;
  if (head === undefined) return ok(undefined);
  const proof = proofOf(given, ['publicKey', 'signature']) as CancelProof | undefined;
  const timestamp = proof && (given as { timestamp?: unknown }).timestamp;
  if (!proof || (typeof timestamp !== 'number' && typeof timestamp !== 'string')) {
    return refuse('invalid_cancel', `run "${run.runId}" is on a thread bound to ${head}: a cancel carries cancel {publicKey, timestamp, signature} by the head or the serving provider`);
  }
  const agent = await core.store.agents.get(run.agentId);
  const serving = agent ? await servingKeys(core, agent) : [];
  if (proof.publicKey !== head && !serving.includes(proof.publicKey)) {
    return refuse('invalid_cancel', `cancel.publicKey ${proof.publicKey} is neither the thread's head ${head} nor its serving provider's`);
  }
  const at = typeof timestamp === 'number' ? timestamp : /^\d+$/.test(timestamp) ? Number(timestamp) : Date.parse(timestamp);
  if (!Number.isFinite(at) || Math.abs(core.clock.now() - at) > CANCEL_FRESH_MS) {
    return refuse('invalid_cancel', `cancel.timestamp ${timestamp} is not within ${CANCEL_FRESH_MS / 1000} s of funduq's clock: sign a fresh one (epoch milliseconds)`);
  }
  if (!core.proofs?.verify(proof.publicKey, cancelText(run.runId, timestamp), proof.signature)) {
    return refuse('invalid_cancel', `cancel.signature is not ${proof.publicKey}'s over funduq-cancel:${run.runId}:${timestamp}`);
  }
  return ok(proof.publicKey);
}

async function verifyPresented(core: Core, request: ActingRequest, chain: unknown): Promise<Result<Actors>> {
  const { proofs } = core;
  if (!proofs) return refuse('invalid_chain', 'this gateway has no identity key to relay an actor chain with');
  const read = proofs.read(chain);
  if (!read.ok) return refuse('invalid_chain', read.message);
  const { principal } = request;
  const keys = await core.store.principals.get(principal.tenant, principal.id);
  if (!keys || keys.length === 0) {
    return refuse(
      'presenter_required',
      `principal "${principal.id}" of tenant "${principal.tenant}" has no registered key to present a chain with: an admin registers one (PUT /admin/tenants/${principal.tenant}/principals/${principal.id})`,
    );
  }
  const last = read.signers.length - 1;
  const presenter = read.signers[last];
  if (!keys.includes(presenter)) {
    return refuse('invalid_chain', `the last hop (hop ${last}) is signed by ${presenter}, which is not a key registered for principal "${principal.id}"`);
  }
  const relayed = proofs.extend(chain as string[], { agent: request.agent.id, provider: await providerName(core, request.agent) });
  return ok({ head: read.signers[0], presenter, relayed });
}

/**
 * The keys of the agent's serving provider: the registered keys of the link providers that serve
 * it, or the key its definition names (an agent reached by URL or Lambda).
 */
async function servingKeys(core: Core, agent: Agent): Promise<string[]> {
  if (agent.provider.kind !== 'link') return agent.publicKey ? [agent.publicKey] : [];
  return (await core.store.providers.list()).filter((provider) => provider.agents.includes(agent.id)).map((provider) => provider.publicKey);
}

/** funduq's hop names the provider: a link provider's id, else the agent's key, else its provider kind. */
async function providerName(core: Core, agent: Agent): Promise<string> {
  if (agent.provider.kind !== 'link') return agent.publicKey ?? agent.provider.kind;
  const serving = (await core.store.providers.list()).filter((provider) => provider.agents.includes(agent.id));
  return serving.map((provider) => provider.providerId).join(',') || 'link';
}

function proofOf(value: unknown, fields: readonly string[]): Record<string, string> | undefined {
  if (!isObject(value)) return undefined;
  return fields.every((field) => typeof value[field] === 'string' && (value[field] as string).length <= 512) ? (value as Record<string, string>) : undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
