import type { Context } from 'hono';

/** Zod 3 and 4 errors both carry `issues` with a path and a message. */
interface IssueList {
  issues: readonly { path: readonly PropertyKey[]; message: string }[];
}

export async function readJson(c: Context): Promise<{ ok: true; value: unknown } | { ok: false; message: string }> {
  const type = c.req.header('Content-Type') ?? '';
  if (type !== '' && !/^application\/(.+\+)?json\b/i.test(type)) {
    return { ok: false, message: `the body must be JSON (Content-Type: application/json), not ${type}` };
  }
  try {
    return { ok: true, value: await c.req.json() };
  } catch {
    return { ok: false, message: 'the body is not valid JSON' };
  }
}

/** A 400's message names the field: `RunAgentInput.messages.0.role: Invalid input`. */
export function describeIssue(shape: string, error: IssueList): string {
  const issue = error.issues[0];
  if (!issue) return `the body is not a valid ${shape}`;
  const path = issue.path.map(String).join('.');
  return `${path ? `${shape}.${path}` : shape}: ${issue.message}`;
}
