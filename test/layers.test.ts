import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..');
const LAMBDAS = join(ROOT, 'lambdas');

/** A module's layer: its lambdas/ folder, or `packages` for the packages beside the gateway (the provider SDK). */
function layerOf(path: string): string {
  const [top, folder] = relative(ROOT, path).split('/');
  return top === 'lambdas' ? folder : top;
}

/** Every lambdas/ module's imports of other lambdas/ folders or of packages/, as `module → layer`. */
function crossings(): { from: string; to: string }[] {
  return readdirSync(LAMBDAS, { recursive: true, encoding: 'utf8' })
    .filter((name) => /\.tsx?$/.test(name))
    .flatMap((name) => {
      const text = readFileSync(join(LAMBDAS, name), 'utf8');
      const from = name.split('/')[0];
      return [...text.matchAll(/from\s*['"](\.[^'"]+)['"]/g)].map((m) => ({ from: `${from} (${name})`, to: layerOf(join(LAMBDAS, name, '..', m[1])) }));
    });
}

/**
 * Which folders each layer may import: a request flows door → core → ports ← adapters; runtimes
 * compose. `packages` is the provider SDK's package, whose wire funduq and providers share: the
 * core takes its types only (test/core/purity.test.ts), and it imports nothing of the gateway
 * (test/packages/provider/sources.test.ts).
 */
const MAY_IMPORT: Record<string, string[]> = {
  core: ['core', 'packages'],
  doors: ['doors', 'core', 'packages'],
  adapters: ['adapters', 'core', 'packages'],
  providers: ['providers', 'core'],
  runtimes: ['runtimes', 'core', 'doors', 'adapters', 'providers', 'packages'],
  handlers: ['handlers', 'runtimes', 'core', 'adapters', 'packages'],
};

