import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/core-harness.js';
import { aguiAgent, assistantText, readFirstSse, readSse, userMessage } from '../support/gateway.js';

const ROOT = join(import.meta.dirname, '../..');
const dataDir = mkdtempSync(join(tmpdir(), 'funduq-e2e-'));
const children: ChildProcess[] = [];

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

function spawnGateway(env: Record<string, string> = {}): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bin/local.ts'], {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', FUNDUQ_DATA_DIR: dataDir, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  return child;
}

/** Starts the gateway as `npm start` does (the same entry point), and waits for its URL. */
async function start(): Promise<{ url: string; child: ChildProcess; output: () => string }> {
  const child = spawnGateway();
  let output = '';
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no URL within 30 s:\n${output}`)), 30_000);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout!.on('data', read);
    child.stderr!.on('data', read);
    child.on('exit', (code) => reject(new Error(`exited ${code}:\n${output}`)));
  });
  return { url, child, output: () => output };
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

  it('warns that it is in open mode without FUNDUQ_API_KEYS, and refuses to start with a bad keys file, naming it and the field', async () => {
    const open = await start();
    expect(open.output()).toContain('open mode');
    open.child.kill('SIGTERM');
    await new Promise((resolve) => open.child.once('exit', resolve));

    const file = join(dataDir, 'keys.json');
    writeFileSync(file, JSON.stringify({ 'key-0123456789': { principal: 'alice' } }));
    const child = spawnGateway({ FUNDUQ_API_KEYS: file });
    let output = '';
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).not.toBe(0);
    expect(output).toContain(file);
    expect(output).toContain('tenant: Required');
    expect(output).not.toContain('key-0123456789');
  }, 60_000);
});
