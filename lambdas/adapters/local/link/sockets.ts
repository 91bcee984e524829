import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import { WS_MESSAGE_BYTES } from '../../../../packages/provider/src/wire.js';

/** What the link's door does with a link's life: its upgrade, its messages, its end. */
export interface LinkSocketHandlers {
  open(proofHeader: string | undefined, connectionId: string): Promise<{ ok: true; welcome: string } | { ok: false; status: number; code: string; message: string }>;
  message(connectionId: string, text: string): Promise<void>;
  closed(connectionId: string): Promise<void>;
}

export interface LinkSocketOptions {
  path: string;
  /** The upgrade request's header that carries the proof, and the one a refusal names its code in. */
  proofHeader: string;
  refusalHeader: string;
  /** A link silent for three of these (no frame, not even a heartbeat) is closed. */
  heartbeatMs: number;
  newId(): string;
  onError?: (error: unknown) => void;
}

interface Link {
  socket: WebSocket;
  /** Messages are handled one after another, in the order they came. */
  handled: Promise<void>;
  heardAt: number;
}

/**
 * The provider link on one machine: a WebSocket route on the gateway's own HTTP server (`ws`). A
 * refused handshake is answered on the upgrade request itself (401 and a JSON error, before any
 * WebSocket exists), as API Gateway's `$connect` refuses one.
 */
export class LocalLinkSockets {
  // A provider that speaks to funduq on one machine is held to what API Gateway takes, so it works on AWS as it did here.
  private readonly server = new WebSocketServer({ noServer: true, maxPayload: WS_MESSAGE_BYTES });
  private readonly links = new Map<string, Link>();
  private handlers: LinkSocketHandlers | undefined;
  private http: Server | undefined;
  private sweeper: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    void this.upgrade(request, socket, head).catch((error: unknown) => {
      this.options.onError?.(error);
      socket.destroy();
    });
  };

  constructor(private readonly options: LinkSocketOptions) {}

  /** Takes the upgrade requests of the gateway's HTTP server. */
  start(http: Server, handlers: LinkSocketHandlers): void {
    this.handlers = handlers;
    this.http = http;
    http.on('upgrade', this.onUpgrade);
    this.sweeper = setInterval(() => {
      const silentSince = Date.now() - 3 * this.options.heartbeatMs;
      for (const link of this.links.values()) if (link.heardAt < silentSince) link.socket.terminate();
    }, this.options.heartbeatMs);
    this.sweeper.unref();
  }

  async send(connectionId: string, text: string): Promise<boolean> {
    const link = this.links.get(connectionId);
    if (!link || link.socket.readyState !== WebSocket.OPEN) return false;
    return new Promise((resolve) => link.socket.send(text, (error) => resolve(error === undefined || error === null)));
  }

  async close(connectionId: string, reason: string): Promise<void> {
    // 4000–4999: codes for the application (RFC 6455 §7.4.2); a close reason holds 123 bytes.
    this.links.get(connectionId)?.socket.close(4000, reason.slice(0, 120));
  }

  /** Every link is cut (the gateway stops). */
  stop(): void {
    // The links cut here are the gateway's own doing: nothing is left to tell of their end.
    this.stopped = true;
    clearInterval(this.sweeper);
    this.http?.off('upgrade', this.onUpgrade);
    for (const link of this.links.values()) link.socket.terminate();
    this.server.close();
  }

  private async upgrade(request: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const handlers = this.handlers!;
    if (new URL(request.url ?? '/', 'http://localhost').pathname !== this.options.path) {
      refuse(socket, 404, { code: 'not_found', message: `no WebSocket route ${request.url ?? ''}; providers link at ${this.options.path}` }, this.options.refusalHeader);
      return;
    }
    const connectionId = this.options.newId();
    const header = request.headers[this.options.proofHeader.toLowerCase()];
    const opened = await handlers.open(Array.isArray(header) ? header[0] : header, connectionId);
    if (!opened.ok) {
      refuse(socket, opened.status, { code: opened.code, message: opened.message }, this.options.refusalHeader);
      return;
    }
    if (socket.destroyed) {
      // The provider went while its proof was checked.
      await handlers.closed(connectionId);
      return;
    }
    this.server.handleUpgrade(request, socket, head, (ws) => {
      const link: Link = { socket: ws, handled: Promise.resolve(), heardAt: Date.now() };
      this.links.set(connectionId, link);
      ws.on('message', (data, isBinary) => {
        link.heardAt = Date.now();
        const text = isBinary ? '' : data.toString();
        link.handled = link.handled.then(() => handlers.message(connectionId, text)).catch((error: unknown) => this.options.onError?.(error));
      });
      ws.on('close', () => {
        this.links.delete(connectionId);
        // After every message it sent is handled: its last events count before it is known gone.
        if (this.stopped) return;
        link.handled = link.handled.then(() => handlers.closed(connectionId)).catch((error: unknown) => this.options.onError?.(error));
      });
      ws.on('error', () => ws.terminate());
      ws.send(opened.welcome);
    });
  }
}

function refuse(socket: Duplex, status: number, error: { code: string; message: string }, refusalHeader: string): void {
  const body = JSON.stringify({ error });
  const reason = status === 401 ? 'Unauthorized' : status === 404 ? 'Not Found' : 'Bad Request';
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\n${refusalHeader}: ${error.code}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
