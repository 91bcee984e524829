import type { RunAgentInput } from '@ag-ui/core';
import { InProcessChangeFeed } from '../../lambdas/adapters/local/change-feed.js';
import { InProcessThreadQueue } from '../../lambdas/adapters/local/thread-queue.js';
import { stockClientRules } from '../../lambdas/adapters/agui/stock-client-rules.js';
import { createGateway, type Gateway } from '../../lambdas/core/gateway.js';
import { ANONYMOUS, type Agent, type StoredEvent, type ThreadRef } from '../../lambdas/core/model.js';
import type { AskTimer, LinkedProvider, Provider, ProviderContext, RunStore } from '../../lambdas/core/ports.js';
import type { LinkDeps } from '../../lambdas/core/deps.js';
import type { CoreSettings } from '../../lambdas/core/settings.js';
import type { RunLife } from '../../lambdas/core/run-life.js';

/** A clock the test moves by hand, so expiry and time limits are tested without sleeping. */
export class FakeClock {
  private timers: { at: number; fire: () => void }[] = [];
  constructor(public ms = Date.parse('2026-01-01T00:00:00.000Z')) {}
  now(): number {
    return this.ms;
  }
  after(ms: number, fire: () => void): () => void {
    const timer = { at: this.ms + ms, fire };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  }
  /** Moves time on, firing the timers that fall due. */
  advance(ms: number): void {
    this.ms += ms;
    const due = this.timers.filter((t) => t.at <= this.ms);
    this.timers = this.timers.filter((t) => t.at > this.ms);
    for (const timer of due) timer.fire();
  }
}

/** The ask timer as a test double of its port: it records what is armed; `advance` fires what is due. */
export class ManualAskTimer implements AskTimer {
  readonly armed = new Map<string, string>();
  async arm(runId: string, expiresAt: string): Promise<void> {
    this.armed.set(runId, expiresAt);
  }
  async disarm(runId: string): Promise<void> {
    this.armed.delete(runId);
  }
}

type Script = (input: RunAgentInput, signal: AbortSignal) => AsyncIterable<unknown>;

/** A provider whose events each test writes: a stand-in for an agent, not for funduq. */
export class ScriptedProvider implements Provider {
  calls: RunAgentInput[] = [];
  constructor(public script: Script) {}
  run(input: RunAgentInput, context: ProviderContext): AsyncIterable<unknown> {
    this.calls.push(input);
    return this.script(input, context.signal);
  }
}

export const TEST_AGENT: Agent = {
  id: 'scripted',
  description: 'scripted test agent',
  provider: { kind: 'scripted' },
  takesInterjections: false,
  timeoutSeconds: 60,
  idleTimeoutSeconds: 60,
};

/** The text of an input's last user message. */
export function lastText(input: RunAgentInput): string {
  const last = [...input.messages].reverse().find((m) => m.role === 'user');
  return typeof last?.content === 'string' ? last.content : '';
}

export function* replyEvents(input: RunAgentInput, text: string): Generator<Record<string, unknown>> {
  yield { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId };
  yield { type: 'TEXT_MESSAGE_START', messageId: `m-${input.runId}`, role: 'assistant' };
  yield { type: 'TEXT_MESSAGE_CONTENT', messageId: `m-${input.runId}`, delta: text };
  yield { type: 'TEXT_MESSAGE_END', messageId: `m-${input.runId}` };
  yield { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId };
}

/** A gate a script awaits, opened by the test: runs stay `running` exactly as long as the test wants. */
export class Gate {
  private opened!: () => void;
  readonly wait = new Promise<void>((resolve) => (this.opened = resolve));
  open(): void {
    this.opened();
  }
}

export interface Harness {
  gateway: Gateway;
  store: RunStore;
  feed: InProcessChangeFeed;
  clock: FakeClock;
  timer: ManualAskTimer;
  queue: InProcessThreadQueue;
  provider: ScriptedProvider;
  /** The thread the harness sends to, as the anonymous tenant's. */
  thread: ThreadRef;
  input(text: string, extra?: Partial<RunAgentInput>): RunAgentInput;
  send(text: string, extra?: Partial<RunAgentInput>): ReturnType<Gateway['startRun']>;
  events(runId: string): Promise<StoredEvent[]>;
  /** Resolves when the thread queues are empty (every accepted run dispatched). */
  settled(): Promise<void>;
}

export async function harness(
  store: RunStore,
  options: {
    threadQueueLimit?: number;
    threadId?: string;
    settings?: Partial<CoreSettings>;
    providers?: Record<string, Provider | LinkedProvider>;
    link?: (clock: FakeClock) => LinkDeps;
    /** The thread-queue message each dispatch comes in (an SQS receipt handle on AWS). */
    receipt?: (runId: string) => string;
    /** Who watches the runs' lives. */
    life?: RunLife;
  } = {},
): Promise<Harness> {
  const clock = new FakeClock();
  const timer = new ManualAskTimer();
  const queue = new InProcessThreadQueue((error) => {
    throw error;
  });
  const provider = new ScriptedProvider(async function* (input) {
    yield* replyEvents(input, `echo: ${lastText(input)}`);
  });
  let n = 0;
  const feed = new InProcessChangeFeed();
  const gateway = createGateway({
    store,
    queue,
    timer,
    feed,
    providers: { scripted: provider, ...options.providers },
    rules: stockClientRules,
    clock,
    ids: { newId: () => `id-${++n}` },
    settings: { threadQueueLimit: options.threadQueueLimit ?? 8, ...options.settings },
    ...(options.link ? { link: options.link(clock) } : {}),
    ...(options.life ? { life: options.life } : {}),
  });
  queue.start((runId, delivery) => gateway.dispatchRun(runId, { ...delivery, ...(options.receipt ? { receipt: options.receipt(runId) } : {}) }));
  await store.agents.put(TEST_AGENT);
  const threadId = options.threadId ?? 'thread-1';
  let runs = 0;
  const input = (text: string, extra: Partial<RunAgentInput> = {}): RunAgentInput => ({
    threadId,
    runId: `run-${++runs}`,
    messages: [{ id: `msg-${runs}`, role: 'user', content: text }],
    tools: [],
    context: [],
    ...extra,
  });
  return {
    gateway,
    store,
    feed,
    clock,
    timer,
    queue,
    provider,
    thread: { tenant: ANONYMOUS.tenant, threadId },
    input,
    send: (text, extra) => gateway.startRun({ agentId: TEST_AGENT.id, input: input(text, extra), door: 'agui', principal: ANONYMOUS }),
    events: (runId) => store.events.read(runId, 0),
    settled: () => queue.idle(),
  };
}

/** Runs the assertion until it holds or the time is up: waiting for an observable, never a fixed sleep. */
export async function eventually<T>(check: () => Promise<T> | T, timeoutMs = 5_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > until) throw error;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
}
