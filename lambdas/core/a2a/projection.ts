import type { Artifact, Message, Part, StreamResponse, Task, TaskState } from '@a2a-js/sdk';
import { EventType, type ContentPart, type Message as AgUiMessage, type UserMessage } from '@ag-ui/core';
import type { AgUiEventRecord, Ask, Run, StoredEvent } from '../model.js';
import { openAsks } from '../outcome.js';
import { traceOf } from '../run-context.js';
import { sumUsage } from '../usage.js';
import { formatCursor } from './cursor.js';
import { taskStateAt, taskStateOf } from './task-state.js';
import { a2aMessage, dataPart, FUNDUQ_METADATA_KEY, Roles, SETTLED_TASK_STATES, TaskStates, textPart, urlPart } from './vocabulary.js';

/** What a reader asked to see of a task (A2A `historyLength`, `includeArtifacts`). */
export interface TaskView {
  /** Undefined: the whole history; 0: none; N: the last N messages. */
  historyLength?: number;
  includeArtifacts?: boolean;
}

/** An open ask as A2A callers see it under `metadata.funduq.openAsks`. */
export interface OpenAskView {
  id: string;
  kind: Ask['kind'];
  runId: string;
  reason?: string;
  message?: string;
  toolCallId?: string;
  toolCallName?: string;
  expiresAt?: string;
  responseSchema?: Record<string, unknown>;
}

type HistoryEntry = { kind: 'message'; message: Message } | { kind: 'agent'; messageId: string };

/** Event types with A2A words of their own; every other event travels as `metadata.funduq.agui_event`. */
const SPOKEN: ReadonlySet<string> = new Set([
  EventType.RUN_STARTED,
  EventType.RUN_FINISHED,
  EventType.RUN_ERROR,
  EventType.TEXT_MESSAGE_START,
  EventType.TEXT_MESSAGE_CONTENT,
  EventType.TEXT_MESSAGE_END,
  EventType.TEXT_MESSAGE_CHUNK,
]);

/**
 * A task (the lineage of a root run and its answers) projected from the record: runs as their
 * records say, and their stored AG-UI events in order. It is a fold, and the only projection:
 * a stream feeds it as the record grows and sends the updates each step returns; a read feeds it
 * the whole record and takes `task()`. So a stream and a later GetTask agree.
 */
export class TaskProjection {
  private readonly runs: Run[] = [];
  private readonly started = new Set<string>();
  private readonly history: HistoryEntry[] = [];
  /** Agent text, one artifact per AG-UI message id, in the order the messages began. */
  private readonly artifacts = new Map<string, { text: string; emitted: boolean }>();
  private readonly aguiEvents: { runId: string; seq: number; event: AgUiEventRecord }[] = [];
  private announced: TaskState | undefined;
  private position: { runId: string; seq: number } | undefined;

  constructor(
    readonly taskId: string,
    readonly contextId: string,
  ) {}

  /** Where the projection stands in the record: the cursor of the last event it took. */
  get cursor(): string | undefined {
    return this.position && formatCursor(this.position);
  }

  get state(): TaskState {
    return this.status().state;
  }

  /** The last run of the lineage, as last observed. */
  get tail(): Run | undefined {
    return this.runs.at(-1);
  }

  /** A run of the lineage as its record now says: a new run joins the lineage with its caller's message. */
  observeRun(run: Run): StreamResponse[] {
    const index = this.runs.findIndex((known) => known.runId === run.runId);
    if (index >= 0) {
      this.runs[index] = run;
    } else {
      this.runs.push(run);
      for (const message of callerMessages(run, this.contextId, this.taskId)) this.history.push({ kind: 'message', message });
    }
    return this.announce();
  }

