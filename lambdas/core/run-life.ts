import type { Agent, DoorName, Run, RunContext, StoredEvent } from './model.js';

/** A run as a moment names it when the whole record is not at hand: its id, and the context it carries. */
export interface RunRef {
  runId: string;
  context?: RunContext;
}

/** A submission the core refused before recording a run: nothing of it is stored, so this is all there is of it. */
export interface RefusedSubmission {
  code: string;
  message: string;
  agentId: string;
  tenant: string;
  door: DoorName;
  threadId?: string;
  runId?: string;
  context?: RunContext;
}

/**
 * One call to a provider for a run: a stream from an `agui-http` agent, a `lambda` invoke, or an
 * offer over a link (which ends once its frame is sent: the run's events and its end come as
 * `stored` and `settled`, perhaps in another function).
 */
export interface ProviderCall {
  run: Run;
  agent: Agent;
}

/**
 * What an observer adds to one provider call: headers the call sends (an `agui-http` agent gets
 * them as HTTP headers, a link provider in its offer's context), and a word when the call ends.
 */
export interface ProviderCallScope {
  headers?: Record<string, string>;
  /** The call ended: with the failure funduq saw, or none (the agent's own end, or a cancel). */
  ended?(failure?: { code: string; message: string }): void;
}

/**
 * What a dispatch did with its delivery. `handed_off`: a link run went to its providers and holds
 * its thread-queue message until it settles. `superseded`: the run was started by a later delivery of
 * the same message, which took this one's lease over while this one was stalled; the run and the
 * message are that delivery's, and this one leaves both.
 */
export type DispatchResult = 'ran' | 'handed_off' | 'held_at_door' | 'redelivered' | 'skipped' | 'dispatch_lost' | 'missing' | 'queued_as_next' | 'superseded';

/** How a dispatch of a thread-queue message went: its result, or what it threw (the message comes again). */
export type Dispatched = RunRef & ({ result: DispatchResult; error?: undefined } | { result?: undefined; error: unknown });

/**
 * The moments of a run's life, for whoever watches them (metrics, usage meters, tracing): each
 * method is optional and is called by the core as the moment happens, after the record took the
 * write that makes it so. Observers are composed once (`composeRunLife`) and installed in
 * `CoreDeps.life`; the core calls one object and knows nobody who listens. As Temporal's
 * interceptors do for its calls, this keeps cross-cutting concerns out of the use cases.
 *
 * An observer must be quick and must not throw: what it throws is caught and reported, and the run
 * goes on. It must not write the run's record either (the ledger is the record's one owner).
 */
export interface RunLife {
  /** A run was recorded and its message handed to its thread's queue: it waits there. */
  queued?(run: Run): void;
  /** A submission was refused with a stable code (a full queue, a tenant's limits, an answer too late, …). */
  refused?(refusal: RefusedSubmission): void;
  /**
   * A request for a run already recorded (its `runId` again, or an A2A message id repeated) joined
   * that run instead of starting one: `attempt` is what the retry carried (its own context).
   */
  retried?(run: Run, attempt: { context?: RunContext }): void;
  /** A run was marked running by its dispatcher. */
  started?(run: Run): void;
  /** How a thread-queue message's dispatch went. */
  dispatched?(dispatch: Dispatched): void;
  /** A call to the run's provider is about to go out; what it gives back goes with the call. */
  providerCall?(call: ProviderCall): ProviderCallScope | undefined | void;
  /** A batch of the run's events was stored. */
  stored?(run: RunRef, events: readonly StoredEvent[]): void;
  /** The run's end was recorded (its status, and its outcome or its reason): once per run. */
  settled?(run: Run): void;
  /** A cancel of a running run was recorded: its dispatcher or its provider is asked to stop. */
  cancelRequested?(run: Run): void;
  /**
   * Asks of a waiting run were closed for the run that answers them (`answer.runId`), which is
   * recorded and queued next (should that fail, the asks open again).
   */
  answered?(waiting: Run, answer: { runId: string; askIds: string[] }): void;
  /** Asks of a waiting run expired, unanswered. */
  expired?(run: Run, askIds: string[]): void;
}

/** What a composed observer reports an observer's throw to. */
export type RunLifeFault = (error: unknown, moment: keyof RunLife) => void;

/** Observers as one: each moment goes to each observer in order, and what one throws is reported, never passed on. */
export function composeRunLife(observers: readonly RunLife[], fault: RunLifeFault = () => {}): RunLife {
  // A moment no observer watches is left out, so its caller (the relay, for each stored batch) skips it.
  const each = <K extends Exclude<keyof RunLife, 'providerCall'>>(moment: K) => {
    const watching = observers.filter((observer) => observer[moment] !== undefined);
    if (watching.length === 0) return undefined;
    return ((...args: unknown[]) => {
      for (const observer of watching) {
        const call = observer[moment] as ((...given: unknown[]) => void) | undefined;
        if (!call) continue;
        try {
          call.apply(observer, args);
        } catch (error) {
          fault(error, moment);
        }
      }
    }) as NonNullable<RunLife[K]>;
  };
  return {
    queued: each('queued'),
    refused: each('refused'),
    retried: each('retried'),
    started: each('started'),
    dispatched: each('dispatched'),
    stored: each('stored'),
    settled: each('settled'),
    cancelRequested: each('cancelRequested'),
    answered: each('answered'),
    expired: each('expired'),
    providerCall(call) {
      const scopes: ProviderCallScope[] = [];
      for (const observer of observers) {
        try {
          const scope = observer.providerCall?.(call);
          if (scope) scopes.push(scope);
        } catch (error) {
          fault(error, 'providerCall');
        }
      }
      const headers = Object.assign({}, ...scopes.map((scope) => scope.headers ?? {})) as Record<string, string>;
      return {
        ...(Object.keys(headers).length > 0 ? { headers } : {}),
        ended(failure) {
          for (const scope of scopes) {
            try {
              scope.ended?.(failure);
            } catch (error) {
              fault(error, 'providerCall');
            }
          }
        },
      };
    },
  };
}

/** No observer: what the core calls when none is installed. */
export const UNOBSERVED: RunLife = composeRunLife([]);
