import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { RunAgentInputSchema } from '@ag-ui/core/schemas';
import { transformSync } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { Hono } from 'hono';
import { parseApiKeys } from '../lambdas/doors/api-keys.js';
import { errorResponse, type DoorErrorCode } from '../lambdas/doors/http-errors.js';
import { ProviderRegistrationSchema } from '../lambdas/doors/link/admin-providers.js';
import { readAgentsFile } from '../lambdas/runtimes/agents-file.js';
import { AgentDefinitionSchema } from '../lambdas/runtimes/providers.js';
import { DEPLOY_SETTINGS, GATEWAY_SETTINGS, LOCAL_SETTINGS } from '../lambdas/runtimes/settings.js';
import { tracingConfig } from '../lambdas/runtimes/tracing.js';
import { readdirSync, readFileSync } from 'node:fs';
import { README, ROOT, manualBlocks, manualFiles, type CodeBlock } from './support/readme.js';

/** A JSON example of the manual: a block of its own, or the body a `curl -d` sends, and where it goes. */
interface Example {
  json: string;
  file: string;
  line: number;
  /** The route a curl body is sent to; for a block, the section it is in. */
  where: string;
}

function examples(blocks: readonly CodeBlock[]): Example[] {
  const found: Example[] = [];
  for (const block of blocks) {
    if (block.lang === 'json') found.push({ json: block.text, file: block.file, line: block.line, where: `section: ${block.section}` });
    if (block.lang !== 'sh') continue;
    for (const command of shellCommands(block.text).filter((words) => words[0] === 'curl')) {
      const body = command[command.indexOf('-d') + 1];
      if (!command.includes('-d') || body === undefined) continue;
      // The URL is the word that names one: a local one, or a stack output (`<AdminUrl>agents/travel`).
      const url = command.find((word) => /^(https?:\/\/|<\w+>)/.test(word)) ?? '';
      found.push({ json: body, file: block.file, line: block.line, where: new URL(url.replace(/^<\w+>/, 'https://aws.example/'), 'https://x').pathname });
    }
  }
  return found;
}

/**
 * A shell block's commands as words, as sh splits them: comments dropped, `\\` continuations
 * joined, single and double quotes kept together (a quoted body may span lines).
 */
function shellCommands(text: string): string[][] {
  const commands: string[][] = [];
  let words: string[] = [];
  let word: string | undefined;
  let quote: string | undefined;
  const end = () => {
    if (word !== undefined) words.push(word);
    word = undefined;
  };
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (quote) {
      if (ch === quote) quote = undefined;
      else word += ch;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      word ??= '';
    } else if (ch === '\\' && text[i + 1] === '\n') {
      i += 1;
    } else if (ch === '#' && word === undefined) {
      while (i < text.length && text[i] !== '\n') i += 1;
      i -= 1;
    } else if (ch === '\n') {
      end();
      if (words.length > 0) commands.push(words);
      words = [];
    } else if (ch === ' ' || ch === '\t') {
      end();
    } else {
      word = (word ?? '') + ch;
    }
  }
  end();
  if (words.length > 0) commands.push(words);
  return commands;
}

const dir = mkdtempSync(join(tmpdir(), 'funduq-readme-'));

