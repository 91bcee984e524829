import type { DoorRelay } from '../core/ports.js';
import { logger, publishMetrics } from './powertools.js';
import { DEPLOY_SETTINGS, readSettings } from './settings.js';

/** Kept back from the Lambda deadline for settling a run: its closing events and its end. */
export const SETTLE_MARGIN_MS = 30_000;

/** Whether the stack has the streaming doors relay runs on idle threads (`relayAtDoor`, on unless set to false). */
export function relaysAtDoor(env: Record<string, string | undefined>): boolean {
  return readSettings({ relayAtDoor: DEPLOY_SETTINGS.relayAtDoor }, 'env', (name) => env[name]).relayAtDoor ?? true;
}

/** What a Lambda invocation tells of its time: the handler's `context`. */
interface Invocation {
  getRemainingTimeInMillis(): number;
}

/**
 * The streaming doors' relays (`DoorRelay`): the runs this environment's invocation admitted on
 * idle threads, relayed here. An invocation's handler returns only once they ended (`settled`),
 * since Lambda freezes an environment whose handler returned, and a caller that stopped reading
 * stops nothing; one environment serves one invocation at a time, so the relays are this one's.
 */
export class DoorRelays implements DoorRelay {
  private readonly running = new Set<Promise<unknown>>();
  private end: number | undefined;

  /** An invocation begins: its runs must have ended by its end less the time to settle. */
  begin(invocation: Invocation): void {
    this.end = Date.now() + invocation.getRemainingTimeInMillis() - SETTLE_MARGIN_MS;
  }

  deadline(): number | undefined {
    return this.end;
  }

  keep(work: Promise<unknown>): void {
    // A dispatch that threw left its run to its lease's lapse (the sweep fails it `dispatch_lost`), as a dispatcher's would.
    const kept = work.then(
      (result) => logger.info('run relayed at its door', { result }),
      (error: unknown) => logger.error('a run relayed at its door failed; its lease lapses and the sweep ends it', { error: error as Error }),
    );
    this.running.add(kept);
    void kept.finally(() => this.running.delete(kept));
  }

  /** Once every run this invocation relays has ended; its metrics (the runs' usage) published. */
  async settled(): Promise<void> {
    if (this.running.size === 0) return;
    while (this.running.size > 0) await Promise.all([...this.running]);
    publishMetrics();
  }
}
