import { randomUUID } from 'node:crypto';

/** A complete AG-UI `RunAgentInput` with one user message, a fresh run id and `fields` over it: what the box's tests post. */
export function runInput(threadId: string, content: string, fields: Record<string, unknown> = {}) {
  const runId = randomUUID();
  return { threadId, runId, messages: [{ id: `m-${runId}`, role: 'user', content }], tools: [], context: [], state: {}, forwardedProps: {}, ...fields };
}
