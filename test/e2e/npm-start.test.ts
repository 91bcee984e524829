import { execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/core-harness.js';
import { ClientFactory } from '@a2a-js/sdk/client';
import { asTask, artifactTexts, send, userMessage as a2aMessage } from '../support/a2a.js';
import { aguiAgent, assistantText, readFirstSse, readSse, userMessage } from '../support/gateway.js';
import { manualBlocks } from '../support/readme.js';
import { spawnGateway, startChildGateway } from '../support/child-gateway.js';

const ROOT = join(import.meta.dirname, '../..');
const dataDir = mkdtempSync(join(tmpdir(), 'funduq-e2e-'));
const children: ChildProcess[] = [];

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

function spawnOnDataDir(env: Record<string, string> = {}): ChildProcess {
  const child = spawnGateway({ env: { FUNDUQ_DATA_DIR: dataDir, ...env } });
  children.push(child);
  return child;
}

/** Starts the gateway as `npm start` does (the same entry point), and waits for its URL. */
async function start(env: Record<string, string> = {}): Promise<{ url: string; child: ChildProcess; output: () => string }> {
  const { url, child, output } = await startChildGateway({ env: { FUNDUQ_DATA_DIR: dataDir, ...env } });
  children.push(child);
  return { url, child, output };
}

/** A start expected to fail: its exit code and what it printed, line by line (the SDK's Node notice aside). */
async function failedStart(env: Record<string, string> = {}): Promise<{ code: number | null; lines: string[] }> {
  const child = spawnOnDataDir(env);
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { code, lines: output.split('\n').filter((line) => line.trim() !== '') };
}

async function view(url: string, threadId: string) {
  return (await (await fetch(`${url}/threads/${threadId}`)).json()) as {
    runs: { runId: string; status: string; reason?: string }[];
    activeRun?: { runId: string };
    queue: unknown[];
  };
}

describe('npm start', () => {
  it('serves the demo agent to the stock client, and a killed gateway loses nothing on restart', async () => {
    const first = await start();
    const hello = aguiAgent(first, 'e2e-hello');
    hello.messages = [userMessage('hello from e2e')];
    expect(assistantText((await hello.runAgent()).newMessages)).toEqual(['echo: hello from e2e']);

    // A long run with two more queued behind it, then SIGKILL while it streams.
    const threadId = 'e2e-crash';
    const post = (runId: string, text: string) =>
      fetch(`${first.url}/agui/demo`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ threadId, runId, messages: [userMessage(text)] }),
      });
    const long = await post('crash-long', '/slow 600');
    const seenBeforeKill = await readFirstSse(long, 4);
    // Each POST answers (headers) once its run is accepted, so awaiting them fixes the arrival order.
    expect((await post('crash-next-1', 'next one')).status).toBe(200);
    expect((await post('crash-next-2', 'and the one after')).status).toBe(200);
    await eventually(async () => expect((await view(first.url, threadId)).queue).toHaveLength(2));
    first.child.kill('SIGKILL');
    await new Promise((resolve) => first.child.once('exit', resolve));

    const second = await start();
    expect(second.output()).toContain('orphaned_by_restart');
    await eventually(async () => {
      const runs = (await view(second.url, threadId)).runs;
      expect(runs.map((r) => [r.runId, r.status, r.reason ?? null])).toEqual([
        ['crash-long', 'failed', 'orphaned_by_restart'],
        ['crash-next-1', 'completed', null],
        ['crash-next-2', 'completed', null],
      ]);
    }, 15_000);

    // The client of the killed run resumes from the last event it saw: what was stored after it,
    // then the RUN_ERROR; with what it saw before, that is the whole log, each event once, in order.
    const lastSeen = seenBeforeKill.at(-1)!.id!;
    const replay = await readSse(await fetch(`${second.url}/agui/demo/runs/crash-long/events`, { headers: { 'Last-Event-ID': lastSeen } }));
    expect(replay.events[0].id).toBe(String(Number(lastSeen) + 1));
    expect(replay.events.at(-1)?.data).toMatchObject({ type: 'RUN_ERROR', code: 'orphaned_by_restart' });
    const whole = await readSse(await fetch(`${second.url}/agui/demo/runs/crash-long/events`));
    expect([...seenBeforeKill, ...replay.events]).toEqual(whole.events);
    expect(whole.events.map((event) => event.id)).toEqual(whole.events.map((_, i) => String(i + 1)));
    // The clients of the queued runs lost their connection with the gateway; they read their runs whole.
    for (const runId of ['crash-next-1', 'crash-next-2']) {
      const { events } = await readSse(await fetch(`${second.url}/agui/demo/runs/${runId}/events`, { headers: { 'Last-Event-ID': '0' } }));
      expect(events.map((event) => event.id)).toEqual(events.map((_, i) => String(i + 1)));
      expect(events.map((event) => event.data.type)).toEqual(expect.arrayContaining(['RUN_STARTED', 'RUN_FINISHED']));
      expect(events.at(-1)?.data.type).toBe('RUN_FINISHED');
    }
    const thread = await (await fetch(`${second.url}/threads/e2e-hello`)).json();
    expect(thread.messages.map((m: { content: string }) => m.content)).toEqual(['hello from e2e', 'echo: hello from e2e']);
    second.child.kill('SIGTERM');
    await new Promise((resolve) => second.child.once('exit', resolve));
  }, 90_000);

  it('says in one line that the data dir is in use, and by which process, when a second gateway starts on it, and exits non-zero', async () => {
    const first = await start();
    try {
      const second = await failedStart();
      expect(second.code).not.toBe(0);
      expect(second.lines).toEqual([
        `funduq: could not start: the data dir ${dataDir} is in use by process ${first.child.pid} (a funduq started ${second.lines[0]?.match(/started (\S+)\)/)?.[1]}): stop it, or set FUNDUQ_DATA_DIR to another directory`,
      ]);
      // The first is untouched.
      expect((await fetch(`${first.url}/healthz`)).status).toBe(200);
    } finally {
      first.child.kill('SIGTERM');
      await new Promise((resolve) => first.child.once('exit', resolve));
    }
  }, 60_000);

  it('says in one line that the port is taken when another process listens on it, and exits non-zero', async () => {
    const first = await start();
    const otherDir = mkdtempSync(join(tmpdir(), 'funduq-e2e-other-'));
    try {
      const port = new URL(first.url).port;
      const second = await failedStart({ PORT: port, FUNDUQ_DATA_DIR: otherDir });
      expect(second.code).not.toBe(0);
      expect(second.lines).toEqual([
        `funduq: could not start: port ${port} on 127.0.0.1 is taken by another process: stop it, or set PORT to another port (0 picks a free one)`,
      ]);
    } finally {
      first.child.kill('SIGTERM');
      await new Promise((resolve) => first.child.once('exit', resolve));
      rmSync(otherDir, { recursive: true, force: true });
    }
  }, 60_000);

  it('warns that it is in open mode without FUNDUQ_API_KEYS, and refuses to start with a bad keys file, naming it and the field', async () => {
    const open = await start();
    expect(open.output()).toContain('open mode');
    open.child.kill('SIGTERM');
    await new Promise((resolve) => open.child.once('exit', resolve));

    const file = join(dataDir, 'keys.json');
    writeFileSync(file, JSON.stringify({ 'key-0123456789': { principal: 'alice' } }));
    const child = spawnOnDataDir({ FUNDUQ_API_KEYS: file });
    let output = '';
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).not.toBe(0);
    expect(output).toContain(file);
    expect(output).toContain('tenant: Required');
    expect(output).not.toContain('key-0123456789');
  }, 60_000);

  it("prints an A2A URL the stock client takes as it is, and the manual's client snippets (the README's tour, docs/doors.md's push try-out) run against it as written", async () => {
    // As docs/doors.md's push try-out starts it.
    const gateway = await start({ FUNDUQ_PUSH_ALLOW_LOOPBACK: 'true', FUNDUQ_PUSH_ALLOW_HTTP: 'true' });
    try {
      expect(gateway.output()).toContain('warning: FUNDUQ_PUSH_ALLOW_LOOPBACK is on');
      expect(gateway.output()).toContain('warning: FUNDUQ_PUSH_ALLOW_HTTP is on');
      const printed = /A2A\s+(http:\/\/\S+)/.exec(gateway.output())?.[1];
      expect(printed).toBe(`${gateway.url}/a2a/demo/`);
      const client = await new ClientFactory().createFromUrl(printed!);
      expect(artifactTexts(asTask(await client.sendMessage(send(a2aMessage('hello from the banner')))))).toEqual(['echo: hello from the banner']);

      // Each JavaScript snippet as a user runs it: a .mjs file of its own, beside the project's node_modules.
      const snippets = manualBlocks().filter((block) => block.lang === 'js' && block.text.includes('http://127.0.0.1:8787/'));
      expect(snippets.map((block) => block.section)).toEqual(expect.arrayContaining(['A 30-second tour', 'Try it on one machine (two minutes)']));
      expect(snippets).toHaveLength(3);
      const dir = mkdtempSync(join(ROOT, 'node_modules', '.readme-'));
      try {
        for (const [i, snippet] of snippets.entries()) {
          const file = join(dir, `snippet-${i}.mjs`);
          writeFileSync(file, snippet.text.replaceAll('http://127.0.0.1:8787', gateway.url));
          // What a snippet says on stderr (the push try-out's progress) stays with it: a failure shows it in its error.
          const said = execFileSync(process.execPath, [file], { encoding: 'utf8', timeout: 30_000, stdio: ['ignore', 'pipe', 'pipe'] });
          // Each snippet ends with a console.log whose comment says what it prints.
          const expected = /\/\/ (.+)$/.exec(snippet.text.trim().split('\n').at(-1)!)?.[1].replace(/^"|"$/g, '');
          expect({ line: snippet.line, said: said.trim() }).toEqual({ line: snippet.line, said: expected });
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    } finally {
      gateway.child.kill('SIGTERM');
      await new Promise((resolve) => gateway.child.once('exit', resolve));
    }
  }, 60_000);
});
