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
    .filter((name) => name.endsWith('.ts'))
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
  it('import only what they may: adapters and doors no provider, no runtime; providers no door', () => {
    const found = crossings();
    expect(found.length).toBeGreaterThan(100);
    const offending = found.filter(({ from, to }) => !MAY_IMPORT[from.split(' ')[0]]?.includes(to)).map(({ from, to }) => `${from} → ${to}`);
    expect(offending).toEqual([]);
  });
});
