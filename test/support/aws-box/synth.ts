import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

export const PROJECT_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const CACHE = join(PROJECT_ROOT, 'node_modules', '.cache', 'funduq-aws-box');
/** What the synthesized stack is made from: a change to any of these is a new synthesis. */
const SOURCES = ['bin', 'lib', 'lambdas', 'package-lock.json', 'cdk.json'];

/**
 * The stack as `cdk deploy` would deploy it: the real CLI (`npx cdk synth`, offline, esbuild
 * bundling on this machine), once per set of sources and context. The output is kept under
 * node_modules/.cache keyed by the sources' hash, so test files and later runs share one synthesis;
 * a lock directory makes concurrent test files wait for the one that synthesizes.
 */
export async function synthesize(context: Record<string, string> = {}): Promise<string> {
  const key = await sourcesHash(context);
  const dir = join(CACHE, key);
  if (existsSync(join(dir, 'done'))) return dir;
  await mkdir(CACHE, { recursive: true });
  const lock = `${dir}.lock`;
  for (;;) {
    try {
      await mkdir(lock);
      break;
    } catch {
      if (existsSync(join(dir, 'done'))) return dir;
      // A lock older than a synthesis can take is left by a run that was killed.
      const age = Date.now() - (await stat(lock).catch(() => ({ mtimeMs: Date.now() }))).mtimeMs;
      if (age > 300_000) await rm(lock, { recursive: true, force: true });
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
  try {
    if (existsSync(join(dir, 'done'))) return dir;
    const out = `${dir}.out`;
    await rm(out, { recursive: true, force: true });
    await cdkSynth(out, context);
    await rm(dir, { recursive: true, force: true });
    await rename(out, dir);
    await writeFile(join(dir, 'done'), new Date().toISOString());
    return dir;
  } finally {
    await rm(lock, { recursive: true, force: true });
  }
}

function cdkSynth(out: string, context: Record<string, string>): Promise<void> {
  const args = [
    join(PROJECT_ROOT, 'node_modules', 'aws-cdk', 'bin', 'cdk'),
    'synth',
    '--output',
    out,
    '--quiet',
    '--no-notices',
    '--no-version-reporting',
    ...Object.entries(context).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
  ];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      cwd: PROJECT_ROOT,
      // Offline: no telemetry, no instance metadata lookups for a default account.
      env: { ...process.env, CDK_DISABLE_CLI_TELEMETRY: 'true', AWS_EC2_METADATA_DISABLED: 'true', CI: 'true' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`cdk synth failed (exit ${code}):\n${output.slice(-4000)}`))));
  });
}

async function sourcesHash(context: Record<string, string>): Promise<string> {
  const hash = createHash('sha256');
  hash.update(JSON.stringify(context));
  for (const source of SOURCES) {
    for (const file of await filesUnder(join(PROJECT_ROOT, source))) {
      hash.update(relative(PROJECT_ROOT, file));
      hash.update(await readFile(file));
    }
  }
  return hash.digest('hex').slice(0, 24);
}

async function filesUnder(path: string): Promise<string[]> {
  const info = await stat(path);
  if (!info.isDirectory()) return [path];
  const entries = await readdir(path, { withFileTypes: true });
  const nested = await Promise.all(
    entries.sort((a, b) => a.name.localeCompare(b.name)).map((entry) => filesUnder(join(path, entry.name))),
  );
  return nested.flat();
}
