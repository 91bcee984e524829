import type { Core } from '../deps.js';
import { ok, refuse, type Result } from '../errors.js';
import type { Agent, Principal, Run, RunContext } from '../model.js';
import { liveRun } from '../retention/expiry.js';
import type { PushSender } from '../ports.js';

export interface A2aSettings {
  /** How long a message id stays taken in its context: a repeat within it returns the first task (A2A idempotency). */
  messageIdTtlSeconds: number;
  /** ListTasks page size when the caller names none (A2A 1.0: 50). */
  defaultPageSize: number;
  maxPageSize: number;
}

export const DEFAULT_A2A_SETTINGS: A2aSettings = { messageIdTtlSeconds: 24 * 60 * 60, defaultPageSize: 50, maxPageSize: 100 };

/** What the A2A use cases take beside the core's own ports. */
export interface A2aDeps {
  /** Without a sender, no push notifications: a push config is refused. */
  push?: PushSender;
  settings: A2aSettings;
}

/** The core of the A2A door: what every A2A use case takes. */
export type A2aCore = Core & { a2a: A2aDeps };

/** Who asks, at which agent's A2A endpoint. */
export interface Caller {
  agentId: string;
  principal: Principal;
  /** The agent as the door read it for this request (its card), so a send need not read it again. */
  agent?: Agent;
  /** What a run the request starts carries (`Run.context`): the door took it from the request's headers. */
  context?: RunContext;
  /** The door's id of the request: a run it starts, and a cancel it makes, name it in their audit records. */
  requestId?: string;
}

/** The task a caller names: its root run, at the caller's agent, in the caller's tenant. */
export async function findTask(core: Core, caller: Caller, taskId: string): Promise<Result<Run>> {
  const { store } = core;
  // A task whose context retention ended reads as an unknown one.
  const root = taskId ? await liveRun(core, await store.runs.getOf(caller.principal.tenant, taskId)) : undefined;
  // An answer run is part of a task, not a task: only roots are found by id.
  if (!root || root.agentId !== caller.agentId || root.rootRunId !== root.runId) {
    return refuse('run_not_found', `no task "${taskId}" at agent "${caller.agentId}"`);
  }
  return ok(root);
}
