import { randomUUID } from 'node:crypto';
import { TaskState, type Task } from '@a2a-js/sdk';
import { beforeAll, describe, expect, it } from 'vitest';
import { ADDRESSED_RUN_ID_KEY } from '../../lambdas/core/interjection.js';
import { isTerminal } from '../../lambdas/core/model.js';
import type { ObservedCall } from '../support/aws-box/aws-endpoint.js';
import { runInput } from '../support/aws-box/run-input.js';
import { useAwsBox, type AwsBox } from '../support/aws-box/box.js';
import { eventually } from '../support/core-harness.js';
import { readSse } from '../support/gateway.js';
import { asTask, send, stateName, userMessage } from '../support/a2a.js';
import { startHeldAgent } from '../support/held-agent.js';
import { recordBreaks } from '../support/record-invariants.js';

/**
 * The fault matrix of a run posted at the AG-UI door: the door's function and then the
 * dispatcher are killed at each of their AWS calls in turn (one new thread per case); the box's
 * clock is moved past the repair's bounds (the thread queue's visibility timeout, past the
 * sweep's too); the record keeps its promises before the caller retries (a request whose door
 * died has its places and asks given back by the sweep), and after the retry of a request that
 * failed, as a client does, the run ended with a reason, its replay ends, and the thread takes
 * its next run.
 */
const aws = useAwsBox();

beforeAll(async () => {
  expect((await aws.box.admin('PUT', 'agents/demo', { provider: 'demo', description: 'the demo agent' })).status).toBe(201);
});


type Input = ReturnType<typeof runInput>;

/** A new thread's first run, or the answer to a new thread's interrupt (its asking run run first, unharmed). */
type Flow = (box: AwsBox) => Promise<Input>;

const firstRun: Flow = async () => runInput(`t-${randomUUID()}`, 'hello');

const answer: Flow = async (box) => {
  const threadId = `t-${randomUUID()}`;
  const asked = await run(box, runInput(threadId, '/ask'));
  const interruptId = (asked as { outcome: { interrupts: Array<{ id: string }> } }).outcome.interrupts[0].id;
  return runInput(threadId, '', { messages: [], resume: [{ interruptId, status: 'resolved', payload: { approved: true } }] });
};

