import type { Core } from '../deps.js';
import { ok, refuse, type Result } from '../errors.js';
import type { LinkProvider } from '../model.js';
import { isoNow } from '../time.js';

/** A provider's registration as an admin sends it. */
export interface ProviderRegistration {
  providerId: string;
  /** Ed25519: base64url of the 32 raw bytes, or PEM. */
  publicKey: string;
  agents: string[];
  maxConcurrentRuns: number;
}

/** A provider as the admin routes show it: its registration, whether it is linked now, and the places its runs hold. */
export interface ProviderView extends LinkProvider {
  places: number;
  linked: boolean;
  /** The agents it registered on its link, when linked. */
  serving: string[];
}

/** Creates or replaces a provider's registration (its runs keep their places); `created` says which. */
export async function putProvider(core: Core, given: ProviderRegistration): Promise<Result<{ provider: ProviderView; created: boolean }>> {
  if (!core.link) return refuse('invalid_input', 'this gateway takes no provider links');
  const publicKey = core.link.keys.normalize(given.publicKey);
  if (!publicKey) return refuse('invalid_input', 'ProviderRegistration.publicKey: must be an Ed25519 public key, as the base64url of its 32 bytes or as PEM');
  const existing = await core.store.providers.get(given.providerId);
  const provider: LinkProvider = {
    providerId: given.providerId,
    publicKey,
    agents: [...new Set(given.agents)],
    maxConcurrentRuns: given.maxConcurrentRuns,
    createdAt: existing?.createdAt ?? isoNow(core),
  };
  const created = await core.store.providers.put(provider);
  core.recentProviders.forget(provider.providerId);
  return ok({ provider: await viewOf(core, { ...provider, places: existing?.places ?? 0 }), created });
}

export async function getProvider(core: Core, providerId: string): Promise<ProviderView | undefined> {
  const provider = await core.store.providers.get(providerId);
  return provider && viewOf(core, provider);
}

export async function listProviders(core: Core): Promise<ProviderView[]> {
  return Promise.all((await core.store.providers.list()).map((provider) => viewOf(core, provider)));
}

/** Removes a provider: its link is closed, and the runs it held fail when the grace window ends. */
export async function deleteProvider(core: Core, providerId: string): Promise<boolean> {
  const deleted = await core.store.providers.delete(providerId);
  core.recentProviders.forget(providerId);
  const connection = await core.link?.roster.ofProvider(providerId);
  if (connection) await core.link!.channels.close(connection.connectionId, 'the provider was deleted');
  return deleted;
}

async function viewOf(core: Core, provider: LinkProvider & { places: number }): Promise<ProviderView> {
  const connection = await core.link?.roster.ofProvider(provider.providerId);
  return { ...provider, linked: connection !== undefined, serving: connection?.agents ?? [] };
}
