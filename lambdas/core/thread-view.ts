import type { Message } from '@ag-ui/core';
import type { Core } from './deps.js';
import { refuse, ok, type Result } from './errors.js';
import { foldThread } from './fold.js';
import type { Ask, Principal, Run, RunUsage } from './model.js';
import { openAsks } from './outcome.js';
import { liveThread } from './retention/expiry.js';
import { traceOf } from './run-context.js';

export interface ThreadView {
  threadId: string;
  agentId: string;
  createdAt: string;
  messages: Message[];
  /** The run holding the thread now, if any. */
  activeRun?: RunSummary;
  /** Runs waiting their turn, in arrival order. */
  queue: RunSummary[];
  /** The waiting run's open asks, with their expiry. */
  openAsks: (Pick<Ask, 'id' | 'kind' | 'expiresAt' | 'toolCallId' | 'toolCallName'> & { runId: string; reason?: string })[];
  runs: RunSummary[];
}

export interface RunSummary {
  runId: string;
  status: Run['status'];
  parentRunId?: string;
  createdAt: string;
  outcome?: Run['outcome'];
  reason?: string;
  /** What the run used, once it has settled. */
  usage?: RunUsage;
  /** The trace the run is in (its context's `traceparent`), when it carries one. */
  traceId?: string;
}

export async function threadView(deps: Core, threadId: string, principal: Principal): Promise<Result<ThreadView>> {
  const thread = await liveThread(deps, { tenant: principal.tenant, threadId });
  if (!thread) return refuse('thread_not_found', `no thread "${threadId}"`);
  const runs = await deps.store.runs.listOfThread(thread);
  const waiting = runs.find((run) => run.runId === thread.waitingRunId);
  const active = runs.find((run) => run.status === 'running' || run.status === 'cancelling');
  return ok({
    threadId,
    agentId: thread.agentId,
    createdAt: thread.createdAt,
    messages: await foldThread(deps.store, runs),
    ...(active ? { activeRun: summary(active) } : {}),
    queue: runs.filter((run) => run.status === 'queued').map(summary),
    openAsks: openAsks(waiting).map((ask) => ({
      runId: waiting!.runId,
      id: ask.id,
      kind: ask.kind,
      ...(ask.interrupt?.reason !== undefined ? { reason: ask.interrupt.reason } : {}),
      ...(ask.expiresAt !== undefined ? { expiresAt: ask.expiresAt } : {}),
      ...(ask.toolCallId !== undefined ? { toolCallId: ask.toolCallId } : {}),
      ...(ask.toolCallName !== undefined ? { toolCallName: ask.toolCallName } : {}),
    })),
    runs: runs.map(summary),
  });
}

export function summary(run: Run): RunSummary {
  return {
    runId: run.runId,
    status: run.status,
    createdAt: run.createdAt,
    ...(run.parentRunId !== undefined ? { parentRunId: run.parentRunId } : {}),
    ...(run.outcome !== undefined ? { outcome: run.outcome } : {}),
    ...(run.reason !== undefined ? { reason: run.reason } : {}),
    ...(run.usage !== undefined ? { usage: run.usage } : {}),
    ...traceOf(run),
  };
}
