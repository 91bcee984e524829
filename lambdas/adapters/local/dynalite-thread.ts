import { Worker } from 'node:worker_threads';

/**
 * The store thread's heap bound. Its data lives in LevelDB, off the heap; with 200 runs relaying
 * at once its heap peaked near 75 MB between collections (64 MB ran out), and unbounded, V8 let
 * it grow past 150 MB of garbage.
 */
const STORE_HEAP_MB = 128;

/** The parts of smithy's HttpRequest this transport reads. */
interface OutgoingRequest {
  method: string;
  path: string;
  query?: Record<string, string | string[] | null>;
  headers: Record<string, string>;
  body?: unknown;
}

interface IncomingResponse {
  statusCode: number;
  headers: Record<string, string>;
  body: Uint8Array;
}

type FromThread =
  | { kind: 'listening'; port: number }
  | { kind: 'failed'; message: string }
  | { kind: 'closed'; message?: string }
  | { kind: 'response'; id: number; statusCode: number; headers: Record<string, string>; body: string }
  | { kind: 'response'; id: number; error: string };

/**
 * dynalite on a thread of its own, and the AWS SDK's HTTP handler that reaches it: each request
 * is a message to the thread and back, with no socket, no HTTP framing and no signature arithmetic
 * between them. Everything above the transport (commands, marshalling, retries, error types) is
 * the SDK's own, as against DynamoDB; the store's work runs beside the gateway's thread, not on it.
 */
export class DynaliteThread {
  readonly metadata = { handlerProtocol: 'worker-thread' };
  private readonly pending = new Map<number, { resolve: (response: IncomingResponse) => void; reject: (error: Error) => void }>();
  private nextId = 0;
  private gone: Error | undefined;
  private drained: (() => void) | undefined;
  private closed: ((message?: string) => void) | undefined;

  private constructor(
    private readonly worker: Worker,
    readonly port: number,
    private readonly onLost: (error: Error) => void,
  ) {
    worker.on('message', (message: FromThread) => this.receive(message));
    worker.on('error', (error) => this.fail(new Error(`the local DynamoDB thread failed: ${error.message}`)));
    worker.on('exit', () => this.fail(new Error('the local DynamoDB thread is gone')));
  }

  /**
   * Starts dynalite on a new thread: LevelDB under `path`, or in memory when no path is given.
   * `onLost` hears of a thread that ended without being closed: every request fails from then on.
   */
  static async start(path: string | undefined, onLost: (error: Error) => void = () => {}): Promise<DynaliteThread> {
    const worker = new Worker(new URL('./dynalite-thread.cjs', import.meta.url), {
      workerData: { path },
      resourceLimits: { maxOldGenerationSizeMb: STORE_HEAP_MB, maxYoungGenerationSizeMb: 16 },
    });
    const port = await new Promise<number>((resolve, reject) => {
      worker.once('error', reject);
      worker.once('message', (message: FromThread) => {
        worker.off('error', reject);
        if (message.kind === 'listening') resolve(message.port);
        else reject(new Error(`the local DynamoDB could not start: ${message.kind === 'failed' ? message.message : message.kind}`));
      });
    });
    return new DynaliteThread(worker, port, onLost);
  }

  handle(request: OutgoingRequest, options: { abortSignal?: { aborted: boolean } } = {}): Promise<{ response: IncomingResponse }> {
    if (this.gone) return Promise.reject(this.gone);
    if (options.abortSignal?.aborted) return Promise.reject(Object.assign(new Error('Request aborted'), { name: 'AbortError' }));
    const id = (this.nextId += 1);
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(request.headers)) headers[name.toLowerCase()] = value;
    const answered = new Promise<IncomingResponse>((resolve, reject) => this.pending.set(id, { resolve, reject }));
    this.worker.postMessage({ kind: 'request', id, method: request.method, url: urlOf(request), headers, body: bodyText(request.body) });
    return answered.then((response) => ({ response }));
  }

  updateHttpClientConfig(): void {}

  httpHandlerConfigs(): Record<string, never> {
    return {};
  }

  /** A client's `destroy()` calls this; the thread lives until `close()`. */
  destroy(): void {}

  /** Takes no more requests, lets those under way be answered, closes the database and ends the thread. */
  async close(): Promise<void> {
    if (this.gone) return;
    this.gone = Object.assign(new Error('the local DynamoDB is closed'), { name: 'StoreClosed' });
    if (this.pending.size > 0) await new Promise<void>((resolve) => (this.drained = resolve));
    const message = await new Promise<string | undefined>((resolve) => {
      this.closed = resolve;
      this.worker.postMessage({ kind: 'close' });
    });
    await this.worker.terminate();
    if (message) throw new Error(`the local DynamoDB did not close cleanly: ${message}`);
  }

  private receive(message: FromThread): void {
    if (message.kind === 'closed') return this.closed?.(message.message);
    if (message.kind !== 'response') return;
    const waiting = this.pending.get(message.id);
    if (!waiting) return;
    this.pending.delete(message.id);
    if ('error' in message) waiting.reject(new Error(`the local DynamoDB failed: ${message.error}`));
    else waiting.resolve({ statusCode: message.statusCode, headers: message.headers, body: Buffer.from(message.body) });
    if (this.pending.size === 0) this.drained?.();
  }

  private fail(error: Error): void {
    if (this.closed) return;
    const first = this.gone === undefined;
    this.gone ??= error;
    if (first) this.onLost(error);
    for (const waiting of this.pending.values()) waiting.reject(error);
    this.pending.clear();
    this.drained?.();
  }
}

function bodyText(body: unknown): string {
  if (body === undefined || body === null) return '';
  if (typeof body === 'string') return body;
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString();
  throw new TypeError('the local DynamoDB transport sends string or byte bodies only');
}

function urlOf(request: OutgoingRequest): string {
  const query = Object.entries(request.query ?? {}).flatMap(([key, value]) =>
    value === null ? [encodeURIComponent(key)] : [value].flat().map((v) => `${encodeURIComponent(key)}=${encodeURIComponent(v)}`),
  );
  return query.length > 0 ? `${request.path}?${query.join('&')}` : request.path;
}
