import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../../support/core-harness.js';
import { startChildGateway, type ChildGateway } from '../../support/child-gateway.js';
import { aguiAgent, assistantText, userMessage } from '../../support/gateway.js';
import { startHeldAgent, type HeldAgent } from '../../support/held-agent.js';
import { manualBlocks } from '../../support/readme.js';

const ROOT = join(import.meta.dirname, '../../..');
const SECTION = 'Put an agent behind funduq without opening a port';
const blocks = manualBlocks().filter((block) => block.section === SECTION);
const block = (lang: string, containing: string) => {
  const found = blocks.find((b) => b.lang === lang && b.text.includes(containing));
  if (!found) throw new Error(`the manual's section "${SECTION}" has no ${lang} block with "${containing}"`);
  return found.text;
};
/** What a snippet's last line says it prints (`// …`). */
const printed = (text: string) => /\/\/ (.+)$/.exec(text.trim().split('\n').at(-1)!)?.[1];

/**
 * An empty project outside the checkout (nothing of it is reachable by walking up), which installs
 * the tarball as docs/providers.md says. npm takes what the root's `npm ci` left in its cache without
 * asking the registry again, so the install takes seconds (the registry is asked only for what the
 * cache lacks).
 */
const project = mkdtempSync(join(tmpdir(), 'funduq-provider-project-'));
// Not the settings npm hands the scripts it runs (`npm test`: its local prefix is the checkout's).
const userEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name)));
const npmEnv = { ...userEnv, npm_config_prefer_offline: 'true', npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' };
let tarball = '';
let publicKey = '';
let gateway: ChildGateway | undefined;
let agent: HeldAgent | undefined;
const children: ChildProcess[] = [];
const timings: Record<string, number> = {};

async function timed<T>(name: string, step: () => T | Promise<T>): Promise<T> {
  const started = performance.now();
  try {
    return await step();
  } finally {
    timings[name] = Math.round(performance.now() - started);
  }
}

beforeAll(async () => {
  // Step 1, as written: the tarball made in the checkout, installed in the project with the key pair made there.
  await timed('npm pack', () => execFileSync('sh', ['-c', block('sh', 'npm pack')], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env: npmEnv, timeout: 120_000 }));
  const install = block('sh', 'npm i ').replaceAll('/path/to/funduq', ROOT);
  tarball = /\S+\.tgz/.exec(install)![0];
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'my-provider', private: true }));
  const said = await timed('npm i, keygen', () => execFileSync('sh', ['-c', install], { cwd: project, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env: npmEnv, timeout: 120_000 }));
  publicKey = said.trim().split('\n').at(-1)!;
}, 240_000);

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await agent?.close();
  await gateway?.kill('SIGTERM');
  rmSync(project, { recursive: true, force: true });
  rmSync(tarball, { force: true });
  console.log('provider package, ms:', timings);
});

