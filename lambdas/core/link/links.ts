import { ok } from '../errors.js';
import { AGENT_ID, type Agent, type Run } from '../model.js';
import type { LinkConnection } from '../ports.js';
import { live, nextLink, tell, type LinkCore } from './deps.js';
import type { LinkedAgentCard, LinkProof, ToProviderFrame } from '../../../packages/provider/src/wire.js';
import { storedPrefix } from './log.js';
import { failLinkRun, offer, offerWaiting, withdraw } from './offers.js';

/** Why a link was not opened: the upgrade is refused (401) with this code and message. */
export type LinkRefusalCode =
  | 'link_unknown_provider'
  | 'link_wrong_gateway'
  | 'link_stale_proof'
  | 'link_bad_proof'
  | 'link_replayed_proof';

export interface LinkRefusal {
  ok: false;
  code: LinkRefusalCode;
  message: string;
}

const refused = (code: LinkRefusalCode, message: string): LinkRefusal => ({ ok: false, code, message });

/**
 * The handshake. The provider's proof must name a registered provider, this gateway's key, a time
 * within the proof window of funduq's clock, a nonce never seen (claimed in the record, so no
 * other function accepts it either), and carry a signature by the provider's registered key. The
 * link is then the credential; funduq's welcome proves funduq back, over the provider's nonce.
 */
export async function admitLink(core: LinkCore, proof: LinkProof, connectionId: string): Promise<{ ok: true; value: { connection: LinkConnection; welcome: ToProviderFrame } } | LinkRefusal> {
  const { keys } = core.link;
  const provider = await core.store.providers.get(proof.providerId);
  if (!provider) return refused('link_unknown_provider', `no provider "${proof.providerId}" is registered: an admin registers it with PUT /admin/providers/${proof.providerId}`);
  if (proof.gatewayKey !== keys.publicKey) {
    return refused('link_wrong_gateway', "the proof names another gateway's key: pin this gateway's public key (GET /admin/link, printed by npm start)");
  }
  const now = core.clock.now();
  const window = core.linkSettings.proofWindowMs;
  if (Math.abs(now - proof.time) > window) {
    return refused('link_stale_proof', `the proof was made ${Math.round(Math.abs(now - proof.time) / 1000)} s away from this gateway's clock (at most ${window / 1000} s): check the provider's clock`);
  }
  if (!keys.verifyProof(proof, provider.publicKey)) {
    return refused('link_bad_proof', `the proof's signature does not verify with the key registered for provider "${proof.providerId}": sign with its private key`);
  }
  const nowSeconds = Math.floor(now / 1000);
  // The claim outlives the window in which its proof could be accepted at all.
  const claim = { key: `link#${proof.providerId}#${proof.nonce}`, runId: connectionId, threadId: '', expiresAt: nowSeconds + Math.ceil((2 * window) / 1000) };
  const held = await core.store.claims.take(claim, nowSeconds);
  if (held.runId !== connectionId) return refused('link_replayed_proof', 'the proof was used before: every connection needs a fresh nonce');

  const connection: LinkConnection = { connectionId, providerId: proof.providerId, agents: [] };
  const replaced = await core.link.roster.join(connection);
  if (replaced) {
    // One link per provider: the older one (a socket its provider already gave up on) goes, and its runs wait for a resume.
    await departed(core, replaced);
    await core.link.channels.close(replaced.connectionId, 'replaced by a newer link of this provider');
  }
  const welcome: ToProviderFrame = {
    v: 1,
    type: 'welcome',
    connectionId,
    signature: keys.signWelcome(proof.providerId, proof.nonce, connectionId),
    heartbeatSeconds: core.linkSettings.heartbeatMs / 1000,
  };
  return ok({ connection, welcome });
}

/** A link closed: its unanswered offers go elsewhere, and its runs wait the grace window for the provider to resume them. */
/** Returns the provider whose link it was, or undefined when the roster had it no more (closed before). */
export async function linkClosed(core: LinkCore, connectionId: string): Promise<string | undefined> {
  const connection = await core.link.roster.leave(connectionId);
  if (!connection) return undefined;
  await departed(core, connection);
  return connection.providerId;
}

async function departed(core: LinkCore, connection: LinkConnection): Promise<void> {
  for (const runId of await core.link.roster.held(connection.providerId)) {
    const run = await core.store.runs.get(runId);
    if (!live(run) || run.link?.providerId !== connection.providerId) {
      await core.link.roster.drop(connection.providerId, runId);
      continue;
    }
    // Carried on another link already (a resume got there first).
    if (run.link.connectionId !== connection.connectionId) continue;
    if (run.link.accepted) {
      await core.link.timer.schedule({ kind: 'grace', runId, connectionId: connection.connectionId }, core.linkSettings.graceMs);
      continue;
    }
    const withdrawn = await withdraw(core, run);
    if (withdrawn) await offer(core, withdrawn, [connection.providerId]);
  }
}

