/**
 * A place in a task's record: the last event seen, as `<seq>@<runId>`. A subscriber that hands it
 * back is replayed what came after. The seq comes first because run ids are the caller's (AG-UI)
 * and may contain anything, while a seq is digits.
 */
export interface TaskCursor {
  runId: string;
  seq: number;
}

export function formatCursor(cursor: TaskCursor): string {
  return `${cursor.seq}@${cursor.runId}`;
}

export function parseCursor(text: string): TaskCursor | undefined {
  const match = /^(\d{1,15})@(.+)$/s.exec(text);
  return match ? { seq: Number(match[1]), runId: match[2] } : undefined;
}
