import { builtinModules } from 'node:module';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const PACKAGE = join(import.meta.dirname, '../../../packages/provider');
const SRC = join(PACKAGE, 'src');
const { dependencies } = JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };

/** Every module a source names: static imports, re-exports and dynamic imports. */
function specifiers(text: string): string[] {
  return [...text.matchAll(/(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\s*\(\s*['"]([^'"]+)['"]\s*\)|import\s+['"]([^'"]+)['"]/g)].map((m) => m[1] ?? m[2] ?? m[3]);
}

/** What a source of `file` (a path under src/) may not import: outside the package, or a package it does not declare. */
function outside(file: string, spec: string): boolean {
  if (spec.startsWith('.')) return relative(SRC, join(SRC, file, '..', spec)).startsWith('..');
  if (spec.startsWith('node:') || builtinModules.includes(spec)) return false;
  const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0];
  return !(name in dependencies);
}

describe('the provider package’s sources', () => {
  const files = readdirSync(SRC, { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.ts'));

  it('import nothing outside the package: node builtins and its declared dependencies only', () => {
    expect(files).toEqual(expect.arrayContaining(['index.ts', 'wire.ts', 'connect.ts', 'ed25519.ts', 'cli.ts']));
    const found = files.flatMap((file) => specifiers(readFileSync(join(SRC, file), 'utf8')).map((spec) => ({ file, spec })));
    expect(found.length).toBeGreaterThan(15);
    expect(found.filter(({ file, spec }) => outside(file, spec)).map(({ file, spec }) => `${file}: ${spec}`)).toEqual([]);
  });

  it('would notice an import of the gateway, of a package it does not declare, or a dynamic one', () => {
    const text = `import type { Agent } from '../../../lambdas/core/model.js';\nimport { Hono } from 'hono';\nconst x = await import('@aws-sdk/client-sqs');\nimport { z } from 'zod';\nimport { readFileSync } from 'node:fs';\nexport * from './wire.js';`;
    expect(specifiers(text).map((spec) => outside('cli.ts', spec))).toEqual([true, true, true, false, false, false]);
  });
});
