import type { RunAgentInput } from '@ag-ui/core';
import { describe, expect, it } from 'vitest';
import { RunFailure } from '../../lambdas/core/errors.js';
import type { Agent } from '../../lambdas/core/model.js';
import type { ProviderContext } from '../../lambdas/core/ports.js';
import { limitedRun } from '../../lambdas/core/relay.js';
import { FakeClock } from '../support/core-harness.js';

const IDLE_S = 10;
const agent = { idleTimeoutSeconds: IDLE_S, timeoutSeconds: 3_600 } as Agent;
const input = {} as RunAgentInput;

/** An agent whose every event the test releases, and whose heartbeats it sends. */
function heldAgent() {
  const released: unknown[] = [];
  let wakeUp: (() => void) | undefined;
  let context: ProviderContext | undefined;
  return {
    release(event: unknown) {
      released.push(event);
      wakeUp?.();
    },
    heartbeat: () => context!.heartbeat(),
    signal: () => context!.signal,
    provider: {
      async *run(_: RunAgentInput, given: ProviderContext) {
        context = given;
        for (;;) {
          while (released.length === 0) await new Promise<void>((resolve) => (wakeUp = resolve));
          const event = released.shift();
          if (event === 'end') return;
          yield event;
        }
      },
    },
  };
}

/** Lets every pending promise settle, so the relay is observably waiting again. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('limitedRun, the relay under its clocks', () => {
  it('counts only the waits for the agent: a caller busy for three idle limits with an event is no silence', async () => {
    const clock = new FakeClock();
    const held = heldAgent();
    const events = limitedRun(held.provider, input, { agent, clock, signal: new AbortController().signal });
    held.release('first');
    expect((await events.next()).value).toBe('first');
    clock.advance(3 * IDLE_S * 1000);
    const second = events.next();
    await settle();
    clock.advance((IDLE_S * 1000) / 2);
    held.release('second');
    expect((await second).value).toBe('second');
    held.release('end');
    expect((await events.next()).done).toBe(true);
  });

  it('fails provider_idle once one wait passes the limit, a heartbeat starting the wait over, and stops the agent', async () => {
    const clock = new FakeClock();
    const held = heldAgent();
    const events = limitedRun(held.provider, input, { agent, clock, signal: new AbortController().signal });
    const first = events.next();
    await settle();
    clock.advance(IDLE_S * 600);
    held.heartbeat();
    clock.advance(IDLE_S * 600);
    await settle();
    expect(held.signal().aborted).toBe(false);
    clock.advance(IDLE_S * 400);
    await expect(first).rejects.toMatchObject({ code: 'provider_idle' } satisfies Partial<RunFailure>);
    expect(held.signal().aborted).toBe(true);
  });

  it('arms one idle timer for a run however many events it relays', async () => {
    const clock = new FakeClock();
    let armed = 0;
    const counting = { now: () => clock.now(), after: (ms: number, fire: () => void) => (armed++, clock.after(ms, fire)) };
    const many = {
      async *run() {
        for (let i = 0; i < 1_000; i++) yield i;
      },
    };
    let relayed = 0;
    for await (const _ of limitedRun(many, input, { agent, clock: counting, signal: new AbortController().signal })) relayed++;
    expect(relayed).toBe(1_000);
    // The run's own limit and the idle watch: two timers, not one per event.
    expect(armed).toBe(2);
  });
});
