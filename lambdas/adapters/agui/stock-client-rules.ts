import { verifyEvents } from '@ag-ui/client';
import { EventType, type BaseEvent } from '@ag-ui/core';
import { Subject } from 'rxjs';
import type { StreamRules } from '../../core/ports.js';

const KNOWN_TYPES: ReadonlySet<string> = new Set(Object.values(EventType));

/**
 * The event-order rules of the stock AG-UI client (`@ag-ui/client`'s `verifyEvents`), one run at a
 * time: funduq holds an agent's stream to them so that no caller receives a stream its stock client
 * refuses. Event types the protocol does not know are not the rules' business (the stock client
 * drops them before it verifies), so they pass untouched.
 */
export const stockClientRules: StreamRules = {
  start() {
    const events = new Subject<BaseEvent>();
    let problem: string | undefined;
    events.pipe(verifyEvents(false)).subscribe({
      error: (error: unknown) => {
        problem = error instanceof Error ? error.message : String(error);
      },
    });
    return (event) => {
      if (problem !== undefined || !KNOWN_TYPES.has(event.type)) return problem;
      // The verifier runs synchronously inside next(): a refusal is known when it returns.
      events.next(event as unknown as BaseEvent);
      return problem;
    };
  },
};