describe('the provider package, from its tarball', () => {
  it('holds the built JavaScript and its type declarations, and no TypeScript source', () => {
    const files = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).trim().split('\n');
    expect(files).toEqual(expect.arrayContaining(['package/package.json', 'package/README.md', 'package/dist/index.js', 'package/dist/index.d.ts', 'package/dist/cli.js', 'package/dist/wire.d.ts']));
    expect(files.filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'))).toEqual([]);
    expect(files.filter((file) => !/^package\/(package\.json|README\.md|dist\/.+)$/.test(file))).toEqual([]);
  });

  it('installs into an empty project with its command, and keygen leaves a key only its owner reads', () => {
    expect(existsSync(join(project, 'node_modules/@funduq/provider/dist/index.js'))).toBe(true);
    expect(existsSync(join(project, 'node_modules/.bin/funduq-provider'))).toBe(true);
    expect(publicKey).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(statSync(join(project, 'provider.key')).mode & 0o777).toBe(0o600);
  });

  it("gives a TypeScript consumer the SDK's types from its declarations", async () => {
    writeFileSync(
      join(project, 'consumer.mts'),
      `import { HttpAgent } from '@ag-ui/client';
import { connect, generateKeyPair, LinkRefused, ToProviderSchema, type ConnectOptions, type ToProviderFrame } from '@funduq/provider';

const options: ConnectOptions = {
  url: 'ws://127.0.0.1:8787/link',
  providerId: 'laptop',
  privateKey: generateKeyPair().privateKey,
  funduqPublicKey: 'pinned',
  agents: { research: new HttpAgent({ url: 'http://127.0.0.1:8000/agent' }) },
};
const frame: ToProviderFrame = ToProviderSchema.parse({ v: 1, type: 'heartbeat' });
const code: string = new LinkRefused('link_unknown_provider', 'no such provider').code;
// @ts-expect-error: a provider id is a string (an SDK typed any would make this line an error of its own)
const wrong: ConnectOptions = { ...options, providerId: 1 };
export const used = [connect, frame, code, wrong];
`,
    );
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', strict: true, noEmit: true, typeRoots: [join(ROOT, 'node_modules/@types')], types: ['node'] },
        files: ['consumer.mts'],
      }),
    );
    // The package is ES modules only: a TypeScript consumer of it is one too (.mts, or "type": "module").
    const checked = await timed('tsc', () => spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', project], { cwd: project, encoding: 'utf8', timeout: 120_000 }));
    expect({ status: checked.status, said: checked.stdout }).toEqual({ status: 0, said: '' });
  }, 120_000);

  it("serves an agent to npm start as docs/providers.md's steps say: the registration, the connect snippet, the bridge", async () => {
    gateway = await startChildGateway({ env: { FUNDUQ_DATA_DIR: join(project, '.funduq') } });
    agent = await startHeldAgent();
    agent.release();
    const funduqKey = /funduq's public key (\S+)\)/.exec(gateway.output())?.[1];
    expect(funduqKey).toBe(((await (await fetch(`${gateway.url}/admin/link`)).json()) as { publicKey: string }).publicKey);
    const here = (text: string) => text.replace('ws://127.0.0.1:8787', gateway!.url.replace('http', 'ws')).replace('http://127.0.0.1:8000/agent', agent!.url);

    // Step 2, as written, with the key step 1 printed and this gateway's URL (curl's progress meter goes to stderr: held here).
    const register = block('sh', 'curl').replace('<the public key printed above>', publicKey).replaceAll('http://127.0.0.1:8787', gateway.url);
    const registered = execFileSync('sh', ['-c', register], { encoding: 'utf8', timeout: 30_000, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, FUNDUQ_ADMIN_TOKEN: '' } });
    expect(JSON.parse(registered)).toMatchObject({ publicKey });

    // Step 3, as written: a plain module of the project, run by node.
    const snippet = block('js', "from '@funduq/provider'");
    writeFileSync(join(project, 'provider.mjs'), here(snippet));
    const provider = running(spawn(process.execPath, ['provider.mjs'], { cwd: project, env: { ...userEnv, FUNDUQ_KEY: funduqKey }, stdio: ['ignore', 'pipe', 'pipe'] }));
    await eventually(() => expect(provider.out().trim(), provider.err()).toBe(printed(snippet)), 30_000);
    await expectRelayed('readme-connect');
    provider.child.kill('SIGTERM');
    await provider.exited;

    // The bridge, as written: the same agent, with no code.
    const bridge = running(spawn('sh', ['-c', `exec ${here(block('sh', 'funduq-provider --url'))}`], { cwd: project, env: { ...userEnv, FUNDUQ_KEY: funduqKey }, stdio: ['ignore', 'pipe', 'pipe'], detached: true }));
    await eventually(() => expect(bridge.out(), bridge.err()).toContain('serving research on'), 30_000);
    await expectRelayed('readme-bridge');
    process.kill(-bridge.child.pid!, 'SIGTERM');
    await bridge.exited;
    await eventually(async () => expect(await (await fetch(`${gateway!.url}/admin/providers/laptop`)).json()).toMatchObject({ linked: false }));
  }, 120_000);
});

/** A stock AG-UI client's run of `research` through the gateway gets the agent's answer. */
async function expectRelayed(threadId: string): Promise<void> {
  const caller = aguiAgent(gateway!, threadId, 'research');
  caller.messages = [userMessage(`from a caller of ${threadId}`)];
  const result = await caller.runAgent();
  const runId = agent!.received.find((input) => input.threadId === threadId)?.runId;
  expect(assistantText(result.newMessages)).toEqual([`done: ${runId}`]);
}

function running(child: ChildProcess) {
  children.push(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return { child, exited, out: () => out, err: () => err };
}