/**
 * The agents a provider serves on this link. Each must be one its registration names; it becomes
 * (or stays) an agent of the `link` kind, its card (description, skills, takesInterjections) as the
 * last provider to register it said. Runs that waited for a provider of these agents are offered.
 */
export async function registerAgents(core: LinkCore, connection: LinkConnection, cards: LinkedAgentCard[]): Promise<void> {
  const provider = await core.store.providers.get(connection.providerId);
  const served: string[] = [];
  const refusals: { name: string; reason: string }[] = [];
  for (const card of cards) {
    const why = await registration(core, provider?.agents ?? [], connection.providerId, card);
    if (why) refusals.push({ name: card.name, reason: why });
    else served.push(card.name);
  }
  await core.link.roster.serve(connection.connectionId, served);
  await tell(core, connection.connectionId, { v: 1, type: 'registered', agents: served, refused: refusals });
  await offerWaiting(core, served);
}

async function registration(core: LinkCore, allowed: readonly string[], providerId: string, card: LinkedAgentCard): Promise<string | undefined> {
  if (!AGENT_ID.test(card.name)) return 'an agent name must be 1 to 128 letters, digits, "_" or "-"';
  if (!allowed.includes(card.name)) return `provider "${providerId}" may not serve "${card.name}": its registration (PUT /admin/providers/${providerId}) names the agents it may serve`;
  const existing = await core.store.agents.get(card.name);
  if (existing && existing.provider.kind !== 'link') {
    return `"${card.name}" is registered as an agent of the ${existing.provider.kind} kind; delete it (DELETE /admin/agents/${card.name}) for a link to serve it`;
  }
  const agent: Agent = {
    id: card.name,
    provider: { kind: 'link' },
    timeoutSeconds: existing?.timeoutSeconds ?? 900,
    idleTimeoutSeconds: existing?.idleTimeoutSeconds ?? 300,
    ...(existing?.status ? { status: existing.status } : {}),
    ...(existing?.prices ? { prices: existing.prices } : {}),
    description: card.description,
    takesInterjections: card.takesInterjections ?? false,
    ...(card.skills ? { skills: card.skills } : {}),
  };
  if (!existing || JSON.stringify(cardOf(existing)) !== JSON.stringify(cardOf(agent))) {
    await core.store.agents.put(agent);
    core.recentAgents.forget(agent.id);
  }
  return undefined;
}

function cardOf(agent: Agent) {
  return { description: agent.description, skills: agent.skills ?? [], takesInterjections: agent.takesInterjections };
}

/**
 * After a reconnect the provider says which runs it still holds. Each still its own is carried on
 * this link, and the provider learns the last seq funduq stored of it (it sends again from the
 * next); the others are gone. A run it held and does not name was lost on its side: it fails now.
 */
export async function resumeRuns(core: LinkCore, connection: LinkConnection, runIds: string[]): Promise<void> {
  const runs: { runId: string; lastSeq: number }[] = [];
  const gone: string[] = [];
  const cancelling: string[] = [];
  for (const runId of new Set(runIds)) {
    const carried = await carry(core, connection, runId);
    if (!carried) {
      gone.push(runId);
      continue;
    }
    await core.link.roster.hold(connection.providerId, runId);
    runs.push({ runId, lastSeq: (await storedPrefix(core.store, runId)).events.length });
    if (carried.status === 'cancelling') cancelling.push(runId);
  }
  await tell(core, connection.connectionId, { v: 1, type: 'resumed', runs, gone });
  for (const runId of cancelling) await tell(core, connection.connectionId, { v: 1, type: 'cancel', runId, reason: 'cancel_requested' });
  const named = new Set(runIds);
  for (const runId of await core.link.roster.held(connection.providerId)) {
    if (named.has(runId)) continue;
    const run = await core.store.runs.get(runId);
    if (live(run) && run.link?.accepted && run.link.providerId === connection.providerId && run.link.connectionId !== connection.connectionId) {
      await failLinkRun(core, run, 'provider_left_holding_it', `provider "${connection.providerId}" came back without this run`);
    }
  }
}

async function carry(core: LinkCore, connection: LinkConnection, runId: string): Promise<Run | undefined> {
  const run = await core.store.runs.get(runId);
  if (!live(run) || !run.link?.accepted || run.link.providerId !== connection.providerId) return undefined;
  if (run.link.connectionId === connection.connectionId) return run;
  return (await core.ledger.updateLink(run, nextLink(run, { connectionId: connection.connectionId }))) ?? carry(core, connection, runId);
}
