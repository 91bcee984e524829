import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A tiny OTLP/HTTP receiver: it takes POST /v1/traces (OTLP/JSON), counts the spans and answers 200, as a collector would. */
export interface OtlpReceiver {
  /** The traces URL to export to (`…/v1/traces`). */
  url: string;
  /** Spans and export requests received so far. */
  received(): { spans: number; requests: number; bytes: number };
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const counts = { spans: 0, requests: 0, bytes: 0 };
  const server: Server = createServer((req, res) => {
    if (req.method !== 'POST' || req.url !== '/v1/traces') {
      res.writeHead(404).end();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      counts.requests++;
      counts.bytes += body.length;
      try {
        const payload = JSON.parse(body.toString('utf8')) as { resourceSpans?: { scopeSpans?: { spans?: unknown[] }[] }[] };
        for (const resource of payload.resourceSpans ?? []) for (const scope of resource.scopeSpans ?? []) counts.spans += scope.spans?.length ?? 0;
      } catch {
        // A protobuf body is taken too, uncounted: the exporter here sends JSON.
      }
      res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`,
    received: () => ({ ...counts }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
