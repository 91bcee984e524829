import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const CORE = join(import.meta.dirname, '../../lambdas/core');
const files = readdirSync(CORE, { recursive: true, encoding: 'utf8' })
  .filter((name) => name.endsWith('.ts'))
  .map((name) => ({ name, text: readFileSync(join(CORE, name), 'utf8') }));

/** The core may import itself and the AG-UI protocol's own types and schemas; nothing else. */
const ALLOWED = [/^\.\.?\//, /^@ag-ui\/core(\/schemas)?$/];

function imports(text: string): string[] {
  return [...text.matchAll(/(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g)].map(
    (m) => m[1] ?? m[2],
  );
}

describe('the core', () => {
  it('has modules to check', () => {
    expect(files.length).toBeGreaterThan(10);
  });

  it('imports nothing network, AWS, HTTP-framework or runtime related', () => {
    const offending = files.flatMap(({ name, text }) =>
      imports(text)
        .filter((spec) => !ALLOWED.some((pattern) => pattern.test(spec)))
        .map((spec) => `${name}: ${spec}`),
    );
    expect(offending).toEqual([]);
  });

  it('reads no environment and makes no request of its own', () => {
    const offending = files.filter(({ text }) => /process\.env|\bprocess\.|(^|[^.\w])fetch\(|globalThis\.fetch|Date\.now\(\)|new Date\(\)/.test(text));
    expect(offending.map((f) => f.name)).toEqual([]);
  });

  it('would notice a forbidden import', () => {
    expect(imports(`import { x } from 'node:http';\nimport y from "@aws-sdk/client-sqs";`)).toEqual([
      'node:http',
      '@aws-sdk/client-sqs',
    ]);
  });
});
