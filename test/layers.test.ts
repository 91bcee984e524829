import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const LAMBDAS = join(import.meta.dirname, '../lambdas');

/** Every lambdas/ module's imports of other lambdas/ folders, as `module → folder`. */
function crossings(): { from: string; to: string }[] {
  return readdirSync(LAMBDAS, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.ts'))
    .flatMap((name) => {
      const text = readFileSync(join(LAMBDAS, name), 'utf8');
      const from = name.split('/')[0];
      return [...text.matchAll(/from\s*['"](\.[^'"]+)['"]/g)].map((m) => {
        const target = relative(LAMBDAS, join(LAMBDAS, name, '..', m[1]));
        return { from: `${from} (${name})`, to: target.split('/')[0] };
      });
    });
}

/** Which folders each layer may import: a request flows door → core → ports ← adapters; runtimes compose. */
const MAY_IMPORT: Record<string, string[]> = {
  core: ['core'],
  doors: ['doors', 'core', 'link'],
  adapters: ['adapters', 'core', 'link'],
  // The provider link's wire and SDK: what funduq and providers share.
  link: ['link', 'core'],
  providers: ['providers', 'core'],
  runtimes: ['runtimes', 'core', 'doors', 'adapters', 'providers', 'link'],
  handlers: ['handlers', 'runtimes', 'core', 'adapters'],
};

describe('the layers', () => {
  it('keep A2A out of the record’s stores: a store is given the task index’s entries, it never computes them', () => {
    const stores = ['adapters/local/sqlite', 'adapters/aws/dynamodb/store'].flatMap((folder) =>
      readdirSync(join(LAMBDAS, folder), { encoding: 'utf8' })
        .filter((name) => name.endsWith('.ts'))
        .map((name) => `${folder}/${name}`),
    );
    expect(stores).toContain('adapters/local/sqlite/tasks.ts');
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