/** What each example is checked by: the code that takes it, by where it goes. None may be left over. */
const CHECKS: { where: RegExp; what: string; check: (value: unknown) => Promise<string | undefined> }[] = [
  {
    where: /^\/agui\/[^/]+$/,
    what: 'a RunAgentInput (the AG-UI door)',
    check: async (value) => issue(RunAgentInputSchema.safeParse(value)),
  },
  {
    where: /\/agents\/[^/]+$/,
    what: 'an agent definition (PUT /admin/agents/{id})',
    check: async (value) => issue(AgentDefinitionSchema.safeParse({ id: 'from-the-path', ...(value as object) })),
  },
  {
    where: /^\/admin\/providers\/[^/]+$/,
    what: 'a provider registration (PUT /admin/providers/{id})',
    check: async (value) => issue(ProviderRegistrationSchema.safeParse(value)),
  },
  {
    where: /^section: Usage and budgets$/,
    what: 'an agent definition with prices (PUT /admin/agents/{id}, the agents file)',
    check: async (value) => issue(AgentDefinitionSchema.safeParse(value)),
  },
  {
    where: /^section: Who may speak$/,
    what: 'an API keys file (FUNDUQ_API_KEYS)',
    check: async (value) => {
      const parsed = parseApiKeys(JSON.stringify(value));
      return parsed.ok ? undefined : parsed.message;
    },
  },
  {
    where: /^section: Put an existing AG-UI agent behind funduq$/,
    what: 'an agents file (FUNDUQ_AGENTS_FILE)',
    check: async (value) => {
      const path = join(dir, `agents-${Math.random()}.json`);
      writeFileSync(path, JSON.stringify(value));
      return readAgentsFile(path).then(
        () => undefined,
        (error: unknown) => String(error),
      );
    },
  },
];

function issue(parsed: { success: boolean; error?: { issues: { path: PropertyKey[]; message: string }[] } }): string | undefined {
  if (parsed.success) return undefined;
  const first = parsed.error!.issues[0];
  return `${first.path.map(String).join('.')}: ${first.message}`;
}

/** Where a manual's page is read: the README and every page of docs/, by its path from the root. */
const pages = manualFiles().map((path) => ({ path, name: relative(ROOT, path), text: readFileSync(path, 'utf8') }));

/** A page's prose: its text with fenced code blocks blanked (line numbers kept). */
function prose(text: string): string {
  let inside = false;
  return text
    .split('\n')
    .map((line) => {
      if (/^\s*```/.test(line)) {
        inside = !inside;
        return '';
      }
      return inside ? '' : line;
    })
    .join('\n');
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
const anchor = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
const anchorsOf = (text: string) => new Set(prose(text).split('\n').filter((line) => /^#{1,6} /.test(line)).map((line) => anchor(line.replace(/^#+ /, ''))));

/** The README's failures table: each row's codes, as written (`provider_http_<status>`), and where they are met. */
function failureRows(): { codes: string[]; where: string }[] {
  const readme = readFileSync(README, 'utf8');
  const start = readme.indexOf('\n## Failures\n');
  return readme
    .slice(start, readme.indexOf('\n## ', start + 1))
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map((line) => ({ codes: [...line.split('|')[1].matchAll(/`([^`]+)`/g)].map((m) => m[1]), where: line.split('|')[2] }));
}
const failureTable = () => failureRows().flatMap((row) => row.codes);

/**
 * The codes the code makes, where it makes them: a refusal, a run's end, an error class or
 * response, an event's or a frame's reason; and a code made of a prefix and a status
 * (`provider_http_${status}`), written `provider_http_<status>`.
 */
