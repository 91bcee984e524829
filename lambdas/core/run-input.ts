import type { Message, RunAgentInput } from '@ag-ui/core';
import { foldThread } from './fold.js';
import type { Run } from './model.js';
import type { RunStore } from './ports.js';

/** funduq's own key in `forwardedProps`; a caller's value there is never passed on. */
export const FUNDUQ_KEY = 'funduq';

/** The input as stored: the caller's, less any `forwardedProps.funduq` it tried to set. */
export function callerInput(input: RunAgentInput): RunAgentInput {
  const props = input.forwardedProps;
  if (!isPlainObject(props) || !(FUNDUQ_KEY in props)) return input;
  const { [FUNDUQ_KEY]: _dropped, ...rest } = props;
  return { ...input, forwardedProps: rest };
}

/**
 * The `RunAgentInput` the agent receives. AG-UI callers send the whole conversation (stock
 * agents are stateless), so their messages go as sent; a run that came without the history (A2A)
 * gets the thread's folded history first.
 */
export function agentInput(run: Run, history: readonly Message[], interjecting = false): RunAgentInput {
  const props = isPlainObject(run.input.forwardedProps) ? run.input.forwardedProps : {};
  const annotations: Record<string, unknown> = {
    caller: { principal: run.principal, tenant: run.tenant },
    door: run.door,
  };
  // Only a run dispatched beside the run it names joins it; one that came too late runs as the next.
  if (interjecting && run.addressedRunId !== undefined) annotations.addressedRunId = run.addressedRunId;
  if (run.actorChain !== undefined) annotations.actorChain = run.actorChain;
  const input: RunAgentInput = {
    ...run.input,
    threadId: run.threadId,
    runId: run.runId,
    messages: run.door === 'agui' ? run.input.messages : [...history, ...run.input.messages],
    tools: run.input.tools ?? [],
    context: run.input.context ?? [],
    forwardedProps: { ...props, [FUNDUQ_KEY]: annotations },
  };
  if (run.parentRunId !== undefined) input.parentRunId = run.parentRunId;
  return input;
}

/** Inputs compare by content, key order aside: the same runId with the same input re-attaches. */
export function sameInput(a: RunAgentInput, b: RunAgentInput): boolean {
  return canonical(a) === canonical(b);
}

function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    isPlainObject(v) ? Object.fromEntries(Object.entries(v).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))) : v,
  );
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The thread's conversation before a run, folded from the record: what an A2A run's agent is given first. */
export async function threadHistory(deps: { store: RunStore }, run: Run): Promise<Message[]> {
  const earlier = (await deps.store.runs.listOfThread(run)).filter((other) => other.arrival < run.arrival && other.runId !== run.runId);
  return foldThread(deps.store, earlier);
}
