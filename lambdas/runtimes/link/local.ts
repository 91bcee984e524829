import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import { actorProofsFromSecret, linkKeysFromSecret } from '../../adapters/crypto/link-keys.js';
import { auditSealFromSecret } from '../../adapters/crypto/audit-seal.js';
import { InProcessLinkRoster } from '../../adapters/local/link/roster.js';
import { LocalLinkSockets } from '../../adapters/local/link/sockets.js';
import { InProcessLinkTimer } from '../../adapters/local/link/timer.js';
import type { Gateway } from '../../core/gateway.js';
import type { LinkDeps } from '../../core/deps.js';
import type { Clock, IdSource } from '../../core/ports.js';
import { DEFAULT_LINK_SETTINGS } from '../../core/settings.js';
import { linkChannels, linkDoor } from '../../doors/link/door.js';
import { LINK_PATH, LINK_PROOF_HEADER, LINK_REFUSAL_HEADER } from '../../../packages/provider/src/wire.js';
import { dataDirSecret } from '../data-dir.js';

/** The file in the data dir, beside the store's, whose secret funduq's link key is derived from. */
export const LINK_KEY_FILE = 'link-key-secret';

/**
 * The provider link on one machine: a WebSocket route (`/link`) on the gateway's own server, the
 * roster and timers in memory, funduq's key derived from a secret in the data dir (made on the first
 * start, readable by its owner only: a restart keeps the key providers pinned). Without a data dir
 * (tests) the key lives as long as the process.
 */
export async function localLink(options: { dataDir?: string; clock: Clock; ids: IdSource; heartbeatMs?: number; log: (line: string) => void }) {
  const secret = options.dataDir === undefined ? randomBytes(32).toString('hex') : await dataDirSecret(options.dataDir, LINK_KEY_FILE);
  const sockets = new LocalLinkSockets({
    path: LINK_PATH,
    proofHeader: LINK_PROOF_HEADER,
    refusalHeader: LINK_REFUSAL_HEADER,
    heartbeatMs: options.heartbeatMs ?? DEFAULT_LINK_SETTINGS.heartbeatMs,
    newId: () => options.ids.newId(),
    onError: (error) => options.log(`a provider link failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`),
  });
  const timer = new InProcessLinkTimer(options.clock, (error, runId) =>
    options.log(`a link timer of run ${runId} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`),
  );
  const deps: LinkDeps = {
    roster: new InProcessLinkRoster(),
    channels: linkChannels(sockets, () => options.ids.newId()),
    timer,
    keys: linkKeysFromSecret(secret),
    holdUntilSettled: true,
  };
  return {
    deps,
    /** Actor chains' hops signed with the same key. */
    proofs: actorProofsFromSecret(secret),
    /** The audit log's segments too. */
    seal: auditSealFromSecret(secret),
    start(server: Server, gateway: Gateway) {
      timer.start((job) => gateway.link.fire(job));
      sockets.start(server, linkDoor(gateway, sockets));
    },
    stop() {
      timer.stop();
      sockets.stop();
    },
  };
}
