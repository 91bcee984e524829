/** What the scripted agent says in one run. */
export interface Script {
  /** Events in the run, RUN_STARTED and RUN_FINISHED included (at least 4). */
  events: number;
  /** Pause between two events; 0 emits as fast as the socket takes them. */
  intervalMs: number;
  /** Characters per text delta (a token is 4–8). */
  deltaChars: number;
}

type Event = { type: string } & Record<string, unknown>;

/** RUN_STARTED, one assistant message streamed in `events - 4` deltas, RUN_FINISHED. */
export function script(input: { threadId: string; runId: string }, plan: Script): Event[] {
  const messageId = `m-${input.runId}`;
  const events: Event[] = [
    { type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId },
    { type: 'TEXT_MESSAGE_START', messageId, role: 'assistant' },
  ];
  const word = 'lorem ipsum dolor sit amet '.repeat(Math.ceil(plan.deltaChars / 27) + 1);
  for (let i = 0; i < plan.events - 4; i++) {
    const at = (i * 7) % 27;
    events.push({ type: 'TEXT_MESSAGE_CONTENT', messageId, delta: word.slice(at, at + plan.deltaChars) });
  }
  events.push({ type: 'TEXT_MESSAGE_END', messageId }, { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId });
  return events;
}

export function scriptQuery(plan: Script): string {
  return `events=${plan.events}&intervalMs=${plan.intervalMs}&deltaChars=${plan.deltaChars}`;
}
