import { TaskState, type StreamResponse, type Task } from '@a2a-js/sdk';
import { describe, expect, it } from 'vitest';
import { beforeEvents, projectTask, replayRun, TaskProjection } from '../../lambdas/core/a2a/projection.js';
import type { Ask, Run, StoredEvent } from '../../lambdas/core/model.js';

function aRun(overrides: Partial<Run> = {}): Run {
  const runId = overrides.runId ?? 'run-1';
  return {
    runId,
    threadId: 'thread-1',
    agentId: 'demo',
    tenant: 'acme',
    principal: 'alice',
    door: 'a2a',
    status: 'completed',
    arrival: 1,
    rootRunId: 'run-1',
    input: { threadId: 'thread-1', runId, messages: [{ id: `msg-${runId}`, role: 'user', content: 'hello' }], tools: [], context: [] },
    createdAt: '2026-01-01T00:00:00.000Z',
    ...overrides,
  };
}

function log(runId: string, ...events: Record<string, unknown>[]): StoredEvent[] {
  return events.map((event, i) => ({ runId, seq: i + 1, event: event as StoredEvent['event'] }));
}

const reply = (runId: string, messageId: string, ...chunks: string[]) =>
  log(
    runId,
    { type: 'RUN_STARTED', threadId: 'thread-1', runId },
    { type: 'TEXT_MESSAGE_START', messageId, role: 'assistant' },
    ...chunks.map((delta) => ({ type: 'TEXT_MESSAGE_CONTENT', messageId, delta })),
    { type: 'TEXT_MESSAGE_END', messageId },
    { type: 'RUN_FINISHED', threadId: 'thread-1', runId },
  );

function interrupt(id: string, reason: string, extra: Partial<Ask> = {}): Ask {
  return { id, kind: 'interrupt', state: 'open', interrupt: { id, reason, message: `please ${reason}`, responseSchema: { type: 'object' } }, ...extra };
}

const state = (task: Task) => TaskState[task.status!.state];
const text = (task: Task) => task.artifacts.map((a) => a.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join(''));

/** A client applying a stream's updates to the Task it began with, as A2A clients do. */
function applyStream(updates: StreamResponse[]): Task {
  let task: Task | undefined;
  for (const { payload } of updates) {
    if (payload?.$case === 'task') task = structuredClone(payload.value);
    else if (payload?.$case === 'statusUpdate') task!.status = payload.value.status;
    else if (payload?.$case === 'artifactUpdate') {
      const incoming = payload.value.artifact!;
      const existing = task!.artifacts.find((a) => a.artifactId === incoming.artifactId);
      if (existing && payload.value.append) existing.parts.push(...incoming.parts);
      else if (existing) existing.parts = incoming.parts;
      else task!.artifacts.push(structuredClone(incoming));
    }
  }
  return task!;
}

