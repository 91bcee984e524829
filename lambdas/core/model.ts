import type { Interrupt, RunAgentInput } from '@ag-ui/core';

/** queued → running → completed | failed | cancelled, with cancelling between running and the end. */
export type RunStatus = 'queued' | 'running' | 'cancelling' | 'completed' | 'failed' | 'cancelled';

export const TERMINAL_STATUSES: readonly RunStatus[] = ['completed', 'failed', 'cancelled'];

export function isTerminal(status: RunStatus): boolean {
  return TERMINAL_STATUSES.includes(status);
}

/** Which door a run came through: AG-UI callers send the whole conversation, A2A callers only the new message. */
export type DoorName = 'agui' | 'a2a';

export type AskState = 'open' | 'answered' | 'expired' | 'cancelled';

/**
 * Something a finished run left open: an interrupt of an `interrupt` outcome, or a tool call
 * started with no result. Asks of one run are answered together, so they live on the run's record.
 */
export interface Ask {
  id: string;
  kind: 'interrupt' | 'tool_call';
  state: AskState;
  /** The interrupt as the agent sent it (kind `interrupt`). */
  interrupt?: Interrupt;
  toolCallId?: string;
  toolCallName?: string;
  expiresAt?: string;
  /** The run that answered, cancelled or (for `expired`) nothing. */
  closedByRunId?: string;
}

export interface Run {
  runId: string;
  threadId: string;
  agentId: string;
  tenant: string;
  principal: string;
  door: DoorName;
  status: RunStatus;
  /** Position in the thread's arrival order (1, 2, …), given by the thread's counter. */
  arrival: number;
  /** The run this one answers. */
  parentRunId?: string;
  /** The running run this one asked to join (an interjection). */
  addressedRunId?: string;
  /** The first run of the lineage: the A2A task id. */
  rootRunId: string;
  /** The input as the caller sent it (funduq's own annotations excluded). */
  input: RunAgentInput;
  createdAt: string;
  startedAt?: string;
  endedAt?: string;
  /** How a `completed` run ended, as AG-UI 1.0 names it. */
  outcome?: 'success' | 'interrupt' | 'cancelled';
  /** A stable code for why a run failed or was cancelled. */
  reason?: string;
  /** For a person to read, beside `reason`. */
  message?: string;
  cancelRequested?: boolean;
  asks?: Record<string, Ask>;
  /** The seq of the run's last stored event, set when the run settles. */
  lastSeq?: number;
  /**
   * The run holds one of its tenant's places (a limit on the tenant's unsettled runs was set when
   * it was accepted), to give back when it settles.
   */
  tenantPlace?: boolean;
}

export interface Thread {
  threadId: string;
  agentId: string;
  tenant: string;
  createdAt: string;
  /**
   * Places held by the thread's runs not yet settled (queued or running): held on the thread so
   * the queue limit is one conditional write.
   */
  unsettled: number;
  /** The thread's arrival counter. */
  arrivals: number;
  /** The latest run that settled with asks; its record says whether they are still open. */
  waitingRunId?: string;
}

/**
 * What names a thread. A thread id is the caller's choice (AG-UI honours it), so it is unique only
 * within its tenant: two tenants' "t1" are two threads. A `Run` names its thread this way too.
 */
export type ThreadRef = Pick<Thread, 'tenant' | 'threadId'>;

/**
 * One string for a thread across tenants, for store keys and thread-queue message groups: the
 * tenant with its "%" and "/" escaped (so the first "/" ends it), a "/", then the thread id.
 */
export function threadKey(thread: ThreadRef): string {
  return `${thread.tenant.replaceAll('%', '%25').replaceAll('/', '%2F')}/${thread.threadId}`;
}

/**
 * Ids a caller chooses (AG-UI thread and run ids, A2A message and push config ids) are 1 to 256
 * characters: they become parts of store keys, which DynamoDB holds to 2 KB (1 KB for sort keys).
 */
export const MAX_CALLER_ID_LENGTH = 256;

/** Why a caller's id cannot be taken, or nothing when it can. */
export function callerIdProblem(name: string, id: string): string | undefined {
  return id.length >= 1 && id.length <= MAX_CALLER_ID_LENGTH ? undefined : `${name} must be 1 to ${MAX_CALLER_ID_LENGTH} characters`;
}

/** One AG-UI event of a run, as stored: `seq` is 1, 2, … per run. */
export interface StoredEvent {
  runId: string;
  seq: number;
  event: AgUiEventRecord;
  /**
   * The event as JSON, when the store already wrote or read it so: framing reuses it instead of
   * serialising the event again (the relay's hot path).
   */
  json?: string;
}

/** An AG-UI event as JSON; unknown event types are kept untouched. */
export type AgUiEventRecord = { type: string } & Record<string, unknown>;

export interface AgentProviderSpec {
  kind: string;
  url?: string;
  headers?: Record<string, string>;
}

/** What an agent can do, in A2A's `AgentSkill` words (for its agent card and the roster). */
export interface AgentSkill {
  id: string;
  name: string;
  description: string;
  tags: string[];
  examples?: string[];
}

/** A `disabled` agent takes no new runs; runs already accepted still run (drain, then delete). */
export type AgentStatus = 'enabled' | 'disabled';

export interface Agent {
  id: string;
  description: string;
  provider: AgentProviderSpec;
  takesInterjections: boolean;
  timeoutSeconds: number;
  idleTimeoutSeconds: number;
  skills?: AgentSkill[];
  /** Absent means `enabled`. */
  status?: AgentStatus;
}

export interface Principal {
  id: string;
  tenant: string;
}

export const ANONYMOUS: Principal = { id: 'anonymous', tenant: 'anonymous' };

/**
 * Where a task's updates are pushed (an A2A push notification config), kept durably per task.
 * The task is a root run id; `deadLetter` records the last notification no try could deliver.
 */
export interface PushConfig {
  taskId: string;
  configId: string;
  tenant: string;
  url: string;
  token?: string;
  authentication?: { scheme: string; credentials?: string };
  createdAt: string;
  deadLetter?: { at: string; error: string; attempts: number; notification: unknown };
}

/**
 * A caller's message id taken within a scope (tenant, agent, context), so that a repeat within
 * the claim's life returns the run the first one started instead of starting another.
 */
export interface MessageClaim {
  key: string;
  runId: string;
  threadId: string;
  /** Epoch seconds: DynamoDB's TTL unit. The claim is void after it even before TTL removes it. */
  expiresAt: number;
}
