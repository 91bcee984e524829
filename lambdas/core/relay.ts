import type { RunAgentInput } from '@ag-ui/core';
import { RunFailure } from './errors.js';
import type { Agent } from './model.js';
import type { Clock, Provider } from './ports.js';

export interface LimitedRunContext {
  agent: Agent;
  /** Aborted when the run is cancelled: the provider stops and returns, which is no failure. */
  signal: AbortSignal;
  clock: Clock;
  /** When the run must have ended whatever its agent's limit (epoch ms): the runtime's own end, e.g. a Lambda's. */
  deadline?: number;
  /** What the run's observers add to the call (`ProviderContext.headers`). */
  headers?: Readonly<Record<string, string>>;
}

/**
 * A provider's events under the run's two clocks, the same for every provider kind: the whole run
 * is bounded by the agent's `timeoutSeconds` (or the runtime's deadline, if sooner) and every wait
 * for the agent's next event by `idleTimeoutSeconds`. The idle clock runs only while the relay
 * waits for the agent, not while its caller is busy with an event already relayed. Past either,
 * the provider's signal is aborted and the run fails `provider_timeout` or `provider_idle`.
 */
export async function* limitedRun(provider: Provider, input: RunAgentInput, context: LimitedRunContext): AsyncGenerator<unknown> {
  const { agent, clock } = context;
  const stop = new AbortController();
  const onCancel = () => stop.abort(context.signal.reason);
  context.signal.addEventListener('abort', onCancel, { once: true });
  if (context.signal.aborted) onCancel();

  const startedAt = clock.now();
  const runMs = Math.min(positiveMs(agent.timeoutSeconds), context.deadline === undefined ? Infinity : Math.max(1_000, context.deadline - startedAt));
  const idleMs = positiveMs(agent.idleTimeoutSeconds);
  let why: RunFailure | undefined;
  let wake: (() => void) | undefined;
  const fail = (failure: RunFailure) => {
    why ??= failure;
    stop.abort(failure);
    wake?.();
  };
  const cancelRunTimer = Number.isFinite(runMs)
    ? clock.after(runMs, () => fail(new RunFailure('provider_timeout', `the run passed its limit of ${seconds(runMs)} s`)))
    : undefined;

  // One idle timer for the whole run, not one per event: the relay notes when it began waiting and
  // the timer, when it fires, fails the run or sleeps again for what is left of the limit.
  let waitingSince: number | undefined;
  let cancelIdle: (() => void) | undefined;
  const armIdle = (ms: number) => {
    cancelIdle = clock.after(ms, () => {
      const waited = waitingSince === undefined ? 0 : clock.now() - waitingSince;
      if (waited >= idleMs) fail(new RunFailure('provider_idle', `the agent sent nothing for ${agent.idleTimeoutSeconds} s`));
      else armIdle(idleMs - waited);
    });
  };
  if (Number.isFinite(idleMs)) armIdle(idleMs);
  // Bytes that are no event (an SSE comment, a keep-alive) are no silence either.
  const heartbeat = () => {
    if (waitingSince !== undefined) waitingSince = clock.now();
  };
  const iterator = provider.run(input, { agent, signal: stop.signal, deadline: startedAt + runMs, heartbeat, ...(context.headers ? { headers: context.headers } : {}) })[Symbol.asyncIterator]();
  let done = false;
  try {
    for (;;) {
      if (why) throw why;
      waitingSince = clock.now();
      let next: IteratorResult<unknown> | undefined;
      try {
        // Whichever comes first, the agent's next event or a limit passed (`fail` wakes the wait);
        // once the relay has stopped waiting, whatever the provider still throws is nobody's news.
        next = await new Promise<IteratorResult<unknown> | undefined>((resolve, reject) => {
          wake = () => resolve(undefined);
          iterator.next().then(resolve, (error) => (why ? resolve(undefined) : reject(error)));
        });
      } finally {
        waitingSince = undefined;
        wake = undefined;
      }
      if (why) throw why;
      if (!next || next.done) {
        done = true;
        return;
      }
      yield next.value;
    }
  } finally {
    cancelRunTimer?.();
    cancelIdle?.();
    context.signal.removeEventListener('abort', onCancel);
    // A provider still waiting on its agent is told to stop (its signal) and left to wind down.
    if (!done) {
      stop.abort();
      void Promise.resolve(iterator.return?.()).catch(() => undefined);
    }
  }
}

function positiveMs(secondsLimit: number): number {
  return Number.isFinite(secondsLimit) && secondsLimit > 0 ? secondsLimit * 1000 : Infinity;
}

function seconds(ms: number): number {
  return Math.round(ms / 100) / 10;
}
