import type { CoreDeps } from './deps.js';
import { ok, refuse, type Result } from './errors.js';

const MINUTE_MS = 60_000;

/** What admitting a run took from its tenant: a place to give back if the run is not accepted after all. */
export interface Admission {
  tenant: string;
  /** The run the place is held by. */
  runId: string;
  place: boolean;
}

/**
 * A tenant's limits, before anything of the run is written: runs per clock minute (a fixed window,
 * so a burst straddling a minute's end can reach twice the rate) and unsettled runs. Refused, the
 * store holds nothing new; a rate refusal says when the next minute starts. A run admitted and then
 * refused (a full thread queue, a lost race to answer) still counts toward its minute: the rate
 * bounds what a tenant asks of the gateway, not what it got.
 */
export async function admitRun(deps: CoreDeps, tenant: string, runId: string): Promise<Result<Admission>> {
  const { tenantRunsPerMinute: runsPerWindow, tenantConcurrentRuns: places } = deps.settings;
  if (runsPerWindow === undefined && places === undefined) return ok({ tenant, runId, place: false });
  const now = deps.clock.now();
  const window = Math.floor(now / MINUTE_MS);
  const admission = await deps.store.tenants.admit(tenant, runId, {
    window,
    ...(runsPerWindow !== undefined ? { runsPerWindow } : {}),
    ...(places !== undefined ? { places } : {}),
  });
  if (admission === 'rate_limited') {
    const retryAfter = Math.max(1, Math.ceil(((window + 1) * MINUTE_MS - now) / 1000));
    return refuse('tenant_rate_limited', `tenant "${tenant}" has started ${runsPerWindow} runs this minute`, retryAfter);
  }
  if (admission === 'places_full') {
    return refuse('tenant_concurrency_limited', `tenant "${tenant}" already has ${places} runs queued or running`);
  }
  return ok({ tenant, runId, place: places !== undefined });
}

/**
 * A run admitted but then not accepted gives its place back, unless a run of that id was recorded
 * after all (the same request raced in, or this one failed after recording it): the place is that run's.
 */
export async function withdraw(deps: CoreDeps, admission: Admission): Promise<void> {
  if (!admission.place || (await deps.store.runs.get(admission.runId))) return;
  await deps.store.tenants.releasePlace(admission.tenant, admission.runId);
}
