import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeyPair } from '../../../packages/provider/src/index.js';
import type { LocalGateway } from '../../../lambdas/runtimes/local.js';
import { eventually } from '../../support/core-harness.js';
import { aguiAgent, assistantText, readSse, startTestGateway, userMessage } from '../../support/gateway.js';
import { startHeldAgent, type HeldAgent } from '../../support/held-agent.js';
import { registerProvider } from '../../support/link.js';

const ROOT = join(import.meta.dirname, '../../..');
/** The command from its sources (the tarball test runs the built one, as installed). */
const CLI = join(ROOT, 'packages/provider/src/cli.ts');

let gateway: LocalGateway;
let agent: HeldAgent;
const dir = mkdtempSync(join(tmpdir(), 'funduq-bridge-'));
const keyFile = join(dir, 'provider.key');
const keys = generateKeyPair();

beforeAll(async () => {
  [gateway, agent] = await Promise.all([startTestGateway(), startHeldAgent()]);
  await registerProvider(gateway, 'bridge', { publicKey: keys.publicKey, agents: ['x'], maxConcurrentRuns: 4 });
  writeFileSync(keyFile, `${keys.privateKey}\n`, { mode: 0o600 });
});
afterAll(async () => {
  await Promise.all([gateway?.close(), agent?.close()]);
  rmSync(dir, { recursive: true, force: true });
});

/** `funduq-provider` in a process of its own, as a provider's machine runs it. */
function bridge(args: string[]) {
  const child = spawn(process.execPath, ['--import', 'tsx', CLI, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, exited, out: () => out, err: () => err };
}

const linkArgs = (providerId = 'bridge') => ['--url', gateway.link.url, '--provider-id', providerId, '--key-file', keyFile, '--funduq-key', gateway.link.publicKey];

describe('funduq-provider, the bridge', () => {
  it("relays a stock AG-UI HTTP agent's run whole, with its headers and the caller's trace context, and closes its link on SIGTERM", async () => {
    const running = bridge([...linkArgs(), '--agent', `x=${agent.url}`, '--header', 'x:Authorization=Bearer from-the-bridge', '--max-concurrent-runs', '2']);
    try {
      await eventually(() => expect(running.out(), running.err()).toBe(`serving x on ${gateway.link.url} as provider bridge\n`), 30_000);
      const caller = aguiAgent(gateway, 'through-the-bridge', 'x');
      const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
      caller.headers = { traceparent };
      caller.messages = [userMessage('through the bridge')];
      const run = caller.runAgent();
      // The agent holds the run after RUN_STARTED: what it sent so far is relayed while it runs.
      await eventually(() => expect(agent.received).toHaveLength(1));
      const runId = agent.received[0].runId;
      await eventually(async () => expect(((await (await fetch(`${gateway.url}/threads/through-the-bridge`)).json()) as { activeRun?: { runId: string } }).activeRun?.runId).toBe(runId));
      expect(agent.headers[0]).toMatchObject({ authorization: 'Bearer from-the-bridge', traceparent });
      expect(agent.received[0].messages.at(-1)).toMatchObject({ role: 'user', content: 'through the bridge' });
      agent.release();
      expect(assistantText((await run).newMessages)).toEqual([`done: ${runId}`]);
      const log = await readSse(await fetch(`${gateway.url}/agui/x/runs/${runId}/events`));
      expect(log.events.map((event) => event.data.type)).toEqual(['RUN_STARTED', 'TEXT_MESSAGE_START', 'TEXT_MESSAGE_CONTENT', 'TEXT_MESSAGE_END', 'RUN_FINISHED']);
      expect(log.events[2].data).toMatchObject({ delta: `done: ${runId}` });

      running.child.kill('SIGTERM');
      expect(await running.exited).toBe(0);
      await eventually(async () => expect(await (await fetch(`${gateway.url}/admin/providers/bridge`)).json()).toMatchObject({ linked: false }));
    } finally {
      running.child.kill('SIGKILL');
    }
  }, 60_000);

  it('exits 2 on a bad argument, with one line naming what is wrong and what to do', async () => {
    const [badAgent, noKey, noHeaderAgent, help] = [
      bridge([...linkArgs(), '--agent', 'x']),
      bridge([...linkArgs().slice(0, 4), '--key-file', join(dir, 'absent.key'), ...linkArgs().slice(6), '--agent', `x=${agent.url}`]),
      bridge([...linkArgs(), '--agent', `x=${agent.url}`, '--header', 'y:Authorization=Bearer t']),
      bridge(['--help']),
    ];
    // A value that begins with "-" (a base64url key does, one in 64) is the option's value, not an option.
    const dashed = bridge([...linkArgs().slice(0, 6), '--funduq-key', '-not-a-key', '--agent', `x=${agent.url}`]);
    expect(await dashed.exited).toBe(2);
    expect(dashed.err()).toBe("funduq-provider: --funduq-key is not an Ed25519 public key: give funduq's, as npm start prints it (GET /admin/link answers it)\n");
    expect(await badAgent.exited).toBe(2);
    expect(badAgent.err()).toBe('funduq-provider: --agent x is not <name>=<url>: name the agent and its AG-UI endpoint, as in --agent research=http://127.0.0.1:8000/agent\n');
    expect(await noKey.exited).toBe(2);
    expect(noKey.err()).toBe(`funduq-provider: cannot read the key file ${join(dir, 'absent.key')} (ENOENT): make one with funduq-provider keygen --out ${join(dir, 'absent.key')}\n`);
    expect(await noHeaderAgent.exited).toBe(2);
    expect(noHeaderAgent.err()).toBe('funduq-provider: --header y:Authorization=Bearer t names no agent given with --agent: the part before ":" is the agent\'s name\n');
    expect(await help.exited).toBe(0);
    expect(help.out()).toMatch(/^Usage:\n {2}funduq-provider --url <link> --provider-id <id>/);
  }, 60_000);

  it('exits 1 naming link_unknown_provider when funduq refuses the link', async () => {
    const refused = bridge([...linkArgs('stranger'), '--agent', `x=${agent.url}`]);
    expect(await refused.exited).toBe(1);
    expect(refused.err()).toBe('funduq-provider: link_unknown_provider: no provider "stranger" is registered: an admin registers it with PUT /admin/providers/stranger\n');
    expect(refused.out()).toBe('');
  }, 60_000);
});
