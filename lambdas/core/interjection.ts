import type { RunAgentInput } from '@ag-ui/core';

/**
 * The interjection extension: a message that names the thread's running run asks to join it.
 * funduq cannot inject into a completion in progress; it dispatches the message at once beside
 * the running run, for an agent that declares `takesInterjections`, and the agent decides what
 * joining means. Its URI is the one the extension's existing clients already send.
 */
export const INTERJECTION_EXTENSION = 'https://github.com/hukaichun/funduq/ext/interjection/v1';

/** The caller's declaration: A2A request metadata, or AG-UI `forwardedProps`, under this key. */
export const ADDRESSED_RUN_ID_KEY = `${INTERJECTION_EXTENSION}/addressedRunId`;

export function addressedRunIdOf(input: RunAgentInput): string | undefined {
  const props = input.forwardedProps as Record<string, unknown> | undefined;
  const value = props && typeof props === 'object' ? props[ADDRESSED_RUN_ID_KEY] : undefined;
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}
