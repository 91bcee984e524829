import type { CoreDeps } from './deps.js';
import { ok, refuse, type Result } from './errors.js';
import type { Run } from './model.js';

const MINUTE_MS = 60_000;

/** What admitting a run took from its tenant: a place to give back if the run is not accepted after all. */
export interface Admission {
  tenant: string;
  place: boolean;
}

/**
 * A tenant's limits, before anything of the run is written: runs per clock minute (a fixed window,
 * so a burst straddling a minute's end can reach twice the rate) and unsettled runs. Refused, the
 * store holds nothing new; a rate refusal says when the next minute starts. A run admitted and then
 * refused (a full thread queue, a lost race to answer) still counts toward its minute: the rate
 * bounds what a tenant asks of the gateway, not what it got.
 */
export async function admitRun(deps: CoreDeps, tenant: string): Promise<Result<Admission>> {
  const { tenantRunsPerMinute: runsPerWindow, tenantConcurrentRuns: places } = deps.settings;
  if (runsPerWindow === undefined && places === undefined) return ok({ tenant, place: false });
  const now = deps.clock.now();
  const window = Math.floor(now / MINUTE_MS);
  const admission = await deps.store.admitTenantRun(tenant, {
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
  return ok({ tenant, place: places !== undefined });
}

/** A run admitted but then not accepted (refused, or a repeat of a run that exists) gives its place back. */
export async function withdraw(deps: CoreDeps, admission: Admission): Promise<void> {
  if (admission.place) await deps.store.releaseTenantPlace(admission.tenant);
}

/** A run that settled gives back the places it held: its thread's, and its tenant's when it took one. */
export async function releasePlaces(deps: CoreDeps, run: Run): Promise<void> {
  await deps.store.releasePlace(run);
  if (run.tenantPlace) await deps.store.releaseTenantPlace(run.tenant);
}
