import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { FunduqStack, settingsFromContext } from '../../lib/funduq-stack.js';
import { DEPLOY_SETTINGS, GATEWAY_SETTINGS, linkSettings, readSettings, SettingsError } from '../../lambdas/runtimes/settings.js';
import { NPM_START } from '../support/child-gateway.js';
import { harness } from '../support/core-harness.js';
import { useDynalite } from '../support/dynalite.js';

const dynamo = useDynalite();
const ROOT = join(import.meta.dirname, '../..');

/** Runs a command of the project with this Node (`node …args`) and returns its exit code and what it wrote to stderr. */
function run(args: string[], env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, {
      cwd: ROOT,
      env: { ...process.env, NODE_NO_WARNINGS: '1', ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('exit', (code) => resolve({ code, stderr }));
  });
}

const fromEnv = (env: Record<string, string>) => readSettings(GATEWAY_SETTINGS, 'env', (name) => env[name]);
const fromContext = (context: Record<string, string>) => readSettings(GATEWAY_SETTINGS, 'context', (key) => context[key]);

describe('one settings schema', () => {
  it('reads a setting the same from the environment and from CDK context, defaults included', () => {
    expect(fromEnv({ FUNDUQ_THREAD_QUEUE_LIMIT: '0' })).toEqual(fromContext({ threadQueueLimit: '0' }));
    expect(fromEnv({ FUNDUQ_THREAD_QUEUE_LIMIT: '0' }).threadQueueLimit).toBe(0);
    expect(fromEnv({})).toEqual({ threadQueueLimit: 8, tenantBudgetCurrency: 'USD', tenantBudgetPeriod: 'month' });
    expect(fromEnv({ FUNDUQ_TENANT_RUNS_PER_MINUTE: '60' })).toEqual(fromContext({ tenantRunsPerMinute: '60' }));
  });

  it('lets the dispatcher invoke only the Lambda functions agentFunctions names: a wildcard or a qualifier is refused', () => {
    const deploy = (agentFunctions: string) => () => readSettings(DEPLOY_SETTINGS, 'context', (key) => ({ agentFunctions })[key]);
    expect(deploy('travel-agent, 123456789012:function:b, arn:aws:lambda:eu-west-1:210987654321:function:c')().agentFunctions).toEqual([
      'travel-agent',
      '123456789012:function:b',
      'arn:aws:lambda:eu-west-1:210987654321:function:c',
    ]);
    for (const wide of ['*', 'travel-*', 'arn:aws:lambda:*:*:function:*', 'arn:aws:lambda:eu-west-1:210987654321:function:*', 'agent:live']) {
      expect(deploy(wide)).toThrow(`funduq: agentFunctions (-c agentFunctions) must name Lambda functions (names or ARNs, without a qualifier or a wildcard), separated by commas, got "${wide}"`);
    }
  });

  it('refuses a bad value in one line naming the setting, the same wherever it is given', () => {
    const messages = (env: Record<string, string>, context: Record<string, string>) =>
      [() => fromEnv(env), () => fromContext(context)].map((read) => {
        try {
          read();
        } catch (error) {
          expect(error).toBeInstanceOf(SettingsError);
          return (error as Error).message;
        }
        throw new Error('not refused');
      });
    const [queueEnv, queueContext] = messages({ FUNDUQ_THREAD_QUEUE_LIMIT: '-1' }, { threadQueueLimit: '-1' });
    expect(queueEnv).toBe(queueContext);
    expect(queueEnv).toBe('funduq: threadQueueLimit (FUNDUQ_THREAD_QUEUE_LIMIT or -c threadQueueLimit) must be a whole number ≥ 0, got "-1"');
    // A tenant limit of 0 would refuse every run: it is refused itself, never read as "no limit".
    const [rateEnv, rateContext] = messages({ FUNDUQ_TENANT_RUNS_PER_MINUTE: '0' }, { tenantRunsPerMinute: '0' });
    expect(rateEnv).toBe(rateContext);
    expect(rateEnv).toMatch(/tenantRunsPerMinute .* must be a whole number ≥ 1 \(leave it unset for no limit\), got "0"$/);
    expect(() => fromEnv({ FUNDUQ_TENANT_CONCURRENT_RUNS: '0' })).toThrow(/tenantConcurrentRuns/);
    // Each run holding a place is named on its tenant's item, which holds 400 KB on DynamoDB.
    expect(() => fromEnv({ FUNDUQ_TENANT_CONCURRENT_RUNS: '1001' })).toThrow(/tenantConcurrentRuns .* must be a whole number from 1 to 1000 .*, got "1001"$/);
    expect(fromEnv({ FUNDUQ_TENANT_CONCURRENT_RUNS: '1000' }).tenantConcurrentRuns).toBe(1000);
  });

  it('stops npm start and cdk synth with the same message for the same bad value', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'funduq-settings-'));
    try {
      const [started, synthesized] = await Promise.all([
        run(NPM_START, { FUNDUQ_THREAD_QUEUE_LIMIT: '-1', FUNDUQ_DATA_DIR: dataDir, PORT: '0' }),
        run(['--import', 'tsx', 'bin/funduq.ts'], { CDK_CONTEXT_JSON: JSON.stringify({ threadQueueLimit: '-1' }), CDK_OUTDIR: join(dataDir, 'cdk.out') }),
      ]);
      const line = 'funduq: threadQueueLimit (FUNDUQ_THREAD_QUEUE_LIMIT or -c threadQueueLimit) must be a whole number ≥ 0, got "-1"';
      expect(started).toEqual({ code: 2, stderr: `${line}\n` });
      expect(synthesized.code).not.toBe(0);
      expect(synthesized.stderr).toContain(line);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('hands a limit of 0 given as context to every function that accepts runs, as 0', () => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const stack = new FunduqStack(app, 'Funduq', {
      env: { account: '123456789012', region: 'eu-west-1' },
      settings: settingsFromContext((key) => ({ threadQueueLimit: '0' })[key]),
    });
    const functions = Object.values(Template.fromStack(stack).findResources('AWS::Lambda::Function'));
    const limits = functions.map((fn) => fn.Properties.Environment.Variables.FUNDUQ_THREAD_QUEUE_LIMIT);
    // Every function composes the gateway's core, so each is handed the gateway's settings.
    expect(limits).toEqual(functions.map(() => '0'));
    expect(limits).toHaveLength(10);
    expect(fromEnv({ FUNDUQ_THREAD_QUEUE_LIMIT: limits[0] }).threadQueueLimit).toBe(0);
  });

  it('hands the provider link’s clocks given as context to every function, where they set the core’s', () => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const stack = new FunduqStack(app, 'Funduq', {
      env: { account: '123456789012', region: 'eu-west-1' },
      settings: settingsFromContext((key) => ({ linkGraceSeconds: '600', linkUnclaimedSeconds: '90' })[key]),
    });
    const functions = Object.values(Template.fromStack(stack).findResources('AWS::Lambda::Function'));
    const told = functions.map((fn) => fn.Properties.Environment.Variables);
    for (const env of told) expect(linkSettings(fromEnv(env))).toEqual({ graceMs: 600_000, unclaimedMs: 90_000 });
    expect(told).toHaveLength(10);
    // Unset, the core's defaults hold (60 s and 45 s).
    expect(linkSettings(fromEnv({}))).toEqual({});
  });
});

describe('a thread queue limit of 0', () => {
  it('lets no run wait: one arriving while another runs is refused thread_queue_full', async () => {
    const h = await harness(await dynamo.freshStore(), { threadQueueLimit: 0 });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    h.provider.script = async function* (input) {
      yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
      await held;
      yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId };
    };
    expect(await h.send('first')).toMatchObject({ ok: true });
    expect(await h.send('second')).toMatchObject({ ok: false, code: 'thread_queue_full', message: 'thread "thread-1" already has 0 runs waiting' });
    release();
    await h.settled();
    expect(await h.send('third')).toMatchObject({ ok: true });
    await h.settled();
  });
});
