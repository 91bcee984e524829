import { describe, expect, it } from 'vitest';
import type { Agent } from '../../lambdas/core/model.js';
import { agentForDispatch, RecentAgents } from '../../lambdas/core/recent-agents.js';
import { FakeClock } from '../support/core-harness.js';
import { useStore } from '../support/stores.js';

const stores = useStore();

const agent = (id: string, url = `http://agents.test/${id}`): Agent => ({
  id,
  description: id,
  provider: { kind: 'agui-http', url },
  takesInterjections: false,
  timeoutSeconds: 900,
  idleTimeoutSeconds: 300,
});

describe('RecentAgents', () => {
  it('gives back a definition until it is older than its time, then nothing', () => {
    let now = 1_000;
    const recent = new RecentAgents({ now: () => now }, 2_000);
    recent.remember(agent('a'));
    now += 1_999;
    expect(recent.recent('a')).toEqual(agent('a'));
    now += 1;
    expect(recent.recent('a')).toBeUndefined();
    expect(recent.recent('never-read')).toBeUndefined();
  });

  it('keeps the latest definition read, and forgets one on request', () => {
    const recent = new RecentAgents({ now: () => 0 });
    recent.remember(agent('a'));
    recent.remember(agent('a', 'http://agents.test/moved'));
    expect(recent.recent('a')?.provider).toEqual({ kind: 'agui-http', url: 'http://agents.test/moved' });
    recent.forget('a');
    expect(recent.recent('a')).toBeUndefined();
  });

  it('holds at most a thousand definitions, letting the least recently read go first', () => {
    const recent = new RecentAgents({ now: () => 0 });
    for (let i = 0; i <= 1_000; i++) recent.remember(agent(`agent-${i}`));
    expect(recent.recent('agent-0')).toBeUndefined();
    expect(recent.recent('agent-1')?.id).toBe('agent-1');
    expect(recent.recent('agent-1000')?.id).toBe('agent-1000');
  });
});

describe('the agent a dispatch uses', () => {
  it('is the one read within the last two seconds, then the store\'s again, however often dispatches come', async () => {
    const store = await stores.freshStore();
    const clock = new FakeClock();
    const deps = { store, recentAgents: new RecentAgents(clock) };
    await store.agents.put(agent('a', 'http://agents.test/v1'));
    expect((await agentForDispatch(deps, 'a'))?.provider).toEqual({ kind: 'agui-http', url: 'http://agents.test/v1' });
    // Another process changes the definition; this one keeps dispatching.
    await store.agents.put(agent('a', 'http://agents.test/v2'));
    clock.ms += 1_000;
    expect((await agentForDispatch(deps, 'a'))?.provider).toEqual({ kind: 'agui-http', url: 'http://agents.test/v1' });
    clock.ms += 1_000;
    expect((await agentForDispatch(deps, 'a'))?.provider).toEqual({ kind: 'agui-http', url: 'http://agents.test/v2' });
  });

  it('is read from the store every time without a memory of recent definitions, and is absent once deleted', async () => {
    const store = await stores.freshStore();
    await store.agents.put(agent('b'));
    expect((await agentForDispatch({ store }, 'b'))?.id).toBe('b');
    await store.agents.delete('b');
    expect(await agentForDispatch({ store }, 'b')).toBeUndefined();
  });
});