describe('the layers', () => {
  it('keep A2A out of the adapters: a store is given the task index’s entries, it never computes them, and no adapter runs an A2A use case', () => {
    const stores = readdirSync(join(LAMBDAS, 'adapters'), { recursive: true, encoding: 'utf8' })
      .filter((name) => name.endsWith('.ts'))
      .map((name) => `adapters/${name}`);
    expect(stores).toContain('adapters/local/sqlite/tasks.ts');
    expect(stores).toContain('adapters/http/push-sender.ts');
    const offending = stores.filter((name) => /from\s*['"][^'"]*\/core\/a2a\//.test(readFileSync(join(LAMBDAS, name), 'utf8')));
    expect(offending).toEqual([]);
  });

  it('import only what they may: adapters and doors no provider, no runtime; providers no door', () => {
    const found = crossings();
    expect(found.length).toBeGreaterThan(100);
    const offending = found.filter(({ from, to }) => !MAY_IMPORT[from.split(' ')[0]]?.includes(to)).map(({ from, to }) => `${from} → ${to}`);
    expect(offending).toEqual([]);
  });
});

/** Every relative module a lambdas/ file names: imports and re-exports (types too), dynamic and side-effect imports. */
function importsOf(text: string): string[] {
  return [...text.matchAll(/\b(?:import|export)\s[^'";]*?from\s*['"](\.[^'"]+)['"]|\bimport\s*(?:\(\s*)?['"](\.[^'"]+)['"]/g)].map((m) => m[1] ?? m[2]);
}

/** lambdas/ as a graph: each module and the lambdas/ modules it names (`x.js` is `x.ts`, or `x.tsx`: the console's pages). */
function importGraph(): Map<string, string[]> {
  const names = readdirSync(LAMBDAS, { recursive: true, encoding: 'utf8' }).filter((name) => /\.[cm]?tsx?$|\.[cm]js$/.test(name));
  const known = new Set(names);
  return new Map(
    names.map((name) => {
      const targets = importsOf(readFileSync(join(LAMBDAS, name), 'utf8')).map((spec) => relative(LAMBDAS, join(LAMBDAS, name, '..', spec)));
      const resolved = (target: string) => (known.has(target) ? target : known.has(target.replace(/\.js$/, '.tsx')) ? target.replace(/\.js$/, '.tsx') : target.replace(/\.js$/, '.ts'));
      return [name, [...new Set(targets.map(resolved))].filter((target) => known.has(target))];
    }),
  );
}

/** Each cycle of the graph once, named from its first module back to it (`a.ts → b.ts → a.ts`). */
function cyclesOf(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const cycles = new Set<string>();
  const done = new Set<string>();
  const path: string[] = [];
  const visit = (module: string) => {
    const at = path.indexOf(module);
    if (at >= 0) {
      const cycle = path.slice(at);
      // Named from its least module, so one cycle met from two places is listed once.
      const start = cycle.indexOf([...cycle].sort()[0]);
      const turned = [...cycle.slice(start), ...cycle.slice(0, start)];
      cycles.add([...turned, turned[0]].join(' → '));
      return;
    }
    if (done.has(module)) return;
    path.push(module);
    for (const target of graph.get(module) ?? []) visit(target);
    path.pop();
    done.add(module);
  };
  for (const module of [...graph.keys()].sort()) visit(module);
  return [...cycles].sort();
}

describe('the imports of lambdas/', () => {
  it('form no cycle, type imports included', () => {
    const graph = importGraph();
    expect([...graph.values()].flat().length).toBeGreaterThan(300);
    expect(cyclesOf(graph)).toEqual([]);
  });

  it('would notice a cycle, and name it', () => {
    const graph = new Map(Object.entries({ 'a.ts': ['b.ts'], 'b.ts': ['c.ts'], 'c.ts': ['a.ts', 'd.ts'], 'd.ts': ['d.ts'] }));
    expect(cyclesOf(graph)).toEqual(['a.ts → b.ts → c.ts → a.ts', 'd.ts → d.ts']);
    expect(importsOf(`import type { A } from './a.js';\nexport { b } from "../b.js";\nimport './c.js';\nconst d = await import('./d.js');`)).toEqual([
      './a.js',
      '../b.js',
      './c.js',
      './d.js',
    ]);
  });
});

/** Only the functions' entry points and the apps in bin/ read the environment: everything below them is given it. */
const READS_ENVIRONMENT = [/\bprocess\s*(?:\.\s*env\b|\[\s*['"`]env['"`]\s*\])/, /\{[^}]*\benv\b[^}]*\}\s*=\s*(?:globalThis\.)?process\b/, /\bfrom\s*['"](?:node:)?process['"]/];

describe('the environment', () => {
  const ROOT = join(import.meta.dirname, '..');
  const MAY_READ = [/^bin\//, /^lambdas\/handlers\//];

  it('is read only in bin/ and lambdas/handlers/', () => {
    const modules = ['lambdas', 'lib']
      .flatMap((folder) => readdirSync(join(ROOT, folder), { recursive: true, encoding: 'utf8' }).map((name) => join(folder, name)))
      .filter((name) => /\.[cm]?[tj]s$/.test(name));
    expect(modules.length).toBeGreaterThan(100);
    const offending = modules.filter(
      (name) => !MAY_READ.some((allowed) => allowed.test(name)) && READS_ENVIRONMENT.some((read) => read.test(readFileSync(join(ROOT, name), 'utf8'))),
    );
    expect(offending).toEqual([]);
  });

  it('would notice a module reading it', () => {
    const reads = (text: string) => READS_ENVIRONMENT.some((read) => read.test(text));
    expect(['const a = process.env.A;', "const b = process['env'];", 'const { env } = process;', "import { env } from 'node:process';"].map(reads)).toEqual([
      true,
      true,
      true,
      true,
    ]);
    expect(reads("export const ENV = { runsTable: 'FUNDUQ_RUNS_TABLE' };\nconst env: Environment = {};")).toBe(false);
  });
});
