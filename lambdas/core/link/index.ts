import type { Core } from '../deps.js';
import type { LinkJob } from '../ports.js';
import type { LinkCore } from './deps.js';
import type { FromProviderFrame, LinkProof } from '../../../packages/provider/src/wire.js';
import { fireLinkJob } from './jobs.js';
import { admitLink, linkClosed, registerAgents, resumeRuns } from './links.js';
import { cancelReceipted, recordLinkEvents } from './log.js';
import { accept, decline, refuse } from './offers.js';
import { deleteProvider, getProvider, listProviders, putProvider, type ProviderRegistration } from './registry.js';

/**
 * The provider link's use cases: what the link's transport calls (a link opened, a frame, a link
 * closed), what its timer calls, and the admin's registry of providers.
 */
export function createLink(core: Core) {
  const linked = (): LinkCore => {
    if (!core.link) throw new Error('this gateway takes no provider links');
    return core as LinkCore;
  };
  return {
    /** funduq's public key, which providers pin; undefined when this gateway takes no links. */
    publicKey: core.link?.keys.publicKey,
    admit: (proof: LinkProof, connectionId: string) => admitLink(linked(), proof, connectionId),
    /** A frame a provider sent on an open link (the door parsed it). */
    async frame(connectionId: string, frame: FromProviderFrame): Promise<void> {
      const link = linked();
      const connection = await link.link.roster.get(connectionId);
      if (!connection) return;
      switch (frame.type) {
        case 'register':
          return registerAgents(link, connection, frame.agents);
        case 'accept':
          return accept(link, connection, frame.runId, frame.offer);
        case 'decline':
          return decline(link, connection, frame.runId, frame.offer);
        case 'refuse':
          return refuse(link, connection, frame.runId, frame.offer, frame.reason);
        case 'events':
          return recordLinkEvents(link, connection, frame.runId, frame.events);
        case 'cancelled':
          return cancelReceipted(link, connection, frame.runId, frame.lastSeq);
        case 'resume':
          return resumeRuns(link, connection, frame.runs);
        case 'heartbeat':
          await link.link.channels.send(connectionId, { v: 1, type: 'heartbeat' });
          return;
        case 'hello':
          return;
      }
    },
    closed: (connectionId: string) => linkClosed(linked(), connectionId),
    fire: (job: LinkJob) => fireLinkJob(linked(), job),
    providers: {
      put: (registration: ProviderRegistration) => putProvider(core, registration),
      get: (providerId: string) => getProvider(core, providerId),
      list: () => listProviders(core),
      delete: (providerId: string) => deleteProvider(core, providerId),
    },
  };
}
