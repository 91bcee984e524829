import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DataDirInUse, DataDirOfDynalite } from '../../lambdas/adapters/local/data-dir.js';
import { ANONYMOUS } from '../../lambdas/core/model.js';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { eventually } from '../support/core-harness.js';
import { aguiAgent, assistantText, startTestGateway, userMessage } from '../support/gateway.js';
import { aPushConfig, anAgent } from '../support/store-fixtures.js';

let dataDir: string;
const running: LocalGateway[] = [];

async function start(store: 'sqlite' | 'dynamodb' = 'sqlite'): Promise<LocalGateway> {
  const gateway = await startTestGateway({ dataDir, store });
  running.push(gateway);
  return gateway;
}

async function stop(gateway: LocalGateway): Promise<void> {
  running.splice(running.indexOf(gateway), 1);
  await gateway.close();
}

async function threadOf(gateway: LocalGateway) {
  const view = await gateway.gateway.threadView('kept', ANONYMOUS);
  if (!view.ok) throw new Error(view.message);
  return view.value;
}

beforeEach(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'funduq-local-'));
});

afterEach(async () => {
  for (const gateway of running.splice(0)) await gateway.close();
  await rm(dataDir, { recursive: true, force: true });
});

describe('the local runtime', () => {
  it.each(['sqlite', 'dynamodb'] as const)('keeps every thread, run, event, agent and push config across a restart (%s)', async (store) => {
    const first = await start(store);
    const agent = aguiAgent(first, 'kept');
    agent.messages = [userMessage('remember me')];
    await agent.runAgent();
    await first.gateway.putAgent(anAgent('research'));
    const [run] = (await threadOf(first)).runs;
    await first.store.pushConfigs.put(aPushConfig(run.runId, 'hook', { tenant: ANONYMOUS.tenant }));
    // The caller may have read the run's end from its record before the settle appended it to the log.
    await eventually(async () => expect((await first.store.runs.get(run.runId))?.closingEvents).toBeUndefined());
    const events = await first.store.events.read(run.runId, 0);
    await stop(first);

    const second = await start(store);
    const view = await threadOf(second);
    expect(view.messages.map((m) => m.content)).toEqual(['remember me', 'echo: remember me']);
    expect(await second.store.events.read(run.runId, 0)).toEqual(events);
    expect(await second.gateway.getAgent('research')).toEqual(anAgent('research'));
    expect(await second.store.pushConfigs.list(run.runId)).toEqual([aPushConfig(run.runId, 'hook', { tenant: ANONYMOUS.tenant })]);
    const again = aguiAgent(second, 'kept');
    again.messages = [...view.messages];
    again.messages.push(userMessage('and again'));
    expect(assistantText((await again.runAgent()).newMessages)).toEqual(['echo: and again']);
  });

  it.each(['sqlite', 'dynamodb'] as const)('refuses a second gateway on a data dir in use, saying so (%s)', async (store) => {
    await start(store);
    await expect(start(store)).rejects.toThrow(DataDirInUse);
    await expect(start(store)).rejects.toThrow(`the data dir ${dataDir} is in use by another process`);
  });

  it('says how to carry on when the default store meets a data dir that dynalite kept', async () => {
    await stop(await start('dynamodb'));

    await expect(start()).rejects.toThrow(DataDirOfDynalite);
    await expect(start()).rejects.toThrow('start with FUNDUQ_STORE=dynamodb to keep using it');
    await stop(await start('dynamodb'));
  });
});