  /** One stored event of a run of the lineage, in order. */
  applyEvent(stored: StoredEvent): StreamResponse[] {
    this.position = { runId: stored.runId, seq: stored.seq };
    const { event } = stored;
    const e = event as Record<string, unknown>;
    switch (event.type) {
      case EventType.RUN_STARTED:
        this.started.add(stored.runId);
        return this.announce();
      case EventType.RUN_FINISHED:
      case EventType.RUN_ERROR:
        // The end is said by the run's record when it settles (a finished run may still leave asks).
        return [];
      case EventType.TEXT_MESSAGE_START:
        this.beginArtifact(String(e.messageId));
        return [];
      case EventType.TEXT_MESSAGE_CONTENT:
      case EventType.TEXT_MESSAGE_CHUNK: {
        const messageId = typeof e.messageId === 'string' ? e.messageId : '';
        const delta = typeof e.delta === 'string' ? e.delta : '';
        if (!messageId) return [];
        const artifact = this.beginArtifact(messageId);
        artifact.text += delta;
        const append = artifact.emitted;
        artifact.emitted = true;
        return [this.artifactUpdate(messageId, delta === '' && append ? [] : [textPart(delta)], append, false)];
      }
      case EventType.TEXT_MESSAGE_END: {
        const messageId = String(e.messageId);
        const artifact = this.beginArtifact(messageId);
        const append = artifact.emitted;
        artifact.emitted = true;
        return [this.artifactUpdate(messageId, append ? [] : [textPart(artifact.text)], append, true)];
      }
      default:
        if (SPOKEN.has(event.type)) return [];
        this.aguiEvents.push({ runId: stored.runId, seq: stored.seq, event });
        return [this.statusUpdate({ agui_event: event })];
    }
  }

  /** The status as it stands, as an update, whether or not it changed (a push for a status change). */
  statusNow(): StreamResponse {
    this.announced = this.state;
    return this.statusUpdate({});
  }

  task(view: TaskView = {}): Task {
    const history = this.history.map((entry) => (entry.kind === 'message' ? entry.message : this.agentMessage(entry.messageId)));
    const status = this.status();
    const metadata: Record<string, unknown> = {
      runs: this.runs.map((run) => ({
        runId: run.runId,
        status: run.status,
        ...(run.reason !== undefined ? { reason: run.reason } : {}),
        ...traceOf(run),
      })),
      // The task's trace is its latest run's (an answer, hours later, may be in a trace of its own).
      ...(this.tail ? traceOf(this.tail) : {}),
      ...this.annotations(),
      ...this.usage(),
    };
    if (this.aguiEvents.length > 0) metadata.agui_events = this.aguiEvents;
    if (this.cursor !== undefined) metadata.cursor = this.cursor;
    return {
      id: this.taskId,
      contextId: this.contextId,
      status: { state: status.state, message: status.message, timestamp: status.timestamp },
      artifacts: view.includeArtifacts === false ? [] : [...this.artifacts.keys()].map((id) => this.artifact(id)),
      history: lastOf(history, view.historyLength),
      metadata: { [FUNDUQ_METADATA_KEY]: metadata },
    };
  }

  private beginArtifact(messageId: string): { text: string; emitted: boolean } {
    let artifact = this.artifacts.get(messageId);
    if (!artifact) {
      artifact = { text: '', emitted: false };
      this.artifacts.set(messageId, artifact);
      this.history.push({ kind: 'agent', messageId });
    }
    return artifact;
  }

  private artifact(messageId: string, parts?: Part[]): Artifact {
    return {
      artifactId: messageId,
      name: '',
      description: '',
      parts: parts ?? [textPart(this.artifacts.get(messageId)?.text ?? '')],
      metadata: undefined,
      extensions: [],
    };
  }

  private agentMessage(messageId: string): Message {
    return a2aMessage({
      messageId,
      role: Roles.AGENT,
      parts: [textPart(this.artifacts.get(messageId)?.text ?? '')],
      contextId: this.contextId,
      taskId: this.taskId,
    });
  }

  /** A status update when the state changed since the last one said. */
  private announce(): StreamResponse[] {
    const { state } = this.status();
    if (state === this.announced) return [];
    this.announced = state;
    return [this.statusUpdate({})];
  }

  private statusUpdate(extra: Record<string, unknown>): StreamResponse {
    const status = this.status();
    return {
      payload: {
        $case: 'statusUpdate',
        value: {
          taskId: this.taskId,
          contextId: this.contextId,
          status: { state: status.state, message: status.message, timestamp: status.timestamp },
          // A task that has settled (done, or waiting for its caller) says what its runs used.
          metadata: {
            [FUNDUQ_METADATA_KEY]: { ...this.annotations(), ...(SETTLED_TASK_STATES.has(status.state) ? this.usage() : {}), ...extra, ...this.where() },
          },
        },
      },
    };
  }

