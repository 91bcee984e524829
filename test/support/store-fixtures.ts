import type { Agent, Ask, PushConfig, Run, StoredEvent, Thread } from '../../lambdas/core/model.js';

/** Records for store tests: each made whole, with ids of its own unless given. */
let ids = 0;
export function newId(prefix: string): string {
  ids += 1;
  return `${prefix}-${ids}`;
}

export function aThread(overrides: Partial<Thread> = {}): Thread {
  return {
    threadId: newId('thread'),
    agentId: 'demo',
    tenant: 'acme',
    createdAt: '2025-01-01T00:00:00.000Z',
    unsettled: 0,
    arrivals: 0,
    ...overrides,
  };
}

export function aRun(overrides: Partial<Run> = {}): Run {
  const runId = overrides.runId ?? newId('run');
  const threadId = overrides.threadId ?? 'thread-a';
  return {
    runId,
    threadId,
    agentId: 'demo',
    tenant: 'acme',
    principal: 'alice',
    door: 'agui',
    status: 'queued',
    arrival: 1,
    rootRunId: runId,
    input: {
      threadId,
      runId,
      messages: [{ id: 'm1', role: 'user', content: 'hello' }],
      tools: [],
      context: [],
      state: {},
      forwardedProps: {},
    },
    createdAt: '2025-01-01T00:00:00.000Z',
    ...overrides,
  };
}

export function openAsk(id: string): Ask {
  return { id, kind: 'interrupt', state: 'open', interrupt: { id, reason: 'approval' } };
}

export function events(runId: string, count: number, from = 1): StoredEvent[] {
  return Array.from({ length: count }, (_, i) => ({
    runId,
    seq: from + i,
    event: { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: `chunk ${from + i}` },
  }));
}

export function seqs(stored: StoredEvent[]): number[] {
  return stored.map((e) => e.seq);
}

export function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

export function anAgent(id: string, overrides: Partial<Agent> = {}): Agent {
  return {
    id,
    description: `the ${id} agent`,
    provider: { kind: 'agui-http', url: `https://agents.example/${id}`, headers: { authorization: 'Bearer x' } },
    takesInterjections: false,
    timeoutSeconds: 600,
    idleTimeoutSeconds: 120,
    ...overrides,
  };
}

export function aPushConfig(taskId: string, configId: string, overrides: Partial<PushConfig> = {}): PushConfig {
  return { taskId, configId, tenant: 'acme', url: `https://hooks.example.com/${configId}`, createdAt: '2025-01-01T00:00:00.000Z', ...overrides };
}
