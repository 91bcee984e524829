/**
 * `npx tsx bench/chain-verify.ts`: what checking an actor chain costs (issue 26), a micro-bench
 * apart from `npm run bench` (no gateway, no store: the check is pure CPU). A 5-hop chain, the
 * gateway's check (`readActorChain`) and the agent's (`verifyActorChain` with funduq's hop), per
 * call: wall-clock median and p99 of 2,000 after a warm-up, and the CPU time per call (what other
 * work on the machine moves least). The bound: at most 2 ms for 5 hops.
 */
import { generateKeyPairSync } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { appendHop, readActorChain, verifyActorChain } from '../packages/provider/src/actor-chain.js';
import { rawPublicKey } from '../packages/provider/src/ed25519.js';

const ROUNDS = 2_000;
const actors = Array.from({ length: 5 }, () => generateKeyPairSync('ed25519').privateKey);
const funduq = generateKeyPairSync('ed25519').privateKey;
const chain = actors.reduce<string[]>((built, key) => appendHop(built, key), []);
const relayed = appendHop(chain, funduq, { dispatchedTo: { agent: 'travel', provider: 'p1' } });
const funduqPublicKey = rawPublicKey(funduq);

function measure(what: string, check: () => unknown) {
  for (let i = 0; i < 200; i++) check();
  const times: number[] = [];
  const cpu = process.cpuUsage();
  for (let i = 0; i < ROUNDS; i++) {
    const start = performance.now();
    check();
    times.push(performance.now() - start);
  }
  const { user, system } = process.cpuUsage(cpu);
  times.sort((a, b) => a - b);
  const ms = (at: number) => times[Math.min(times.length - 1, Math.floor(at * times.length))].toFixed(3);
  console.log(`${what}: median ${ms(0.5)} ms, p99 ${ms(0.99)} ms, CPU ${((user + system) / 1000 / ROUNDS).toFixed(3)} ms per call (${ROUNDS} calls)`);
}

measure('the door: a 5-hop chain read and checked (readActorChain)', () => readActorChain(chain));
measure("the agent: 5 hops and funduq's verified (verifyActorChain)", () => verifyActorChain(relayed, { funduqPublicKey }));
measure("funduq's hop appended (appendHop)", () => appendHop(chain, funduq, { dispatchedTo: { agent: 'travel', provider: 'p1' } }));
