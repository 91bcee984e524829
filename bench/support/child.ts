import { fork, type ChildProcess } from 'node:child_process';
import { bundled } from '../../bin/bundle.mjs';

/**
 * A bench process (the scripted agent, the gateway) as a forked child that answers calls over
 * IPC. Keeping them out of the harness process keeps the harness's own clients out of the
 * gateway's CPU profile and peak RSS.
 */
export interface Child {
  call<T = unknown>(method: string, params?: unknown): Promise<T>;
  readonly pid: number;
  /** Asks the child to close and exit (so a --cpu-prof profile is written), then waits for it. */
  stop(): Promise<void>;
}

interface Reply {
  id: number;
  result?: unknown;
  error?: string;
}

export async function startChild(entry: string, options: { execArgv?: string[]; name: string }): Promise<Child> {
  // Bundled as `npm start` runs the gateway: no transpiling loader in the measured processes.
  const path = await bundled(`bench/processes/${entry}`);
  const child: ChildProcess = fork(path, [], {
    execArgv: options.execArgv ?? [],
    // The SDK's notice that it will need Node 22 in 2027 is not news to a benchmark, and the usage
    // records' CloudWatch metrics (scenario 6 runs the AWS wiring) would be lines on its output.
    env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', POWERTOOLS_METRICS_DISABLED: 'true' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const pending = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();
  let next = 0;
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    child.once('exit', (code, signal) => {
      exited = true;
      for (const waiter of pending.values()) waiter.reject(new Error(`${options.name} exited (${code ?? signal})`));
      pending.clear();
      resolve();
    }),
  );
  child.on('message', (message: Reply) => {
    const waiter = pending.get(message.id);
    if (!waiter) return;
    pending.delete(message.id);
    if (message.error !== undefined) waiter.reject(new Error(`${options.name}: ${message.error}`));
    else waiter.resolve(message.result);
  });
  const call = <T>(method: string, params?: unknown): Promise<T> => {
    if (exited) return Promise.reject(new Error(`${options.name} is not running`));
    const id = ++next;
    return new Promise<T>((resolve, reject) => {
      pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      child.send({ id, method, params });
    });
  };
  await call('ready');
  return {
    call,
    pid: child.pid ?? -1,
    async stop() {
      if (exited) return;
      await call('stop').catch(() => undefined);
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exit;
      clearTimeout(timer);
    },
  };
}

type Handler = (params: never) => unknown;

/** The child's side: answers the parent's calls with `handlers`; `stop` runs `close` and exits. */
export function serveParent(handlers: Record<string, Handler>, close: () => Promise<void>): void {
  const send = (reply: Reply) => process.send?.(reply);
  process.on('message', (message: { id: number; method: string; params: unknown }) => {
    void (async () => {
      if (message.method === 'ready') return send({ id: message.id, result: true });
      if (message.method === 'stop') {
        await close().catch(() => undefined);
        send({ id: message.id, result: true });
        // process.exit lets --cpu-prof write its profile; a disconnect alone could leave sockets open.
        setTimeout(() => process.exit(0), 50);
        return;
      }
      const handler = handlers[message.method];
      if (!handler) return send({ id: message.id, error: `no method ${message.method}` });
      try {
        send({ id: message.id, result: await handler(message.params as never) });
      } catch (error) {
        send({ id: message.id, error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
      }
    })();
  });
  // The parent went away (harness killed): nothing is left to serve.
  process.on('disconnect', () => process.exit(0));
}
