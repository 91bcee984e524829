import type { Clock } from './ports.js';

/** The injected clock's now, as an ISO 8601 instant (the record's timestamps). */
export function isoNow(deps: { clock: Pick<Clock, 'now'> }): string {
  return new Date(deps.clock.now()).toISOString();
}