/** Posts a run and reads its stream to the end; the last event, or undefined when the door died under it. */
async function run(box: AwsBox, input: Input, agentId = 'demo'): Promise<Record<string, unknown> | undefined> {
  try {
    const response = await box.fetch(`${box.url}/agui/${agentId}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(input) });
    if (response.status !== 200) return undefined;
    return (await readSse(response)).events.at(-1)?.data;
  } catch {
    return undefined;
  }
}

/** The calls `caller` makes for one clean run, as action names in order. */
async function callsOf(box: AwsBox, caller: string, flow: Flow): Promise<string[]> {
  const calls: string[] = [];
  const input = await flow(box);
  box.hook = (call) => {
    if (call.caller === caller && call.duringInvocation) calls.push(call.action);
    return 'serve';
  };
  try {
    expect(await run(box, input)).toMatchObject({ type: 'RUN_FINISHED' });
    // The dispatcher goes on after its caller's stream ended (the rest of its settle): its calls are over once it returned.
    await eventually(() => expect(dispatched(box, input.runId)).toBe(true), 10_000);
  } finally {
    box.hook = () => 'serve';
  }
  return calls;
}

const ENDS = ['RUN_FINISHED', 'RUN_ERROR'];

/**
 * A run's dispatch is over once its message is gone and no dispatcher runs: the repair may delete
 * a settled run's message while its dispatcher still does the rest of its settle.
 */
function dispatched(box: AwsBox, runId: string): boolean {
  const queue = [...box.sqs.queues.values()].find((q) => q.redrive)!;
  return !queue.messages.some((m) => m.body.includes(runId)) && box.lambda.busy('dispatcher') === 0;
}

/** The cases run: where the function died, and how its run ended. */
const matrix: Array<{ flow: string; caller: string; call: string; killed: boolean; ended?: string; reason?: string }> = [];

/**
 * Where to kill a function: each write of a clean run's calls (the nth UpdateItem, …) and the
 * first of each read. Counted by action, since a warm environment skips reads its caches answer.
 */
function targets(calls: readonly string[]): Array<{ action: string; occurrence: number }> {
  const seen = new Map<string, number>();
  const found: Array<{ action: string; occurrence: number }> = [];
  for (const action of calls) {
    const occurrence = (seen.get(action) ?? 0) + 1;
    seen.set(action, occurrence);
    if (occurrence === 1 || !/:(GetItem|Query)$/.test(action)) found.push({ action, occurrence });
  }
  return found;
}

async function killedAt(box: AwsBox, flow: Flow, caller: string, target: { action: string; occurrence: number }): Promise<void> {
  const input = await flow(box);
  let killed = false;
  const row: (typeof matrix)[number] = { flow: flow === answer ? 'answer' : 'run', caller, call: `${target.action} #${target.occurrence}`, killed: false };
  matrix.push(row);
  const counts = new Map<string, number>();
  box.hook = (call: ObservedCall) => {
    if (killed || call.caller !== caller || !call.duringInvocation) return 'serve';
    const count = (counts.get(call.action) ?? 0) + 1;
    counts.set(call.action, count);
    if (call.action !== target.action || count !== target.occurrence) return 'serve';
    killed = true;
    row.killed = true;
    return 'kill';
  };
  try {
    let answered = false;
    const first = run(box, input).finally(() => (answered = true));
    // A warm environment makes fewer calls (its caches): a run may end before its nth call. The
    // dispatcher goes on after its caller's stream ended (the rest of its settle), so its calls
    // are over only once it returned.
    const queue = [...box.sqs.queues.values()].find((q) => q.redrive)!;
    const over = () => answered && (caller !== 'dispatcher' || dispatched(box, input.runId));
    await eventually(() => expect(killed || over()).toBe(true), 30_000);
    box.hook = () => 'serve';
    if (caller !== 'dispatcher') {
      // A door that died after its run was queued leaves that run to a live dispatcher: it must
      // be done before the clock passes the visibility timeout, or its message comes back while
      // it runs (the box's clock is not its functions' elapsed time) and a second dispatch, finding
      // the run running, fails it dispatch_lost beside the first.
      await eventually(async () => {
        const run = (await box.record()).runs.find((known) => known.runId === input.runId);
        expect(dispatched(box, input.runId) && (run === undefined || isTerminal(run.status))).toBe(true);
      }, 30_000);
    }
    const sweeps = box.schedules.invocations.length;
    // A dispatcher that died holds its message (and its thread's group) until the visibility
    // timeout; a door that died, what it took until the sweep after the doors' timeout. Both pass.
    box.clock.advance(queue.visibilityTimeoutMs + 1_000);
    const ended = await first;
    if (caller !== 'dispatcher') {
      // Before any retry: the repair and the sweep leave the record whole on their own.
      await eventually(() => expect(box.schedules.invocations.length).toBeGreaterThan(sweeps), 30_000);
      await eventually(async () => expect({ at: row.call, breaks: recordBreaks(await box.record()) }).toEqual({ at: row.call, breaks: [] }), 20_000);
    }
    const last = ended ?? (await run(box, input));
    row.ended = String(last?.type);
    row.reason = (last as { code?: string } | undefined)?.code;
    expect({ at: row.call, type: last?.type }).toEqual({ at: row.call, type: expect.toSatisfy((type: string) => ENDS.includes(type)) });
    const { events } = await readSse(await box.fetch(`${box.url}/agui/demo/runs/${input.runId}/events`));
    expect(events.at(-1)?.data.type).toBe(last?.type);
    await eventually(async () => expect({ at: row.call, breaks: recordBreaks(await box.record()) }).toEqual({ at: row.call, breaks: [] }), 20_000);
    if (flow === answer) {
      // The answer was taken once: its run is the asking run's only child, and no other answer is.
      const view = (await (await box.request('GET', `/threads/${input.threadId}`)).json()) as { runs: Array<{ runId: string; parentRunId?: string }> };
      expect({ at: row.call, children: view.runs.filter((r) => r.parentRunId !== undefined).map((r) => r.runId) }).toEqual({ at: row.call, children: [input.runId] });
    }
    expect(await run(box, runInput(input.threadId, 'next'))).toMatchObject({ type: 'RUN_FINISHED' });
  } finally {
    box.hook = () => 'serve';
  }
}

/** One case of a flow: its request sent (resolved once the function's part is over), then finished after the bounds passed. */
interface Case {
  send(killed: () => boolean): Promise<void>;
  /** The caller's retry of what failed, and what must hold after it; how the flow ended. */
  finish(at: string): Promise<string>;
  close?(): Promise<void>;
  /** Environments of `caller` serving the case's other requests (a stream it keeps open): their calls are not the case's. */
  beside?: ReadonlySet<string>;
}

/**
 * Kills `caller` at each write of a clean case's calls and the first of each read, one new case
 * each; then moves the clock past the sweep's bound (not the visibility timeout: the cases hold
 * a run running, which its message's return would fail `dispatch_lost`), waits for the sweep,
 * and checks the record before and after the case is finished.
 */
async function killedAtEachCall(box: AwsBox, flow: string, caller: string, prepare: () => Promise<Case>): Promise<void> {
  const clean: string[] = [];
  const targetsOf: Array<{ action: string; occurrence: number } | undefined> = [undefined];
  for (let i = 0; i < targetsOf.length; i++) {
    const target = targetsOf[i];
    const row: (typeof matrix)[number] = { flow, caller, call: target ? `${target.action} #${target.occurrence}` : 'none', killed: false };
    if (target) matrix.push(row);
    const flowCase = await prepare();
    try {
      const counts = new Map<string, number>();
      box.hook = (call: ObservedCall) => {
        if (call.caller !== caller || !call.duringInvocation || (call.environment !== undefined && flowCase.beside?.has(call.environment))) return 'serve';
        if (!target) clean.push(call.action);
        const count = (counts.get(call.action) ?? 0) + 1;
        counts.set(call.action, count);
        if (row.killed || !target || call.action !== target.action || count !== target.occurrence) return 'serve';
        row.killed = true;
        return 'kill';
      };
      await flowCase.send(() => row.killed);
      box.hook = () => 'serve';
      if (!target) {
        targetsOf.push(...targets(clean));
        row.ended = await flowCase.finish(row.call);
        continue;
      }
      const sweeps = box.schedules.invocations.length;
      box.clock.advance(SWEEP_BOUND_MS);
      await eventually(() => expect(box.schedules.invocations.length).toBeGreaterThan(sweeps), 30_000);
      await eventually(async () => expect({ at: row.call, breaks: recordBreaks(await box.record()) }).toEqual({ at: row.call, breaks: [] }), 20_000);
      row.ended = await flowCase.finish(row.call);
      await eventually(async () => expect({ at: row.call, breaks: recordBreaks(await box.record()) }).toEqual({ at: row.call, breaks: [] }), 20_000);
    } finally {
      box.hook = () => 'serve';
      await flowCase.close?.();
    }
  }
  expect(targetsOf.length).toBeGreaterThan(2);
}

/** Past the sweep's bound: a request noted more than the doors' timeout and a minute ago, and the schedule's next firing (every 5 minutes). */
const SWEEP_BOUND_MS = (16 + 5) * 60_000 + 1_000;

/** The cancel of a thread's queued run, or of its running run, its door killed at each of the cancel's calls; the number of cases run. */
async function cancelKilledAtEachCall(box: AwsBox, which: 'queued' | 'running'): Promise<number> {
  const cancels: Array<{ action: string; occurrence: number } | undefined> = [undefined];
  for (let i = 0; i < cancels.length; i++) {
    const target = cancels[i];
    const agent = await startHeldAgent();
    const agentId = `held-${randomUUID()}`;
    const row: (typeof matrix)[number] = { flow: `cancel ${which}`, caller: 'doors', call: target ? `${target.action} #${target.occurrence}` : 'none', killed: false };
    if (target) matrix.push(row);
    try {
      expect((await box.admin('PUT', `agents/${agentId}`, { url: agent.url, description: 'holds its runs' })).status).toBe(201);
      const threadId = `t-${randomUUID()}`;
      const long = runInput(threadId, 'long');
      const running = run(box, long, agentId);
      await eventually(() => expect(agent.received).toHaveLength(1), 20_000);
      const queued = runInput(threadId, 'waiting');
      const waiting = which === 'queued' ? run(box, queued, agentId) : undefined;
      if (waiting) await eventually(async () => expect((await (await box.request('GET', `/threads/${threadId}`)).json()).queue).toHaveLength(1), 20_000);
      const cancelled = which === 'queued' ? queued : long;
      const calls: string[] = [];
      const counts = new Map<string, number>();
      box.hook = (call: ObservedCall) => {
        if (call.caller !== 'doors' || !call.duringInvocation) return 'serve';
        calls.push(call.action);
        const count = (counts.get(call.action) ?? 0) + 1;
        counts.set(call.action, count);
        if (row.killed || !target || call.action !== target.action || count !== target.occurrence) return 'serve';
        row.killed = true;
        return 'kill';
      };
      const cancel = () => box.request('POST', `/agui/${agentId}/runs/${cancelled.runId}/cancel`).then((r) => r.status).catch(() => 0);
      if ((await cancel()) !== 202) {
        box.hook = () => 'serve';
        // The retry finds the run cancelled already when the first attempt died after the transition.
        expect([202, 409]).toContain(await cancel());
      }
      box.hook = () => 'serve';
      // The clean cancel says where the others die: each of its writes, the first of each read.
      if (!target) cancels.push(...targets(calls));
      const ended = await (waiting ?? running);
      row.ended = String(ended?.type);
      expect({ at: row.call, ended }).toMatchObject({ at: row.call, ended: { type: 'RUN_FINISHED', outcome: { type: 'cancelled' } } });
      const { events } = await readSse(await box.fetch(`${box.url}/agui/${agentId}/runs/${cancelled.runId}/events`));
      expect(events.at(-1)?.data).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'cancelled' } });
      if (which === 'running') await eventually(() => expect(agent.closed.has(long.runId)).toBe(true), 20_000);
      agent.release();
      if (waiting) {
        expect(await running).toMatchObject({ type: 'RUN_FINISHED' });
        expect(agent.received.map((input) => input.runId)).not.toContain(queued.runId);
      }
      await eventually(async () => expect({ at: row.call, breaks: recordBreaks(await box.record()) }).toEqual({ at: row.call, breaks: [] }), 20_000);
    } finally {
      box.hook = () => 'serve';
      agent.release();
      await agent.close();
    }
  }
  return cancels.length;
}

