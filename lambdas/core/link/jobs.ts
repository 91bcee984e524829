import type { LinkJob } from '../ports.js';
import { agentForDispatch } from '../recent-agents.js';
import { live, type LinkCore } from './deps.js';
import { endLinkRun } from './log.js';
import { failLinkRun, offer, withdraw } from './offers.js';

/**
 * A link timer fired. Each job reads the run's record and does nothing when the run moved on
 * (settled, accepted, offered anew), so a job that fires late, or twice, is harmless.
 */
export async function fireLinkJob(core: LinkCore, job: LinkJob): Promise<void> {
  const run = await core.store.runs.get(job.runId);
  if (!live(run) || !run.link) return;
  const link = run.link;
  switch (job.kind) {
    case 'offer': {
      if (link.accepted || link.offers !== job.offer) return;
      if (link.providerId === undefined) return offer(core, run);
      const unanswered = link.providerId;
      const withdrawn = await withdraw(core, run);
      if (withdrawn) await offer(core, withdrawn, [], [unanswered]);
      return;
    }
    case 'unclaimed': {
      if (link.accepted) return;
      const serving = await core.link.roster.serving(run.agentId);
      const why = serving.length === 0 ? `no provider serving agent "${run.agentId}" is linked` : `every provider serving agent "${run.agentId}" was full or declined it`;
      await failLinkRun(core, run, 'no_provider_took_it', `no provider took the run in ${core.linkSettings.unclaimedMs / 1000} s: ${why}`);
      return;
    }
    case 'deadline': {
      const agent = await agentForDispatch(core, run.agentId);
      await failLinkRun(core, run, 'provider_timeout', `the run passed its limit of ${agent?.timeoutSeconds ?? '?'} s`);
      return;
    }
    case 'idle': {
      if (!link.accepted) return;
      const agent = await agentForDispatch(core, run.agentId);
      const idleMs = (agent?.idleTimeoutSeconds ?? 300) * 1000;
      const last = await core.store.events.lastSeq(run.runId);
      if (last > job.seq) await core.link.timer.schedule({ kind: 'idle', runId: run.runId, seq: last }, idleMs);
      else await failLinkRun(core, run, 'provider_idle', `the agent sent nothing for ${idleMs / 1000} s`);
      return;
    }
    case 'grace':
      if (!link.accepted || link.connectionId !== job.connectionId) return;
      await failLinkRun(
        core,
        run,
        'provider_left_holding_it',
        `provider "${link.providerId}" lost its link while holding the run and did not resume it within ${core.linkSettings.graceMs / 1000} s`,
      );
      return;
    case 'ending':
      if (link.ending) await endLinkRun(core, run, link.ending);
      return;
  }
}
