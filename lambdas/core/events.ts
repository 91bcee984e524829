import { EventType } from '@ag-ui/core';
import { EventSchema } from '@ag-ui/core/schemas';
import type { AgUiEventRecord } from './model.js';

const KNOWN_TYPES: ReadonlySet<string> = new Set(Object.values(EventType));

export type EventCheck = { ok: true; event: AgUiEventRecord } | { ok: false; message: string };

/**
 * Validates a provider's event with @ag-ui/core's own schema. Event types funduq does not know
 * are kept untouched (a newer agent may speak a newer protocol); the object stored is the one
 * the provider sent, not the parser's copy, so nothing is added or stripped.
 */
export function checkEvent(raw: unknown): EventCheck {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    return { ok: false, message: 'an event must be a JSON object' };
  }
  const type = (raw as { type?: unknown }).type;
  if (typeof type !== 'string' || type.length === 0) {
    return { ok: false, message: 'an event must have a string "type"' };
  }
  const event = raw as AgUiEventRecord;
  if (!KNOWN_TYPES.has(type)) return { ok: true, event };
  const parsed = EventSchema.safeParse(raw);
  if (parsed.success) return { ok: true, event };
  const issue = parsed.error.issues[0];
  const where = issue && issue.path.length > 0 ? ` at ${issue.path.join('.')}` : '';
  return { ok: false, message: `${type} is not a valid AG-UI event${where}: ${issue?.message ?? 'invalid'}` };
}
