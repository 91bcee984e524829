import { startChild } from './support/child.js';
import { startGateway } from './support/bench.js';
import { queueHandOff } from './scenarios/5-queue-handoff.js';

const agent = await startChild('agent.ts', { name: 'agent' });
const agentUrl = await agent.call<string>('url');
const t0 = performance.now();
const bench = { quick: true, profile: false, agent, agentUrl, log: (l: string) => console.log(l), startGateway: (mode: 'local'|'aws', name: string) => startGateway(agentUrl, mode, name, false) };
const rows = await queueHandOff(bench);
console.log(rows.map(r => `${r.metric}: ${r.value?.toFixed(1)} ${r.unit} ref ${r.reference?.toFixed(0)} met ${r.met} spread ${r.spread?.spreadPct.toFixed(0)}%`).join('\n'));
console.log('took', performance.now() - t0);
await agent.stop();
