import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../..');
const CORE = join(ROOT, 'lambdas/core');
const files = readdirSync(CORE, { recursive: true, encoding: 'utf8' })
  .filter((name) => name.endsWith('.ts'))
  .map((name) => ({ name, text: readFileSync(join(CORE, name), 'utf8') }));

/** The core may import itself and the AG-UI protocol's own types and schemas; nothing else. */
const ALLOWED = [/^lambdas\/core\//, /^@ag-ui\/core(\/schemas)?$/];
/**
 * ...and, with `import type`, the A2A SDK's types and the link's frames (the provider SDK's wire,
 * whose schemas are zod's): nothing of either runs in the core.
 */
const TYPES_ONLY = [/^@a2a-js\/sdk$/, /^packages\/provider\/src\/wire\.js$/];

interface Import {
  /** A package's name, or a relative import as its path from the repository's root. */
  spec: string;
  typeOnly: boolean;
}

function imports(text: string, from = 'lambdas/core/x.ts'): Import[] {
  return [...text.matchAll(/(?:import|export)(\s+type\b)?\s[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g)].map((m) => {
    const spec = m[2] ?? m[3];
    return { spec: spec.startsWith('.') ? relative(ROOT, join(ROOT, from, '..', spec)) : spec, typeOnly: m[1] !== undefined };
  });
}

function forbidden({ spec, typeOnly }: Import): boolean {
  if (ALLOWED.some((pattern) => pattern.test(spec))) return false;
  return !(typeOnly && TYPES_ONLY.some((pattern) => pattern.test(spec)));
}

describe('the core', () => {
  it('has modules to check', () => {
    expect(files.length).toBeGreaterThan(10);
  });

  it('imports nothing network, AWS, HTTP-framework or runtime related', () => {
    const offending = files.flatMap(({ name, text }) =>
      imports(text, join('lambdas/core', name))
        .filter(forbidden)
        .map(({ spec }) => `${name}: ${spec}`),
    );
    expect(offending).toEqual([]);
  });

  it('reads no environment and makes no request of its own', () => {
    const offending = files.filter(({ text }) => /process\.env|\bprocess\.|(^|[^.\w])fetch\(|globalThis\.fetch|Date\.now\(\)|new Date\(\)/.test(text));
    expect(offending.map((f) => f.name)).toEqual([]);
  });

  it('would notice a forbidden import', () => {
    expect(imports(`import { x } from 'node:http';\nimport y from "@aws-sdk/client-sqs";`).map((i) => i.spec)).toEqual([
      'node:http',
      '@aws-sdk/client-sqs',
    ]);
  });

  it('takes the link\'s frames from the provider SDK as types only, and nothing else of it', () => {
    const found = imports(
      `import type { ToProviderFrame } from '../../../packages/provider/src/wire.js';\nimport { ToProviderSchema } from '../../../packages/provider/src/wire.js';\nimport type { ProviderLink } from '../../../packages/provider/src/connect.js';\nimport { live } from './deps.js';`,
      'lambdas/core/link/x.ts',
    );
    expect(found.map(forbidden)).toEqual([false, true, true, false]);
  });

  it('allows the A2A SDK only as types', () => {
    const found = imports(
      `import type { Task } from '@a2a-js/sdk';\nimport { TaskState } from '@a2a-js/sdk';\nimport { type Part } from '@a2a-js/sdk';\nimport type { X } from '@a2a-js/sdk/server';`,
    );
    expect(found.map(forbidden)).toEqual([false, true, true, true]);
  });
});

describe('the adapters', () => {
  const ADAPTERS = join(import.meta.dirname, '../../lambdas/adapters');
  const adapters = readdirSync(ADAPTERS, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.ts'))
    .map((name) => ({ name, text: readFileSync(join(ADAPTERS, name), 'utf8') }));

  it('import no door, provider or runtime: the runtimes compose them, not the other way round', () => {
    expect(adapters.length).toBeGreaterThan(10);
    const offending = adapters.flatMap(({ name, text }) =>
      imports(text, join('lambdas/adapters', name))
        .filter(({ spec }) => /^lambdas\/(doors|providers|runtimes|handlers)\//.test(spec))
        .map(({ spec }) => `${name}: ${spec}`),
    );
    expect(offending).toEqual([]);
  });
});
