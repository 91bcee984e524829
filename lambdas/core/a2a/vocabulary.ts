import type { Message, Part, Role, TaskState } from '@a2a-js/sdk';

/**
 * A2A 1.0's TaskState and Role numbers (proto `lf.a2a.v1`). The core imports the SDK's types and
 * nothing at run time, so the enum members it uses are named here once.
 */
export const TaskStates = {
  SUBMITTED: 1,
  WORKING: 2,
  COMPLETED: 3,
  FAILED: 4,
  CANCELED: 5,
  INPUT_REQUIRED: 6,
  REJECTED: 7,
  AUTH_REQUIRED: 8,
} as const satisfies Record<string, TaskState>;

export const Roles = { USER: 1, AGENT: 2 } as const satisfies Record<string, Role>;

/** States a task never leaves (A2A 1.0 §4.1.3). */
export const TERMINAL_TASK_STATES: ReadonlySet<TaskState> = new Set<TaskState>([
  TaskStates.COMPLETED,
  TaskStates.FAILED,
  TaskStates.CANCELED,
  TaskStates.REJECTED,
]);

/** States where a task's stream ends: it is done, or it waits for its caller. */
export const SETTLED_TASK_STATES: ReadonlySet<TaskState> = new Set<TaskState>([
  ...TERMINAL_TASK_STATES,
  TaskStates.INPUT_REQUIRED,
  TaskStates.AUTH_REQUIRED,
]);

/**
 * Signed push notifications: the agent card names this extension, with the JWKS URL in its
 * params, and every push carries the gateway's JWT in `PUSH_JWT_HEADER` (also as
 * `Authorization: Bearer` when its config brings no authentication of its own).
 */
export const PUSH_SIGNING_EXTENSION = 'https://github.com/hukaichun/funduq/ext/push-signing/v1';
export { PUSH_JWT_HEADER } from '../ports.js';

/** funduq's own key in A2A `metadata`, beside the caller's and the agent's keys. */
export const FUNDUQ_METADATA_KEY = 'funduq';

export function textPart(text: string): Part {
  return { content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: '' };
}

export function dataPart(data: unknown): Part {
  return { content: { $case: 'data', value: data }, metadata: undefined, filename: '', mediaType: 'application/json' };
}

export function urlPart(url: string, mediaType = '', filename = ''): Part {
  return { content: { $case: 'url', value: url }, metadata: undefined, filename, mediaType };
}

export function a2aMessage(fields: {
  messageId: string;
  role: Role;
  parts: Part[];
  contextId: string;
  taskId: string;
  metadata?: Record<string, unknown>;
}): Message {
  return { extensions: [], referenceTaskIds: [], ...fields, metadata: fields.metadata };
}
