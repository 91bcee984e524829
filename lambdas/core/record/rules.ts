import type { Ask, LinkProvider, MessageClaim, Run, Spend } from '../model.js';
import type { AskChanges, TenantAdmission, TenantLimits } from './port.js';

/**
 * The record's rules, once: what every store keeps, whatever its storage. A store whose writes are
 * read-check-write steps (SQLite, one transaction each) applies these functions; a store whose form
 * of a rule is one conditional write (DynamoDB) keeps that write, and is held to the same rules by
 * the reference model (`reference.ts`) in a model-based test of both.
 */

/**
 * Fields that name a run and place it (its id, its thread, its tenant, its lineage, its order),
 * set once at its creation: stores keep copies of them in keys, columns and indexes, which a patch
 * of one would leave behind.
 */
export const RUN_IDENTITY: ReadonlySet<string> = new Set<keyof Run>(['runId', 'threadId', 'tenant', 'rootRunId', 'arrival', 'createdAt']);

/** A patch of a run (`RunRecords.transition`) that would change its identity is a defect of its caller: a TypeError. */
export function checkRunPatch(patch: Partial<Run>): void {
  for (const [key, value] of Object.entries(patch)) {
    if (value !== undefined && RUN_IDENTITY.has(key)) throw new TypeError(`a run's ${key} cannot change: it names or places the run`);
  }
}

/** A listing's page size is a positive integer; anything else is its caller's defect, a RangeError. */
export function checkPageLimit(limit: number): void {
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`page limit must be a positive integer, got ${limit}`);
}

/** A tenant's counters as its limits count them: the window (clock minute) open, the runs counted in it, the places held. */
export interface TenantCounts {
  window?: number;
  windowRuns?: number;
  places?: number;
}

/**
 * A tenant's admission of one run (`TenantCounters.admit`): the answer, and the counters to write
 * when it takes anything (none when refused, or when there was nothing to count). A holder that
 * holds one of the tenant's places already (its request came again after a crash) is admitted on
 * it, counting nothing. A place is refused before the rate is looked at. The first run of a window
 * later than the one held opens it, counting from none; a run whose window is earlier than the one
 * held (a writer whose clock runs ahead opened it) counts in the held one.
 */
export function admission(held: TenantCounts | undefined, holdsPlace: boolean, limits: TenantLimits): { admission: TenantAdmission; counts?: TenantCounts } {
  const { runsPerWindow, places } = limits;
  if (runsPerWindow === undefined && places === undefined) return { admission: 'admitted' };
  if (places !== undefined && holdsPlace) return { admission: 'admitted' };
  const placesHeld = held?.places ?? 0;
  if (places !== undefined && placesHeld >= places) return { admission: 'places_full' };
  const counts: TenantCounts = { ...held };
  if (runsPerWindow !== undefined) {
    const opens = counts.window === undefined || counts.window < limits.window;
    const window = opens ? limits.window : counts.window!;
    const counted = opens ? 0 : (counts.windowRuns ?? 0);
    if (counted >= runsPerWindow) return { admission: 'rate_limited' };
    counts.window = window;
    counts.windowRuns = counted + 1;
  }
  if (places !== undefined) counts.places = placesHeld + 1;
  return { admission: 'admitted', counts };
}

/**
 * A tenant's spend after a charge (`TenantCounters.charge`): added to the spend of the charge's
 * period; the first charge of a later period starts the spend again (and forgets who crossed the
 * earlier one's budget). Undefined when the held spend is of a later period: the charge's period is
 * over, and nothing is written.
 */
export function charged(held: Spend | undefined, charge: Pick<Spend, 'period' | 'tokens' | 'cost'>): Spend | undefined {
  if (held !== undefined && held.period > charge.period) return undefined;
  if (held === undefined || held.period !== charge.period) return { period: charge.period, tokens: charge.tokens, cost: charge.cost };
  return { ...held, tokens: held.tokens + charge.tokens, cost: held.cost + charge.cost };
}

/** The spend with the run that took it past its budget (`markBudgetCrossed`), or undefined when it is of another period or was crossed already. */
export function crossed(held: Spend | undefined, period: string, runId: string, at: string): Spend | undefined {
  if (held === undefined || held.period !== period || held.crossedAt !== undefined) return undefined;
  return { ...held, crossedAt: at, crossedByRunId: runId };
}

/**
 * The asks of a run with the named ones closed (`RunRecords.closeAsks`), or undefined unless every
 * one named is the run's and still open: all change or none.
 */
export function closedAsks(asks: Record<string, Ask> | undefined, changes: AskChanges): Record<string, Ask> | undefined {
  return changedAsks(asks, changes, (ask) => ask.state === 'open', (ask, change) => ({
    ...ask,
    state: change.state,
    ...(change.closedByRunId !== undefined ? { closedByRunId: change.closedByRunId } : {}),
  }));
}

/**
 * The asks of a run with the named ones open again (`RunRecords.reopenAsks`), or undefined unless
 * every one named is still closed by the run its change names (the answer that closed it).
 */
export function reopenedAsks(asks: Record<string, Ask> | undefined, changes: AskChanges): Record<string, Ask> | undefined {
  return changedAsks(
    asks,
    changes,
    (ask, change) => ask.state !== 'open' && ask.closedByRunId === change.closedByRunId,
    ({ closedByRunId: _closedBy, ...ask }) => ({ ...ask, state: 'open' }),
  );
}

function changedAsks(
  asks: Record<string, Ask> | undefined,
  changes: AskChanges,
  was: (ask: Ask, change: AskChanges[string]) => boolean,
  next: (ask: Ask, change: AskChanges[string]) => Ask,
): Record<string, Ask> | undefined {
  const given = asks ?? {};
  const entries = Object.entries(changes);
  if (!entries.every(([askId, change]) => Object.hasOwn(given, askId) && was(given[askId], change))) return undefined;
  const changed = { ...given };
  for (const [askId, change] of entries) changed[askId] = next(given[askId], change);
  return changed;
}

/**
 * Whether a link run's `link` may be set (`RunRecords.updateLink`): only while the run is running
 * or cancelling (a settled run's link is its history), and only by a writer that read the link as
 * it is (its `rev`, or no link yet): a compare-and-set, so of two that race exactly one moves it.
 */
export function linkMayMove(run: Pick<Run, 'status' | 'link'>, expectedRev: number | undefined): boolean {
  if (run.status !== 'running' && run.status !== 'cancelling') return false;
  return expectedRev === undefined ? run.link === undefined : run.link?.rev === expectedRev;
}

/**
 * A provider's registration as it is kept (`ProviderRegistry.put`): the admin's, but its first
 * `createdAt` stays. The places its runs hold are the record's, not the admin's, and are kept too.
 */
export function registrationOf(existing: LinkProvider | undefined, given: LinkProvider): LinkProvider {
  return existing === undefined ? given : { ...given, createdAt: existing.createdAt };
}

/** A message claim's key is free at `nowSeconds` when none holds it or the claim holding it expired (TTL removes it only eventually). */
export function claimIsFree(held: MessageClaim | undefined, nowSeconds: number): boolean {
  return held === undefined || held.expiresAt <= nowSeconds;
}
