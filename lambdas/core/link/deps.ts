import type { Core, LinkDeps } from '../deps.js';
import { isTerminal, type LinkProvider, type Run } from '../model.js';
import type { ToProviderFrame } from '../../../packages/provider/src/wire.js';

/** The core of a gateway that takes links: what every link use case takes. */
export type LinkCore = Core & { link: LinkDeps };

/** A run a provider can still be offered, hold or end. */
export function live(run: Run | undefined): run is Run {
  return run !== undefined && !isTerminal(run.status) && run.status !== 'queued';
}

/** A provider's registration, as read within the last moments. */
export async function providerOf(core: LinkCore, providerId: string): Promise<LinkProvider | undefined> {
  const recent = core.recentProviders.recent(providerId);
  if (recent !== undefined) return recent ?? undefined;
  const provider = (await core.store.providers.get(providerId)) ?? null;
  core.recentProviders.keep(providerId, provider);
  return provider ?? undefined;
}

/** Sends a frame; a link that is gone is found out by its close (its runs then wait for it to come back). */
export async function tell(core: LinkCore, connectionId: string | undefined, frame: ToProviderFrame): Promise<void> {
  if (connectionId !== undefined) await core.link.channels.send(connectionId, frame);
}

/** The next state of a run's link: every change bumps `rev`. */
export function nextLink(run: Run, change: Partial<NonNullable<Run['link']>>): NonNullable<Run['link']> {
  const link = run.link ?? { rev: 0, offers: 0 };
  return { ...link, ...change, rev: link.rev + 1 };
}
