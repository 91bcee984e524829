import type { Clock } from '../core/ports.js';

/** The machine's clock and timers: what every runtime gives the core outside tests. */
export const systemClock: Clock = {
  now: () => Date.now(),
  after(ms, fire) {
    const timer = setTimeout(fire, ms);
    return () => clearTimeout(timer);
  },
};
