import type { RunAgentInput } from '@ag-ui/core';
import type { Agent, Run, RunLink } from '../model.js';
import type { LinkConnection } from '../ports.js';
import { agentForDispatch } from '../recent-agents.js';
import { cancelledEnd } from '../outcome.js';
import { agentInput, threadHistory } from '../run-input.js';
import { live, nextLink, providerOf, tell, type LinkCore } from './deps.js';

/**
 * A run of a `link` agent, marked running by its dispatcher, goes to the providers serving its
 * agent: its clocks start (no provider took it; its whole time) and it is offered. Its first offer
 * (or, with no provider to take it, its waiting) is the first write of its `link`.
 */
export async function handOff(core: LinkCore, run: Run, agent: Agent, first: Pick<RunLink, 'beside' | 'hold'>): Promise<void> {
  await core.link.timer.schedule({ kind: 'unclaimed', runId: run.runId }, core.linkSettings.unclaimedMs);
  await core.link.timer.schedule({ kind: 'deadline', runId: run.runId }, agent.timeoutSeconds * 1000);
  await offer(core, run, [], [], first);
}

/**
 * Offers a run nobody holds or is offered to the least busy provider serving its agent that has a
 * place (one conditional write on the provider takes it), skipping `except` (a provider that just
 * declined it: it is full) and trying `last` after the others (one that left it unanswered: its
 * answer may have been lost). With none, the run waits: it is offered again when a place frees, a
 * provider registers the agent, or the offer's clock runs out.
 */
export async function offer(core: LinkCore, run: Run, except: readonly string[] = [], last: readonly string[] = [], first: Pick<RunLink, 'beside' | 'hold'> = {}): Promise<void> {
  const link: RunLink = run.link ?? { rev: 0, offers: 0, ...(first.beside ? { beside: true } : {}), ...(first.hold !== undefined ? { hold: first.hold } : {}) };
  if (!live(run) || link.accepted || link.providerId !== undefined) return;
  if (run.status === 'cancelling') {
    // Cancelled before any provider took it: no agent has it, so it ends now.
    await endUnclaimed(core, run);
    return;
  }
  const { roster, timer } = core.link;
  const serving = (await roster.serving(run.agentId)).filter((connection) => !except.includes(connection.providerId));
  const ordered = [...serving.filter((c) => !last.includes(c.providerId)), ...serving.filter((c) => last.includes(c.providerId))];
  for (const connection of ordered) {
    const provider = await providerOf(core, connection.providerId);
    if (!provider?.agents.includes(run.agentId)) continue;
    if (!(await core.store.providers.takePlace(provider.providerId, provider.maxConcurrentRuns))) continue;
    const offered = await core.ledger.updateLink(run, { ...link, rev: link.rev + 1, offers: link.offers + 1, providerId: provider.providerId, connectionId: connection.connectionId });
    if (!offered) {
      // Moved meanwhile (a cancel, a concurrent offer): whoever moved it carries on.
      await core.store.providers.releasePlace(provider.providerId);
      return;
    }
    await roster.unwait(run.agentId, run.runId);
    await roster.hold(provider.providerId, run.runId);
    await timer.schedule({ kind: 'offer', runId: run.runId, offer: offered.link!.offers }, core.linkSettings.offerMs);
    // Each offer is a call to a provider: its observers' headers join the run's context in the frame.
    const agent = await agentForDispatch(core, run.agentId);
    const call = agent ? core.life.providerCall?.({ run: offered, agent }) : undefined;
    const context = { ...run.context, ...call?.headers };
    const frame = { v: 1, type: 'run', runId: run.runId, offer: offered.link!.offers, agent: run.agentId, input: await inputOf(core, offered) } as const;
    await tell(core, connection.connectionId, Object.keys(context).length > 0 ? { ...frame, context } : frame);
    call?.ended?.();
    return;
  }
  // Its first write, when nobody could take it yet: the run is on record as a link run waiting.
  if (!run.link && !(await core.ledger.updateLink(run, { ...link, rev: 1 }))) return;
  await roster.wait(run.agentId, run.runId);
  await timer.schedule({ kind: 'offer', runId: run.runId, offer: link.offers }, core.linkSettings.offerMs);
}

/** Offers again the runs that wait for a provider of these agents (a place freed, a provider registered them). */
export async function offerWaiting(core: LinkCore, agents: readonly string[]): Promise<void> {
  for (const agentId of agents) {
    for (const runId of await core.link.roster.waiting(agentId)) {
      const run = await core.store.runs.get(runId);
      if (live(run)) await offer(core, run);
      else await core.link.roster.unwait(agentId, runId);
    }
  }
}

/**
 * Ends a link run with a failure funduq saw (a refusal, a limit, a provider that left), after the
 * events it stored; the provider holding it or offered it is told to stop.
 */
export async function failLinkRun(core: LinkCore, run: Run, code: string, message: string): Promise<Run | undefined> {
  const settled = await core.ledger.abandon(run, code, message);
  if (!settled) return undefined;
  await forgetLinkRun(core, run);
  await tell(core, run.link?.connectionId, { v: 1, type: 'cancel', runId: run.runId, reason: code });
  return settled;
}

