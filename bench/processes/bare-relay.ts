/**
 * The floor of a relay, in a process of its own as the gateway is: every POST is forwarded to one
 * agent URL with its body, and the agent's SSE bytes are written back as they come. No parse, no
 * check, no record, no admission: what funduq adds over it is funduq's own work, and what it adds
 * over the agent straight is what any relay between two HTTP hops costs on this machine.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serveParent } from '../support/child.js';

/** One per target (scenario 1 relays its short runs and its paced run). */
const servers: Server[] = [];

serveParent(
  {
    async listen({ target }: { target: string }) {
      const server = createServer((request, response) => {
        void (async () => {
          const chunks: Buffer[] = [];
          for await (const chunk of request) chunks.push(chunk as Buffer);
          const upstream = await fetch(target, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream' }, body: Buffer.concat(chunks) });
          response.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'text/event-stream', 'cache-control': 'no-cache' });
          if (upstream.body) for await (const chunk of upstream.body as unknown as AsyncIterable<Uint8Array>) response.write(chunk);
          response.end();
        })().catch((error: unknown) => response.destroy(error as Error));
      });
      servers.push(server);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/` };
    },
  },
  async () => {
    for (const server of servers) {
      server.closeAllConnections();
      server.close();
    }
  },
);
