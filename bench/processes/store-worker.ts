/**
 * dynalite on a thread of its own (an experiment: `npm run bench -- --store-thread`). The local
 * gateway runs dynalite on its main thread, where every store request costs the thread the
 * server's work too; here the gateway keeps only the client's half.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { startDynalite } from '../../lambdas/adapters/local/dynalite.js';

const dynalite = await startDynalite({ path: (workerData as { path: string }).path });
parentPort?.postMessage({ endpoint: dynalite.endpoint });
parentPort?.on('message', (message: string) => {
  if (message === 'close') void dynalite.close().then(() => parentPort?.postMessage({ closed: true }));
});
