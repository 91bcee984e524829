import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AgentsFileError, readAgentsFile } from '../../lambdas/runtimes/agents-file.js';
import { DEMO_AGENT } from '../../lambdas/runtimes/local.js';
import { NPM_START } from '../support/child-gateway.js';
import { aguiAgent, startTestGateway, userMessage } from '../support/gateway.js';

const ROOT = join(import.meta.dirname, '../..');
const SECRET = 'sk-file-secret-51e0';
const dir = mkdtempSync(join(tmpdir(), 'funduq-agents-file-'));
let files = 0;

afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(content: unknown): string {
  const path = join(dir, `agents-${++files}.json`);
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  return path;
}

const GOOD = {
  agents: [
    {
      id: 'research',
      url: 'http://127.0.0.1:9/agent',
      description: 'answers with sources',
      headers: { Authorization: `Bearer ${SECRET}` },
      skills: [{ id: 'cite', name: 'Cite', description: 'finds sources', tags: ['research'], examples: ['who said it?'] }],
      timeoutSeconds: 120,
    },
    { id: 'plain', url: 'https://agent.example/run', description: 'the defaults' },
  ],
};

async function failureOf(path: string): Promise<AgentsFileError> {
  const error = await readAgentsFile(path).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AgentsFileError);
  return error as AgentsFileError;
}

describe('the agents file', () => {
  it('reads each definition into an agui-http agent with the defaults filled in', async () => {
    const agents = await readAgentsFile(file(GOOD));

    expect(agents).toEqual([
      {
        id: 'research',
        description: 'answers with sources',
        provider: { kind: 'agui-http', url: 'http://127.0.0.1:9/agent', headers: { Authorization: `Bearer ${SECRET}` } },
        skills: GOOD.agents[0].skills,
        takesInterjections: false,
        timeoutSeconds: 120,
        idleTimeoutSeconds: 300,
        status: 'enabled',
      },
      {
        id: 'plain',
        description: 'the defaults',
        provider: { kind: 'agui-http', url: 'https://agent.example/run' },
        takesInterjections: false,
        timeoutSeconds: 900,
        idleTimeoutSeconds: 300,
        status: 'enabled',
      },
    ]);
  });

  it.each([
    ['agents.1.url', { agents: [GOOD.agents[0], { ...GOOD.agents[1], url: 'file:///etc/passwd' }] }],
    ['agents.0.id', { agents: [{ ...GOOD.agents[1], id: 'not/an/id' }] }],
    ['agents.0.headers.Authorization', { agents: [{ ...GOOD.agents[0], headers: { Authorization: 42 } }] }],
    // "…" cannot be carried in an HTTP header: every run would fail provider_not_configured.
    ['agents.0.headers.Authorization', { agents: [{ ...GOOD.agents[0], headers: { Authorization: `Bearer ${SECRET}…` } }] }],
    ['agents.0.headers.X-Key ', { agents: [{ ...GOOD.agents[0], headers: { 'X-Key ': SECRET } }] }],
    ['agents.1.id', { agents: [GOOD.agents[1], GOOD.agents[1]] }],
    ['agents', { agent: [] }],
  ])('reports a bad file with its path and the field %s', async (field, content) => {
    const path = file(content);

    const error = await failureOf(path);

    expect(error.message).toContain(path);
    expect(error.message).toContain(`${field}:`);
    expect(error.message).not.toContain(SECRET);
  });

  it('reports a file that is not JSON with its path and where it broke, without quoting it', async () => {
    const path = file(`{\n  "agents": [{ "headers": { "Authorization": "Bearer ${SECRET}" x } }]\n}`);

    const error = await failureOf(path);

    expect(error.message).toContain(path);
    expect(error.message).toMatch(/is not JSON \(line 2, column \d+\)/);
    expect(error.message).not.toContain(SECRET);
  });

  it('reports a file that cannot be read with its path', async () => {
    const path = join(dir, 'missing.json');

    expect((await failureOf(path)).message).toContain(`${path}: cannot be read (ENOENT)`);
  });

  it('registers its agents when the local gateway starts, secrets masked in every read', async () => {
    const gateway = await startTestGateway({ agentsFile: file(GOOD) });
    try {
      const roster = await (await fetch(`${gateway.url}/agents`)).text();
      expect((JSON.parse(roster) as { agents: { id: string }[] }).agents.map((a) => a.id).sort()).toEqual(['demo', 'plain', 'research']);
      const research = await (await fetch(`${gateway.url}/admin/agents/research`)).json();
      expect(research).toMatchObject({ url: 'http://127.0.0.1:9/agent', headers: { Authorization: '***' }, timeoutSeconds: 120 });
      expect(roster).not.toContain(SECRET);
    } finally {
      await gateway.close();
    }
  });

  it('warns at start of a stored agent a definition could not be today, naming it and the field, and its runs fail provider_not_configured', async () => {
    const dataDir = join(dir, `stored-${++files}`);
    const first = await startTestGateway({ dataDir });
    // Stored as a PUT took it before header values were checked as HTTP does.
    await first.store.agents.put({ ...DEMO_AGENT, id: 'legacy', provider: { kind: 'agui-http', url: 'http://127.0.0.1:9/agent', headers: { Authorization: `Bearer ${SECRET}…` } } });
    await first.close();

    const lines: string[] = [];
    const second = await startTestGateway({ dataDir, log: (line) => lines.push(line) });
    try {
      const warnings = lines.filter((line) => line.includes('"legacy"'));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/^warning: .*headers\.Authorization: a header value may hold visible characters up to U\+00FF/);
      expect(warnings[0]).toContain('PUT /admin/agents/legacy');
      expect(lines.join('\n')).not.toContain(SECRET);
      expect(lines.some((line) => line.includes('"demo"'))).toBe(false);

      const agent = aguiAgent(second, 'stored-legacy', 'legacy');
      agent.messages = [userMessage('hello')];
      const errors: string[] = [];
      await agent.runAgent({}, { onRunErrorEvent: ({ event }) => void errors.push(String(event.code)) }).catch(() => undefined);
      expect(errors).toEqual(['provider_not_configured']);
    } finally {
      await second.close();
    }
  });

  it('stops npm start with a non-zero exit that names the file and the field', async () => {
    const path = file({ agents: [{ ...GOOD.agents[0], timeoutSeconds: 'forever' }] });
    const child = spawn(process.execPath, NPM_START, {
      cwd: ROOT,
      env: { ...process.env, PORT: '0', FUNDUQ_DATA_DIR: join(dir, 'data'), FUNDUQ_AGENTS_FILE: path },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));

    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));

    expect(code).not.toBe(0);
    expect(output).toContain(path);
    expect(output).toContain('agents.0.timeoutSeconds');
    expect(output).not.toContain('listening');
    expect(output).not.toContain(SECRET);
  });
});