/**
 * A settled run leaves the roster's lists; the place it held at its provider is free (the ledger
 * gave it back), so runs waiting for any agent of that provider are offered.
 */
export async function forgetLinkRun(core: LinkCore, run: Run): Promise<void> {
  await core.link.roster.unwait(run.agentId, run.runId);
  const providerId = run.link?.providerId;
  if (providerId === undefined) return;
  await core.link.roster.drop(providerId, run.runId);
  const provider = await providerOf(core, providerId);
  if (provider) await offerWaiting(core, provider.agents);
}

/** The current offer of a run, if it is this offer to this provider and not yet answered. */
async function openOffer(core: LinkCore, connection: LinkConnection, runId: string, offerNumber: number): Promise<Run | undefined> {
  const run = await core.store.runs.get(runId);
  const link = run?.link;
  if (!live(run) || !link || link.accepted || link.offers !== offerNumber || link.providerId !== connection.providerId) return undefined;
  return run;
}

/** The provider takes the run: it is its own until it ends, and its idle clock starts. */
export async function accept(core: LinkCore, connection: LinkConnection, runId: string, offerNumber: number): Promise<void> {
  const run = await openOffer(core, connection, runId, offerNumber);
  if (!run) {
    // Taken already by this offer's events, handled first (frames are handled concurrently on AWS): nothing to do.
    const taken = await core.store.runs.get(runId);
    if (live(taken) && taken.link?.accepted && taken.link.providerId === connection.providerId && taken.link.offers === offerNumber) return;
    // A verdict on an offer withdrawn (its clock ran out, the run ended): the agent must not run it.
    await tell(core, connection.connectionId, { v: 1, type: 'cancel', runId, reason: 'offer_withdrawn' });
    return;
  }
  const taken = await core.ledger.updateLink(run, nextLink(run, { accepted: true, connectionId: connection.connectionId }));
  if (!taken) return accept(core, connection, runId, offerNumber);
  // A cancel that came while the offer was being made found no provider to tell: it is told now.
  if (taken.status === 'cancelling') await tell(core, connection.connectionId, { v: 1, type: 'cancel', runId, reason: 'cancel_requested' });
  const agent = await agentForDispatch(core, run.agentId);
  if (agent) await core.link.timer.schedule({ kind: 'idle', runId, seq: 0 }, agent.idleTimeoutSeconds * 1000);
}

/** Full right now: the offer goes to another provider with room, or waits for one. */
export async function decline(core: LinkCore, connection: LinkConnection, runId: string, offerNumber: number): Promise<void> {
  const run = await openOffer(core, connection, runId, offerNumber);
  if (!run) return;
  const withdrawn = await withdraw(core, run);
  if (withdrawn) await offer(core, withdrawn, [connection.providerId]);
}

/** Never: the run fails with the provider's reason. */
export async function refuse(core: LinkCore, connection: LinkConnection, runId: string, offerNumber: number, reason: string): Promise<void> {
  const run = await openOffer(core, connection, runId, offerNumber);
  if (run) await failLinkRun(core, run, 'provider_refused', `provider "${connection.providerId}" refused the run: ${reason}`);
}

/** Takes an unanswered offer back from its provider, which gets its place back and is told to forget it. */
export async function withdraw(core: LinkCore, run: Run): Promise<Run | undefined> {
  const link = run.link;
  if (!link?.providerId || link.accepted) return undefined;
  const withdrawn = await core.ledger.updateLink(run, nextLink(run, { providerId: undefined, connectionId: undefined }));
  if (!withdrawn) return undefined;
  await core.store.providers.releasePlace(link.providerId);
  await core.link.roster.drop(link.providerId, run.runId);
  await tell(core, link.connectionId, { v: 1, type: 'cancel', runId: run.runId, reason: 'offer_withdrawn' });
  return withdrawn;
}

/**
 * A cancel of a link run (it is `cancelling` now). The provider holding it is asked to stop, and
 * its receipt ends the run; a run no provider took yet ends at once.
 */
export async function cancelLinkRun(core: LinkCore, run: Run): Promise<void> {
  // Not offered yet: its first offer finds it cancelling and ends it.
  if (!run.link) return;
  if (run.link.accepted) await tell(core, run.link.connectionId, { v: 1, type: 'cancel', runId: run.runId, reason: 'cancel_requested' });
  else await endUnclaimed(core, run);
}

async function endUnclaimed(core: LinkCore, run: Run): Promise<void> {
  const settled = await core.ledger.settleStored(run, cancelledEnd(undefined, run, 'cancel_requested'), { events: 0, bytes: 0 });
  if (!settled) return;
  await forgetLinkRun(core, run);
  await tell(core, run.link?.connectionId, { v: 1, type: 'cancel', runId: run.runId, reason: 'cancel_requested' });
}

/** The input the agent gets, as any provider kind's would (the thread's history for an A2A run). */
async function inputOf(core: LinkCore, run: Run): Promise<RunAgentInput> {
  const history = run.door === 'agui' ? [] : await threadHistory(core, run);
  return agentInput(run, history, run.link?.beside ?? false);
}
