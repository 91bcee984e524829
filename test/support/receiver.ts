import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
  /** The body's bytes as they came, as text: what a signature covers. */
  raw: string;
}

export interface Receiver {
  url: string;
  received: Received[];
  /** Requests answered 2xx, in order. */
  accepted: Received[];
  close(): Promise<void>;
}

/**
 * A push notification receiver on loopback. `status(n)` answers the n-th request (1, 2, …);
 * every request is kept, answered or not.
 */
export async function startReceiver(status: (n: number) => number = () => 200): Promise<Receiver> {
  const received: Received[] = [];
  const accepted: Received[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const entry = { path: request.url ?? '', headers: request.headers, body: JSON.parse(raw || '{}'), raw };
      received.push(entry);
      const code = status(received.length);
      if (code >= 200 && code < 300) accepted.push(entry);
      response.writeHead(code, code >= 300 && code < 400 ? { Location: 'http://127.0.0.1:1/elsewhere' } : {}).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    accepted,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
