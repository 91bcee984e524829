import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RunAgentInputSchema } from '@ag-ui/core/schemas';
import { describe, expect, it } from 'vitest';
import { parseApiKeys } from '../lambdas/doors/api-keys.js';
import { ProviderRegistrationSchema } from '../lambdas/doors/link/admin-providers.js';
import { readAgentsFile } from '../lambdas/runtimes/agents-file.js';
import { AgentDefinitionSchema } from '../lambdas/runtimes/providers.js';
import { DEPLOY_SETTINGS, GATEWAY_SETTINGS, LOCAL_SETTINGS } from '../lambdas/runtimes/settings.js';
import { readdirSync, readFileSync } from 'node:fs';
import { README, readmeBlocks, type CodeBlock } from './support/readme.js';

/** A JSON example of the README: a block of its own, or the body a `curl -d` sends, and where it goes. */
interface Example {
  json: string;
  line: number;
  /** The route a curl body is sent to; for a block, the section it is in. */
  where: string;
}

function examples(blocks: readonly CodeBlock[]): Example[] {
  const found: Example[] = [];
  for (const block of blocks) {
    if (block.lang === 'json') found.push({ json: block.text, line: block.line, where: `section: ${block.section}` });
    if (block.lang !== 'sh') continue;
    for (const command of shellCommands(block.text).filter((words) => words[0] === 'curl')) {
      const body = command[command.indexOf('-d') + 1];
      if (!command.includes('-d') || body === undefined) continue;
      // The URL is the word that names one: a local one, or a stack output (`<AdminUrl>agents/travel`).
      const url = command.find((word) => /^(https?:\/\/|<\w+>)/.test(word)) ?? '';
      found.push({ json: body, line: block.line, where: new URL(url.replace(/^<\w+>/, 'https://aws.example/'), 'https://x').pathname });
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

describe('the README', () => {
  it('has JSON examples that are each accepted as written by what takes them', async () => {
    const all = examples(readmeBlocks());
    expect(all.length).toBeGreaterThanOrEqual(7);
    const verdicts: { line: number; where: string; refused: string | undefined }[] = [];
    try {
      for (const example of all) {
        const value: unknown = JSON.parse(example.json);
        const check = CHECKS.find((c) => c.where.test(example.where));
        expect(check, `README line ${example.line}: a JSON example for ${example.where} that no check here knows`).toBeDefined();
        verdicts.push({ line: example.line, where: example.where, refused: await check!.check(value) });
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(verdicts.filter((v) => v.refused !== undefined)).toEqual([]);
    for (const { what } of CHECKS) expect(verdicts.some((v) => CHECKS.find((c) => c.where.test(v.where))?.what === what), what).toBe(true);
  });

  it('has a row in a settings table for every setting npm start reads and every CDK context key', () => {
    const rows = readFileSync(README, 'utf8')
      .split('\n')
      .filter((line) => line.startsWith('| `'))
      .map((line) => line.split('|')[1]);
    const local = Object.values({ ...GATEWAY_SETTINGS, ...LOCAL_SETTINGS }).map((setting) => setting.env!);
    const context = Object.values({ ...GATEWAY_SETTINGS, ...DEPLOY_SETTINGS })
      .map((setting) => setting.context)
      .filter((key): key is string => key !== undefined);
    const missing = [...local, ...context].filter((name) => !rows.some((row) => row.includes(`\`${name}\``)));
    expect(missing).toEqual([]);
  });

  it('names every code a caller, an agent or an operator can meet', () => {
    const readme = readFileSync(README, 'utf8');
    // Codes are written where they are made: a refusal, a run's end, an error class, an event's or a frame's reason.
    const made = /(?:refuse|abandon|fail\w*|settle\w*|End|end)\([^()]*?'([a-z0-9]+(?:_[a-z0-9]+)+)'|code(?:: | = )'([a-z0-9]+(?:_[a-z0-9]+)+)'|reason: '([a-z0-9]+(?:_[a-z0-9]+)+)'/g;
    // Reported under another code: a store held by another process is the data dir in use.
    const reportedAs: Record<string, string> = { store_locked: 'data_dir_in_use' };
    const codes = new Set<string>();
    // The gateway's, and the provider SDK's (what a provider meets).
    for (const folder of ['lambdas', 'packages/provider/src']) {
      for (const file of readdirSync(folder, { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.ts'))) {
        for (const match of readFileSync(join(folder, file), 'utf8').matchAll(made)) codes.add(match[1] ?? match[2] ?? match[3]);
      }
    }
    expect(codes.size).toBeGreaterThan(30);
    const named = (code: string) => new RegExp(`(?<![\\w-])${code}(?![\\w-])`).test(readme);
    const missing = [...codes].filter((code) => !named(reportedAs[code] ?? code));
    expect(missing).toEqual([]);
  });
});
