import { startChild, type Child } from './child.js';

/** The `/healthz` prober (bench/processes/prober.ts), started once and shared by the scenarios. */
let prober: Promise<Child> | undefined;

/** `/healthz` every 20 ms, from a process of its own, until `during` settles: its value and each probe's latency. */
export async function probeHealth<T>(url: string, during: Promise<T>): Promise<{ value: T; latencies: number[] }> {
  const child = await (prober ??= startChild('prober.ts', { name: '/healthz prober' }));
  await child.call('begin', { url });
  const latencies: number[] = [];
  try {
    return { value: await during, latencies };
  } finally {
    // The probes end with the load, whether it went well or not.
    latencies.push(...(await child.call<number[]>('end')));
  }
}

/** Ends the prober's process, if one was started. */
export async function stopProber(): Promise<void> {
  const child = await prober;
  prober = undefined;
  await child?.stop();
}