describe('the task projection', () => {
  it('is SUBMITTED while queued, WORKING once RUN_STARTED is read, and COMPLETED when the record settles', () => {
    const run = aRun({ status: 'queued' });
    const projection = new TaskProjection('run-1', 'thread-1');
    expect(projection.observeRun(run).map((u) => u.payload?.$case)).toEqual(['statusUpdate']);
    expect(TaskState[projection.state]).toBe('TASK_STATE_SUBMITTED');
    const events = reply('run-1', 'm1', 'hi');
    const started = projection.applyEvent(events[0]);
    expect(started).toHaveLength(1);
    expect(TaskState[projection.state]).toBe('TASK_STATE_WORKING');
    for (const stored of events.slice(1)) projection.applyEvent(stored);
    const settled = projection.observeRun({ ...run, status: 'completed' });
    expect(settled[0].payload).toMatchObject({ $case: 'statusUpdate', value: { status: { state: TaskState.TASK_STATE_COMPLETED } } });
  });

  it('makes one artifact per AG-UI message, its chunks appended, and puts the agent message in the history', () => {
    const projection = new TaskProjection('run-1', 'thread-1');
    const updates = replayRun(projection, aRun(), [
      ...reply('run-1', 'm1', 'Hel', 'lo'),
    ]);
    const artifacts = updates.filter((u) => u.payload?.$case === 'artifactUpdate').map((u) => u.payload!.value) as {
      append: boolean;
      lastChunk: boolean;
      artifact: { artifactId: string };
    }[];
    expect(artifacts.map((a) => [a.artifact.artifactId, a.append, a.lastChunk])).toEqual([
      ['m1', false, false],
      ['m1', true, false],
      ['m1', true, true],
    ]);
    const task = projection.task();
    expect(text(task)).toEqual(['Hello']);
    expect(task.history.map((m) => [m.role, m.messageId])).toEqual([
      [1, 'msg-run-1'],
      [2, 'm1'],
    ]);
  });

  it('says INPUT_REQUIRED with the open asks, and AUTH_REQUIRED when an interrupt asks for credentials', () => {
    const asking = aRun({ outcome: 'interrupt', asks: { i1: interrupt('i1', 'confirmation', { expiresAt: '2026-01-01T01:00:00.000Z' }) } });
    const task = projectTask(asking, [{ run: asking, events: reply('run-1', 'm1', 'sure?') }]);
    expect(state(task)).toBe('TASK_STATE_INPUT_REQUIRED');
    expect(task.status?.message?.parts[0].content).toEqual({ $case: 'text', value: 'please confirmation' });
    expect(task.metadata?.funduq.openAsks).toEqual([
      {
        id: 'i1',
        kind: 'interrupt',
        runId: 'run-1',
        reason: 'confirmation',
        message: 'please confirmation',
        expiresAt: '2026-01-01T01:00:00.000Z',
        responseSchema: { type: 'object' },
      },
    ]);
    const auth = aRun({ asks: { a1: interrupt('a1', 'auth_required') } });
    expect(state(projectTask(auth, [{ run: auth, events: [] }]))).toBe('TASK_STATE_AUTH_REQUIRED');
  });

  it('says FAILED naming the expiry, CANCELED for abandoned asks, REJECTED when the provider refused, FAILED for other failures', () => {
    const expired = aRun({ asks: { i1: interrupt('i1', 'confirmation', { state: 'expired', expiresAt: '2026-01-01T01:00:00.000Z' }) } });
    const expiredTask = projectTask(expired, [{ run: expired, events: [] }]);
    expect(state(expiredTask)).toBe('TASK_STATE_FAILED');
    expect(JSON.stringify(expiredTask.status?.message)).toContain('expired');
    expect(JSON.stringify(expiredTask.status?.message)).toContain('2026-01-01T01:00:00.000Z');

    const abandoned = aRun({ asks: { i1: interrupt('i1', 'confirmation', { state: 'cancelled' }) } });
    expect(state(projectTask(abandoned, [{ run: abandoned, events: [] }]))).toBe('TASK_STATE_CANCELED');

    const refused = aRun({ status: 'failed', reason: 'provider_http_403', message: 'forbidden' });
    expect(state(projectTask(refused, [{ run: refused, events: [] }]))).toBe('TASK_STATE_REJECTED');
    const busy = aRun({ status: 'failed', reason: 'provider_http_429' });
    expect(state(projectTask(busy, [{ run: busy, events: [] }]))).toBe('TASK_STATE_FAILED');
    const cancelled = aRun({ status: 'cancelled', reason: 'cancel_requested' });
    expect(state(projectTask(cancelled, [{ run: cancelled, events: [] }]))).toBe('TASK_STATE_CANCELED');
  });

  it('stays WORKING while a cancel is asked for, and says so', () => {
    const cancelling = aRun({ status: 'cancelling', cancelRequested: true });
    const task = projectTask(cancelling, [{ run: cancelling, events: log('run-1', { type: 'RUN_STARTED', threadId: 'thread-1', runId: 'run-1' }) }]);
    expect(state(task)).toBe('TASK_STATE_WORKING');
    expect(task.metadata?.funduq.cancelRequested).toBe(true);
  });

  it('carries events A2A has no words for under metadata.funduq.agui_event(s)', () => {
    const projection = new TaskProjection('run-1', 'thread-1');
    projection.observeRun(aRun({ status: 'running' }));
    const [update] = projection.applyEvent({ runId: 'run-1', seq: 1, event: { type: 'STATE_SNAPSHOT', snapshot: { step: 2 } } });
    expect(update.payload).toMatchObject({
      $case: 'statusUpdate',
      value: { metadata: { funduq: { agui_event: { type: 'STATE_SNAPSHOT', snapshot: { step: 2 } }, cursor: '1@run-1' } } },
    });
    expect(projection.task().metadata?.funduq.agui_events).toEqual([{ runId: 'run-1', seq: 1, event: { type: 'STATE_SNAPSHOT', snapshot: { step: 2 } } }]);
  });

  it('shows an answer run as the caller\'s reply in the history, and the lineage ends in its state', () => {
    const asking = aRun({ asks: { i1: interrupt('i1', 'confirmation', { state: 'answered', closedByRunId: 'run-2' }) } });
    const answer = aRun({
      runId: 'run-2',
      arrival: 2,
      parentRunId: 'run-1',
      input: { threadId: 'thread-1', runId: 'run-2', messages: [], tools: [], context: [], resume: [{ interruptId: 'i1', status: 'resolved', payload: { approved: true } }] },
    });
    const task = projectTask(asking, [
      { run: asking, events: reply('run-1', 'm1', 'sure?') },
      { run: answer, events: reply('run-2', 'm2', 'done') },
    ]);
    expect(state(task)).toBe('TASK_STATE_COMPLETED');
    expect(task.history.map((m) => [m.role, m.messageId])).toEqual([
      [1, 'msg-run-1'],
      [2, 'm1'],
      [1, 'run-2'],
      [2, 'm2'],
    ]);
    expect(task.history[2].parts[0].content).toEqual({ $case: 'data', value: { approved: true } });
    expect(text(task)).toEqual(['sure?', 'done']);
  });

  it('agrees with itself: a stream applied to its first Task ends where a read of the record ends', () => {
    const run = aRun();
    const events = [
      ...reply('run-1', 'm1', 'a', 'b', 'c').slice(0, -1),
      { runId: 'run-1', seq: 7, event: { type: 'TOOL_CALL_START', toolCallId: 't1', toolCallName: 'x' } },
      { runId: 'run-1', seq: 8, event: { type: 'RUN_FINISHED', threadId: 'thread-1', runId: 'run-1' } },
    ] as StoredEvent[];
    const projection = new TaskProjection('run-1', 'thread-1');
    projection.observeRun(beforeEvents(run));
    const stream: StreamResponse[] = [{ payload: { $case: 'task', value: projection.task() } }];
    for (const stored of events) stream.push(...projection.applyEvent(stored));
    stream.push(...projection.observeRun(run));
    const streamed = applyStream(stream);
    const read = projectTask(run, [{ run, events }]);
    expect(text(streamed)).toEqual(text(read));
    expect(streamed.status).toEqual(read.status);
  });

  it('keeps the last historyLength messages and leaves artifacts out when asked', () => {
    const run = aRun();
    const task = projectTask(run, [{ run, events: reply('run-1', 'm1', 'x') }], { historyLength: 1, includeArtifacts: false });
    expect(task.history.map((m) => m.messageId)).toEqual(['m1']);
    expect(task.artifacts).toEqual([]);
    expect(projectTask(run, [{ run, events: [] }], { historyLength: 0 }).history).toEqual([]);
  });
});