  private artifactUpdate(messageId: string, parts: Part[], append: boolean, lastChunk: boolean): StreamResponse {
    return {
      payload: {
        $case: 'artifactUpdate',
        value: {
          taskId: this.taskId,
          contextId: this.contextId,
          artifact: this.artifact(messageId, parts),
          append,
          lastChunk,
          metadata: { [FUNDUQ_METADATA_KEY]: this.where() },
        },
      },
    };
  }

  private where(): Record<string, unknown> {
    return this.position ? { cursor: formatCursor(this.position), runId: this.position.runId } : {};
  }

  /** What funduq says beside the state: a cancel asked for, and the asks waiting for an answer. */
  /** What the lineage's settled runs used, summed: tokens per provider and model, cost per currency, events and bytes. */
  private usage(): Record<string, unknown> {
    const usages = this.runs.flatMap((run) => (run.usage ? [run.usage] : []));
    if (usages.length === 0) return {};
    return {
      usage: {
        runs: usages.length,
        events: usages.reduce((sum, usage) => sum + usage.events, 0),
        bytes: usages.reduce((sum, usage) => sum + usage.bytes, 0),
        ...sumUsage(usages),
      },
    };
  }

  private annotations(): Record<string, unknown> {
    const tail = this.tail;
    if (!tail) return {};
    const asks = openAsks(tail);
    return {
      ...(tail.cancelRequested ? { cancelRequested: true } : {}),
      ...(asks.length > 0 ? { openAsks: asks.map((ask) => openAskView(tail.runId, ask)) } : {}),
    };
  }

  /** The lineage's state is its tail's (design §5). */
  private status(): { state: TaskState; message?: Message; timestamp?: string } {
    const tail = this.tail;
    if (!tail) return { state: TaskStates.SUBMITTED };
    const state = taskStateOf(tail, this.started.has(tail.runId));
    const timestamp = taskStateAt(tail);
    const say = (text: string) => ({ state, timestamp, message: this.statusMessage(tail, text) });
    const asks = Object.values(tail.asks ?? {});
    switch (state) {
      case TaskStates.CANCELED:
        return say(tail.status === 'cancelled' ? tail.message ?? `cancelled (${tail.reason ?? 'cancel_requested'})` : 'cancelled while waiting for an answer');
      case TaskStates.REJECTED:
        return say(tail.message ?? tail.reason ?? 'the run failed');
      case TaskStates.FAILED: {
        if (tail.status === 'failed') return say(tail.message ?? tail.reason ?? 'the run failed');
        const expired = asks.filter((ask) => ask.state === 'expired');
        const when = expired.map((ask) => ask.expiresAt).find((at) => at !== undefined);
        return say(`expired: the ask${expired.length > 1 ? 's' : ''} ${expired.map((a) => a.id).join(', ')} went unanswered${when ? ` until ${when}` : ''}`);
      }
      case TaskStates.INPUT_REQUIRED:
      case TaskStates.AUTH_REQUIRED:
        return say(
          asks
            .filter((ask) => ask.state === 'open')
            .map(askText)
            .join('\n'),
        );
      default:
        return { state, timestamp };
    }
  }

  private statusMessage(run: Run, text: string): Message {
    return a2aMessage({
      messageId: `${run.runId}#status`,
      role: Roles.AGENT,
      parts: [textPart(text)],
      contextId: this.contextId,
      taskId: this.taskId,
    });
  }
}

/** Projects a whole lineage at once: the read path of the same fold the streams use. */
export function projectTask(root: Run, lineage: readonly { run: Run; events: readonly StoredEvent[] }[], view?: TaskView): Task {
  const projection = new TaskProjection(root.runId, root.threadId);
  for (const { run, events } of lineage) replayRun(projection, run, events);
  return projection.task(view);
}

/**
 * Feeds one run whole, in the order it happened: the run as it stood while it recorded its
 * events, the events, then its record as it is now. A settled record seen first would put its
 * end before its events.
 */
export function replayRun(projection: TaskProjection, run: Run, events: readonly StoredEvent[]): StreamResponse[] {
  const updates = projection.observeRun(beforeEvents(run));
  for (const stored of events) updates.push(...projection.applyEvent(stored));
  updates.push(...projection.observeRun(run));
  return updates;
}

