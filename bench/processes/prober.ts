/**
 * `GET /healthz` every 20 ms, from a process of its own: the harness that makes the load (hundreds
 * of 340 KB bodies to send, bursts to parse) would otherwise delay its own probes, and the figure
 * would be the harness's, not the gateway's. One plain HTTP/1.1 connection, kept alive.
 */
import { Agent, request } from 'node:http';
import { serveParent } from '../support/child.js';

const agent = new Agent({ keepAlive: true, maxSockets: 1 });
let probing: { stop: boolean; latencies: number[]; done: Promise<void> } | undefined;

function probe(url: string): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    request(`${url}/healthz`, { agent }, (response) => {
      response.resume();
      response.on('end', () => resolve(performance.now() - started));
    })
      .on('error', reject)
      .end();
  });
}

serveParent(
  {
    begin({ url }: { url: string }) {
      const state = { stop: false, latencies: [] as number[], done: Promise.resolve() };
      state.done = (async () => {
        while (!state.stop) {
          state.latencies.push(await probe(url));
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      })();
      probing = state;
    },
    async end() {
      if (!probing) return [];
      probing.stop = true;
      await probing.done;
      const { latencies } = probing;
      probing = undefined;
      return latencies;
    },
  },
  async () => agent.destroy(),
);
