import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '../..');

export interface ChildGateway {
  url: string;
  child: ChildProcess;
  /** Everything it printed so far. */
  output(): string;
  /** Whether the process is still running. */
  alive(): boolean;
  /** The most memory the process has held (VmHWM), in MB. */
  peakRssMb(): number;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/** `npm start`'s command as package.json has it (`node …`): what the tests start is what a user starts. */
export const NPM_START: string[] = (() => {
  const [command, ...args] = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start.split(' ');
  if (command !== 'node') throw new Error(`npm start runs ${command}, not node: the tests cannot start it with node flags`);
  return args;
})();

/** `npm start` in a process of its own, with node flags (a small heap) and settings. */
export function spawnGateway(options: { nodeFlags?: string[]; env: Record<string, string> }): ChildProcess {
  return spawn(process.execPath, [...(options.nodeFlags ?? []), ...NPM_START], {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** `npm start` in a process of its own, once it listens. */
export async function startChildGateway(options: { nodeFlags?: string[]; env: Record<string, string> }): Promise<ChildGateway> {
  const child = spawnGateway(options);
  let output = '';
  let exited = false;
  child.on('exit', () => (exited = true));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no URL within 30 s:\n${output}`)), 30_000);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout!.on('data', read);
    child.stderr!.on('data', read);
    child.once('exit', (code) => reject(new Error(`exited ${code}:\n${output}`)));
  });
  return {
    url,
    child,
    output: () => output,
    alive: () => !exited,
    peakRssMb: () => Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))![1]) / 1024,
    async kill(signal = 'SIGKILL') {
      if (exited) return;
      const gone = new Promise((resolve) => child.once('exit', resolve));
      child.kill(signal);
      await gone;
    },
  };
}