function madeCodes(): Set<string> {
  const made =
    /(?:refused?|abandon|fail\w*|settle\w*|End|end|RunFailure|LinkRefused)\([^()]*?'([a-z0-9]+(?:_[a-z0-9]+)+)'|errorResponse\(c, '([a-z0-9]+(?:_[a-z0-9]+)*)'|code(?:: | = )'([a-z0-9]+(?:_[a-z0-9]+)+)'|reason: [^\n]*?'([a-z0-9]+(?:_[a-z0-9]+)+)'|`([a-z][a-z0-9]*(?:_[a-z0-9]+)*)_\$\{[^}]*\}`/g;
  const codes = new Set<string>();
  // The gateway's, its commands' (`npm run audit`), and the provider SDK's (what a provider meets).
  for (const folder of ['lambdas', 'bin', 'packages/provider/src']) {
    for (const file of readdirSync(join(ROOT, folder), { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.ts'))) {
      for (const match of readFileSync(join(ROOT, folder, file), 'utf8').matchAll(made)) {
        codes.add(match[5] !== undefined ? `${match[5]}_<status>` : (match[1] ?? match[2] ?? match[3] ?? match[4]));
      }
    }
  }
  return codes;
}

/**
 * Files the manual names in prose that are not in the checkout on purpose: made by a run
 * (`bench/results-quick.json`, the cache).
 */
const NOT_IN_THE_CHECKOUT = new Set(['bench/results-quick.json', 'node_modules/.cache/funduq', 'node_modules/.cache/funduq-aws-box/']);
/** The top folders a cited path may start from: the root's, and lambdas/'s (`core/relay.ts`). */
const FROM_ROOT = ['bin', 'lib', 'lambdas', 'packages', 'bench', 'test', 'docs', 'node_modules'];
const FROM_LAMBDAS = ['core', 'doors', 'adapters', 'providers', 'runtimes', 'handlers'];

describe('the manual (the README and docs/)', () => {
  it('has a README a newcomer reads in minutes: at most 250 lines', () => {
    expect(readFileSync(README, 'utf8').trimEnd().split('\n').length).toBeLessThanOrEqual(250);
  });

  it('cites only the repository: no page outside it (../shared) is named', () => {
    expect(pages.filter((page) => page.text.includes('../shared')).map((page) => page.name)).toEqual([]);
  });

  it('links only to pages and headings that exist', () => {
    const broken: string[] = [];
    for (const page of pages) {
      for (const [, target] of prose(page.text).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target)) continue;
        const [file, hash] = target.split('#');
        const path = file === '' ? page.path : join(dirname(page.path), file);
        if (!existsSync(path)) broken.push(`${page.name}: ${target} (no file)`);
        else if (hash !== undefined && path.endsWith('.md') && !anchorsOf(readFileSync(path, 'utf8')).has(hash)) broken.push(`${page.name}: ${target} (no heading)`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('names only files that exist', () => {
    const missing: string[] = [];
    for (const page of pages) {
      for (const [, cited] of prose(page.text).matchAll(/`([\w.-]+(?:\/[\w.-]+)+\/?)`/g)) {
        const top = cited.split('/')[0];
        const path = FROM_ROOT.includes(top) ? cited : FROM_LAMBDAS.includes(top) ? `lambdas/${cited}` : undefined;
        if (path === undefined || NOT_IN_THE_CHECKOUT.has(path)) continue;
        if (!existsSync(join(ROOT, path))) missing.push(`${page.name}: ${cited}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('has JSON examples that are each accepted as written by what takes them', async () => {
    const all = examples(manualBlocks());
    expect(all.length).toBeGreaterThanOrEqual(7);
    const verdicts: { file: string; line: number; where: string; refused: string | undefined }[] = [];
    try {
      for (const example of all) {
        const value: unknown = JSON.parse(example.json);
        const check = CHECKS.find((c) => c.where.test(example.where));
        expect(check, `${example.file} line ${example.line}: a JSON example for ${example.where} that no check here knows`).toBeDefined();
        verdicts.push({ file: example.file, line: example.line, where: example.where, refused: await check!.check(value) });
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(verdicts.filter((v) => v.refused !== undefined)).toEqual([]);
    for (const { what } of CHECKS) expect(verdicts.some((v) => CHECKS.find((c) => c.where.test(v.where))?.what === what), what).toBe(true);
  });

  it('has JavaScript examples that each parse, and each is run by a test or is a Lambda handler', () => {
    // Run as written: the tour's and the push try-out's by test/e2e/npm-start.test.ts, the provider's
    // by test/packages/provider/tarball.test.ts. A Lambda handler needs Lambda's runtime (`awslambda`).
    const run = ['A 30-second tour', 'Try it on one machine (two minutes)', 'Put an agent behind funduq without opening a port', 'Host an agent as a Lambda function'];
    const blocks = manualBlocks().filter((block) => block.lang === 'js');
    expect(blocks.length).toBeGreaterThanOrEqual(5);
    for (const block of blocks) {
      expect(run, `${block.file} line ${block.line}`).toContain(block.section);
      expect(() => transformSync(block.text, { loader: 'js', format: 'esm' }), `${block.file} line ${block.line}`).not.toThrow();
    }
  });

  it('has a row in a settings table for every setting npm start reads and every CDK context key', () => {
    const rows = pages
      .flatMap((page) => page.text.split('\n'))
      .filter((line) => line.startsWith('| `'))
      .map((line) => line.split('|')[1]);
    const local = Object.values({ ...GATEWAY_SETTINGS, ...LOCAL_SETTINGS }).map((setting) => setting.env!);
    const context = Object.values({ ...GATEWAY_SETTINGS, ...DEPLOY_SETTINGS })
      .map((setting) => setting.context)
      .filter((key): key is string => key !== undefined);
    // The standard OTEL_* variables tracing reads (docs/traces.md), as its parser asks for them.
    const tracing: string[] = [];
    tracingConfig((name) => void tracing.push(name));
    expect(tracing).toContain('OTEL_EXPORTER_OTLP_ENDPOINT');
    const missing = [...local, ...context, ...tracing].filter((name) => !rows.some((row) => row.includes(`\`${name}\``)));
    expect(missing).toEqual([]);
    // And every setting an example's command line gives (`cdk deploy -c key=value`, `NAME=value npm start`) is one.
    const given = manualBlocks()
      .filter((block) => block.lang === 'sh')
      .flatMap((block) => shellCommands(block.text))
      .flatMap((words) => [
        ...words.flatMap((word, i) => (word === '-c' && words[i + 1] ? [words[i + 1].split('=')[0]] : [])),
        ...(words.includes('npm') && words.includes('start') ? words.slice(0, words.indexOf('npm')).map((word) => word.split('=')[0]) : []),
      ]);
    expect(given.length).toBeGreaterThan(0);
    expect(given.filter((name) => !context.includes(name) && !local.includes(name) && !tracing.includes(name))).toEqual([]);
  });

  it('names only environment variables the code reads or sets', () => {
    const code = ['bin', 'lib', 'lambdas', 'packages/provider/src', 'test', 'bench']
      .flatMap((folder) => readdirSync(join(ROOT, folder), { recursive: true, encoding: 'utf8' }).filter((name) => /\.(ts|mts|mjs|cjs)$/.test(name)).map((name) => join(ROOT, folder, name)))
      .concat(join(ROOT, 'vitest.config.ts'))
      .filter((path) => !path.endsWith('readme.test.ts'))
      .map((path) => readFileSync(path, 'utf8'))
      .join('\n');
    const named = new Set(pages.flatMap((page) => [...page.text.matchAll(/\b(FUNDUQ_[A-Z0-9_]*[A-Z0-9]|FUZZ_[A-Z]+)\b/g)].map((m) => m[1])));
    expect(named.size).toBeGreaterThan(20);
    expect([...named].filter((name) => !code.includes(name))).toEqual([]);
  });

  it("names in the README's failures table every code a caller, an agent, a provider or an operator can meet, and no other", () => {
    // Reported under another code: a store held by another process is the data dir in use.
    const reportedAs: Record<string, string> = { store_locked: 'data_dir_in_use' };
    const codes = madeCodes();
    expect(codes.size).toBeGreaterThan(50);
    const table = failureTable();
    expect(table.filter((code) => !codes.has(code))).toEqual([]);
    // A row `provider_http_<status>` names each code of that prefix and a status (`provider_http_502`).
    const named = (code: string) => table.some((row) => row === code || (row.endsWith('_<status>') && new RegExp(`^${row.replace('<status>', '')}\\d{3}$`).test(code)));
    expect([...codes].filter((code) => !named(reportedAs[code] ?? code))).toEqual([]);
  });

  it("gives in the README's failures table the HTTP status each door answers a code with", async () => {
    const app = new Hono().get('/:code', (c) => errorResponse(c, c.req.param('code') as DoorErrorCode, 'said'));
    const rows = failureRows().filter((row) => /^\s*`\d{3}`/.test(row.where));
    expect(rows.length).toBeGreaterThan(15);
    const wrong: string[] = [];
    for (const { codes, where } of rows) {
      const status = Number(/`(\d{3})`/.exec(where)![1]);
      for (const code of codes) {
        const answered = (await app.request(`/${code}`)).status;
        if (answered !== status) wrong.push(`${code}: the README says ${status}, the doors answer ${answered}`);
      }
    }
    expect(wrong).toEqual([]);
  });
});
