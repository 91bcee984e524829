import { generateKeyPairSync, sign, verify } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { appendHop, readActorChain, verifyActorChain } from '../../packages/provider/src/actor-chain.js';
import { rawPublicKey } from '../../packages/provider/src/ed25519.js';
import type { Bench, Row } from '../support/bench.js';
import { row } from '../support/bench.js';
import { spread } from '../support/stats.js';

const HOPS = 5;

/**
 * What checking an actor chain costs (issue 26's bound: at most 2 ms for 5 hops), beside its floor
 * measured in the same run: the 5 bare Ed25519 verifications a chain of 5 hops cannot do without.
 * Pure CPU (no gateway, no store), so each figure is CPU time per call, what other work on the
 * machine moves least; the median of 3 repetitions.
 */
export async function actorChain(bench: Bench): Promise<Row[]> {
  const rounds = bench.quick ? 500 : 2_000;
  const actors = Array.from({ length: HOPS }, () => generateKeyPairSync('ed25519'));
  const funduq = generateKeyPairSync('ed25519').privateKey;
  const chain = actors.reduce<string[]>((built, { privateKey }) => appendHop(built, privateKey), []);
  const dispatchedTo = { agent: 'travel', provider: 'p1' };
  const relayed = appendHop(chain, funduq, { dispatchedTo });
  const funduqPublicKey = rawPublicKey(funduq);
  const message = Buffer.from(chain[0]);
  const signatures = actors.map(({ privateKey }) => sign(null, message, privateKey));

  const cpuPerCall = (check: () => unknown): number => {
    for (let i = 0; i < 100; i++) check();
    const cpu = process.cpuUsage();
    for (let i = 0; i < rounds; i++) check();
    const { user, system } = process.cpuUsage(cpu);
    return (user + system) / 1000 / rounds;
  };
  const samples = { floor: [] as number[], door: [] as number[], agent: [] as number[], append: [] as number[] };
  for (let rep = 0; rep < 3; rep++) {
    const started = performance.now();
    samples.floor.push(cpuPerCall(() => actors.every(({ publicKey }, i) => verify(null, message, publicKey, signatures[i]))));
    samples.door.push(cpuPerCall(() => readActorChain(chain)));
    samples.agent.push(cpuPerCall(() => verifyActorChain(relayed, { funduqPublicKey })));
    samples.append.push(cpuPerCall(() => appendHop(chain, funduq, { dispatchedTo })));
    bench.log(
      `  rep ${rep + 1}: ${HOPS} bare verifies ${samples.floor[rep].toFixed(3)} ms, the door's check ${samples.door[rep].toFixed(3)} ms, ` +
        `the agent's (with funduq's hop) ${samples.agent[rep].toFixed(3)} ms, funduq's hop appended ${samples.append[rep].toFixed(3)} ms (CPU per call, ${rounds} calls, ${(performance.now() - started).toFixed(0)} ms)`,
    );
  }
  const floor = spread(samples.floor).median;
  const base = { scenario: 10, name: `actor chain of ${HOPS} hops`, unit: 'ms', reference: floor, referenceIs: `${HOPS} bare Ed25519 verifications (node:crypto)` };
  return [
    row({ ...base, metric: "the door's check (readActorChain), CPU per call", target: '≤ 2 ms' }, spread(samples.door), (v) => v <= 2),
    row({ ...base, metric: "the agent's check with funduq's hop (verifyActorChain), CPU per call", target: '≤ 2 ms' }, spread(samples.agent), (v) => v <= 2),
    row({ ...base, metric: "funduq's hop appended (appendHop), CPU per call", reference: null, referenceIs: undefined, target: null }, spread(samples.append)),
  ];
}
