import { randomUUID } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startChild } from './support/child.js';
import { readRun } from './support/sse-reader.js';
import { scriptQuery } from './support/script.js';
import { startLocalGateway } from '../lambdas/adapters/local/runtime.js';
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
const agent = await startChild('agent.ts', { name: 'agent' });
const agentUrl = await agent.call<string>('url');
const local: any = await startLocalGateway({ dataDir: await mkdtemp(join(tmpdir(), 'p-')), host: '127.0.0.1', port: 0, threadQueueLimit: 8, heartbeatMs: 15000 });
const store: any = local.gateway.deps.store;
await store.putAgent({ id: 'f', description: '', provider: { kind: 'agui-http', url: `${agentUrl}/agui?${scriptQuery({ events: 100, intervalMs: 0, deltaChars: 6 })}` }, takesInterjections: false, timeoutSeconds: 900, idleTimeoutSeconds: 300 });
const MB = 1024 * 1024;
const report = (label: string) => { (globalThis as any).gc(); const m = process.memoryUsage(); console.log(`${label}: rss ${(m.rss / MB).toFixed(0)} heapUsed ${(m.heapUsed / MB).toFixed(0)} heapTotal ${(m.heapTotal / MB).toFixed(0)}`); };
report('start');
for (let w = 0; w < 4; w++) {
  await Promise.all(Array.from({ length: 200 }, () => readRun(`${local.url}/agui/f`, { threadId: randomUUID(), runId: randomUUID() })));
  report(`wave ${w + 1} streams ended`);
  const t0 = performance.now(); await local.pushes.idle(); 
  report(`wave ${w + 1} push planning drained after ${(performance.now() - t0).toFixed(0)} ms`);
}
await local.close(); await agent.stop();