/**
 * A run as it stood before its first event: queued, with nothing of its start or end. Fed its
 * events, the projection moves it on as a live stream saw it (RUN_STARTED: WORKING).
 */
export function beforeEvents(run: Run): Run {
  if (run.status === 'queued') return run;
  const {
    startedAt: _startedAt,
    endedAt: _endedAt,
    outcome: _outcome,
    reason: _reason,
    message: _message,
    asks: _asks,
    lastSeq: _lastSeq,
    cancelRequested: _cancelRequested,
    closingEvents: _closingEvents,
    usage: _usage,
    ...rest
  } = run;
  return { ...rest, status: 'queued' };
}

function openAskView(runId: string, ask: Ask): OpenAskView {
  const interrupt = ask.interrupt;
  return {
    id: ask.id,
    kind: ask.kind,
    runId,
    ...(interrupt?.reason !== undefined ? { reason: interrupt.reason } : {}),
    ...(interrupt?.message !== undefined ? { message: interrupt.message } : {}),
    ...(ask.toolCallId !== undefined ? { toolCallId: ask.toolCallId } : {}),
    ...(ask.toolCallName !== undefined ? { toolCallName: ask.toolCallName } : {}),
    ...(ask.expiresAt !== undefined ? { expiresAt: ask.expiresAt } : {}),
    ...(interrupt?.responseSchema !== undefined ? { responseSchema: interrupt.responseSchema } : {}),
  };
}

function askText(ask: Ask): string {
  if (ask.interrupt) return ask.interrupt.message ?? ask.interrupt.reason;
  return `the agent called ${ask.toolCallName ?? 'a tool'} (${ask.toolCallId}) and waits for its result`;
}

function lastOf<T>(items: T[], count: number | undefined): T[] {
  if (count === undefined) return items;
  return count <= 0 ? [] : items.slice(-count);
}

/**
 * The caller's words that started a run. A2A runs carry only the new message; AG-UI runs carry
 * the whole conversation, of which the trailing user messages are the new ones. An answer (resume
 * entries, tool results) is shown as one user message named by the answering run.
 */
function callerMessages(run: Run, contextId: string, taskId: string): Message[] {
  const messages = run.input.messages;
  const resume = run.input.resume ?? [];
  const toolResults = messages.filter((m) => m.role === 'tool');
  if (run.parentRunId !== undefined && (resume.length > 0 || toolResults.length > 0)) {
    const payloads = [
      ...resume.map((entry) => (entry.status === 'cancelled' ? { cancelled: entry.interruptId } : entry.payload)),
      ...toolResults.map((m) => m.content),
    ];
    const distinct = [...new Map(payloads.map((p) => [JSON.stringify(p ?? null), p])).values()];
    const parts = distinct.map((p) => (typeof p === 'string' ? textPart(p) : dataPart(p ?? null)));
    return [a2aMessage({ messageId: run.runId, role: Roles.USER, parts, contextId, taskId })];
  }
  let first = messages.length;
  if (run.door === 'agui') while (first > 0 && messages[first - 1].role === 'user') first -= 1;
  else first = 0;
  return messages
    .slice(first)
    .filter((m): m is UserMessage => m.role === 'user')
    .map((m) =>
      a2aMessage({
        messageId: m.id,
        role: Roles.USER,
        parts: userParts(m),
        contextId,
        taskId,
        metadata: m.metadata as Record<string, unknown> | undefined,
      }),
    );
}

function userParts(message: UserMessage): Part[] {
  const content = (message as AgUiMessage & { content: string | ContentPart[] }).content;
  if (typeof content === 'string') return [textPart(content)];
  return content.map((part) => {
    if (part.type === 'text') return textPart(part.text);
    const filename = typeof part.metadata?.filename === 'string' ? part.metadata.filename : '';
    const { source } = part;
    const mediaType = source.mimeType ?? '';
    // Inline bytes come back as a data: URL, which needs no binary type in the core.
    const url = source.type === 'data' ? `data:${source.mimeType};base64,${source.value}` : source.value;
    return urlPart(url, mediaType, filename);
  });
}