describe('an AG-UI run, its function killed at each AWS call in turn', { timeout: 300_000 }, () => {
  it('leaves nothing stranded when the door dies at any of its calls', async () => {
    const { box } = aws;
    for (const target of targets(await callsOf(box, 'doors-stream', firstRun))) await killedAt(box, firstRun, 'doors-stream', target);
  });

  it('leaves nothing stranded when the dispatcher dies at any of its calls', async () => {
    const { box } = aws;
    for (const target of targets(await callsOf(box, 'dispatcher', firstRun))) await killedAt(box, firstRun, 'dispatcher', target);
  });

  it('takes an answer once, and leaves nothing stranded, when the door dies at any of the answer’s calls', async () => {
    const { box } = aws;
    for (const target of targets(await callsOf(box, 'doors-stream', answer))) await killedAt(box, answer, 'doors-stream', target);
  });

  it('cancels a queued run once, and leaves nothing stranded, when the door dies at any of the cancel’s calls', async () => {
    expect(await cancelKilledAtEachCall(aws.box, 'queued')).toBeGreaterThan(2);
  });

  it('cancels a running run once, and leaves nothing stranded, when the door dies at any of the cancel’s calls', async () => {
    expect(await cancelKilledAtEachCall(aws.box, 'running')).toBeGreaterThan(1);
  });

  it('takes an interjection once, and leaves nothing stranded, when the door dies at any of its calls', async () => {
    const { box } = aws;
    await killedAtEachCall(box, 'interjection', 'doors-stream', async () => {
      const agent = await startHeldAgent();
      const agentId = `held-${randomUUID()}`;
      expect((await box.admin('PUT', `agents/${agentId}`, { url: agent.url, description: 'holds its runs', takesInterjections: true })).status).toBe(201);
      const threadId = `t-${randomUUID()}`;
      const target = runInput(threadId, 'long');
      // The running run's stream is served by a door of its own, which reads on while the case
      // runs: its calls are not the interjection's, to count or to kill.
      const beside = new Set<string>();
      box.hook = (call) => {
        if (call.caller === 'doors-stream' && call.environment !== undefined) beside.add(call.environment);
        return 'serve';
      };
      const running = run(box, target, agentId);
      await eventually(() => expect(agent.received).toHaveLength(1), 20_000);
      box.hook = () => 'serve';
      const input = runInput(threadId, 'also this', { forwardedProps: { [ADDRESSED_RUN_ID_KEY]: target.runId } });
      let joined: Promise<Record<string, unknown> | undefined> | undefined;
      return {
        async send(killed) {
          joined = run(box, input, agentId);
          // Its stream lasts as long as the held agent holds it: the door's part is over once the agent has it.
          await eventually(() => expect(killed() || agent.received.some((r) => r.runId === input.runId)).toBe(true), 30_000);
        },
        async finish(at) {
          agent.release();
          const last = (await joined) ?? (await run(box, input, agentId));
          expect({ at, last }).toMatchObject({ at, last: { type: 'RUN_FINISHED' } });
          expect(await running).toMatchObject({ type: 'RUN_FINISHED' });
          expect(agent.received.filter((r) => r.runId === input.runId)).toHaveLength(1);
          return String(last?.type);
        },
        close: async () => {
          agent.release();
          await agent.close();
        },
        beside,
      };
    });
  });

  it('takes an A2A SendMessage once, and leaves nothing stranded, when the door dies at any of its calls', async () => {
    const { box } = aws;
    const client = await box.a2a('JSONRPC');
    await killedAtEachCall(box, 'a2a', 'doors-stream', async () => {
      const message = userMessage('hello');
      const sendIt = () => client.sendMessage(send(message)).then(asTask, () => undefined);
      let sent: Promise<Task | undefined> | undefined;
      return {
        async send() {
          sent = sendIt();
          await sent;
        },
        async finish(at) {
          // The caller sends the message again (the same messageId): it is taken as the first was, once.
          const task = (await sent) ?? (await sendIt());
          expect({ at, state: stateName(task?.status?.state) }).toEqual({ at, state: 'TASK_STATE_COMPLETED' });
          expect((await client.sendMessage(send(message)).then(asTask)).id).toBe(task!.id);
          const listed = await client.listTasks({ tenant: '', contextId: task!.contextId, status: TaskState.TASK_STATE_UNSPECIFIED, pageToken: '', statusTimestampAfter: undefined });
          expect({ at, tasks: listed.tasks.map((t) => t.id) }).toEqual({ at, tasks: [task!.id] });
          return stateName(task?.status?.state);
        },
      };
    });
  });

  it('killed each function at every call a run made of it', () => {
    if (process.env.FUNDUQ_FAULT_MATRIX) console.table(matrix);
    // Every write of each flow was a place it died at.
    const killed = (flow: string, caller: string) => matrix.filter((row) => row.flow === flow && row.caller === caller && row.killed).map((row) => row.call);
    // The arrival's note (PutItem #1), the thread or its place, the run (the last PutItem), its message, the note forgotten (DeleteItem).
    expect(killed('run', 'doors-stream')).toEqual(expect.arrayContaining(['dynamodb:PutItem #1', 'dynamodb:PutItem #2', 'dynamodb:PutItem #3', 'sqs:SendMessage #1', 'dynamodb:DeleteItem #1']));
    expect(killed('answer', 'doors-stream')).toEqual(
      expect.arrayContaining(['dynamodb:PutItem #1', 'dynamodb:UpdateItem #1', 'dynamodb:UpdateItem #2', 'dynamodb:PutItem #2', 'sqs:SendMessage #1', 'dynamodb:DeleteItem #1']),
    );
    expect(killed('cancel queued', 'doors')).toEqual(expect.arrayContaining(['dynamodb:UpdateItem #1', 'dynamodb:UpdateItem #2']));
    expect(killed('cancel running', 'doors')).toEqual(expect.arrayContaining(['dynamodb:UpdateItem #1']));
    expect(killed('interjection', 'doors-stream')).toEqual(expect.arrayContaining(['dynamodb:PutItem #1', 'dynamodb:UpdateItem #1', 'dynamodb:PutItem #2', 'lambda:InvokeFunction #1', 'dynamodb:DeleteItem #1']));
    expect(killed('a2a', 'doors-stream')).toEqual(expect.arrayContaining(['dynamodb:PutItem #1', 'dynamodb:PutItem #2', 'dynamodb:PutItem #3', 'sqs:SendMessage #1']));
    expect(killed('run', 'dispatcher')).toEqual(expect.arrayContaining(['dynamodb:UpdateItem #1', 'dynamodb:BatchWriteItem #1', 'dynamodb:UpdateItem #2', 'dynamodb:UpdateItem #3', 'dynamodb:PutItem #1']));
    // Killed mid-run, a run fails dispatch_lost; killed anywhere else, it runs to its end.
    for (const row of matrix) expect([row.ended, row.reason]).toEqual(row.ended === 'RUN_ERROR' ? ['RUN_ERROR', 'dispatch_lost'] : [row.flow === 'a2a' ? 'TASK_STATE_COMPLETED' : 'RUN_FINISHED', undefined]);
  });
});
