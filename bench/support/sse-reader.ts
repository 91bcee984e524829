import { createParser } from 'eventsource-parser';

/** Epoch ms with sub-ms precision, comparable with the agent's `rawEvent.sentAt`. */
export const now = () => performance.timeOrigin + performance.now();

export interface Read {
  status: number;
  startedAt: number;
  /** Arrival time of every event, in order. */
  arrivals: number[];
  types: string[];
  /** Per event, when asked for: arrival − the agent's send time (`rawEvent.sentAt`). */
  latencies?: number[];
  endedAt: number;
  error?: string;
}

/**
 * POSTs a RunAgentInput and reads the SSE answer with a plain parser, no state kept: the
 * harness's own cost stays small when it reads hundreds of streams at once (scenarios 4, 5).
 * `onHeaders` fires when the response headers are in (the run is accepted and numbered).
 */
export async function readRun(
  url: string,
  input: { threadId: string; runId: string; forwardedProps?: unknown },
  onHeaders?: () => void,
  headers: Record<string, string> = {},
  { latencies = false }: { latencies?: boolean } = {},
): Promise<Read> {
  const startedAt = now();
  const arrivals: number[] = [];
  const types: string[] = [];
  const latenciesOf: number[] | undefined = latencies ? [] : undefined;
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...headers },
      body: JSON.stringify({
        threadId: input.threadId,
        runId: input.runId,
        messages: [{ id: `u-${input.runId}`, role: 'user', content: 'go' }],
        tools: [],
        context: [],
        state: {},
        forwardedProps: input.forwardedProps ?? {},
      }),
    });
  } catch (error) {
    onHeaders?.();
    return { status: 0, startedAt, arrivals, types, endedAt: now(), error: String(error) };
  }
  onHeaders?.();
  if (!response.ok || !response.body) {
    const text = await response.text().catch(() => '');
    return { status: response.status, startedAt, arrivals, types, endedAt: now(), error: text.slice(0, 300) };
  }
  const parser = createParser({
    onEvent: (message) => {
      arrivals.push(now());
      // The type is near the start; parsing the whole event is the stock client's job, not this reader's.
      const match = /"type":"([A-Z_]+)"/.exec(message.data);
      types.push(match ? match[1] : '?');
      const sent = latenciesOf && /"sentAt":([0-9.]+)/.exec(message.data);
      if (sent) latenciesOf.push(arrivals.at(-1)! - Number(sent[1]));
    },
  });
  const decoder = new TextDecoder();
  try {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) parser.feed(decoder.decode(chunk, { stream: true }));
  } catch (error) {
    return { status: response.status, startedAt, arrivals, types, endedAt: now(), error: String(error) };
  }
  return { status: response.status, startedAt, arrivals, types, endedAt: now(), ...(latenciesOf ? { latencies: latenciesOf } : {}) };
}

/** A run that ended with RUN_FINISHED after `expected` events, or why it did not. */
export function runProblem(read: Read, expected: number): string | undefined {
  if (read.error !== undefined) return `HTTP ${read.status}: ${read.error}`;
  if (read.types.at(-1) !== 'RUN_FINISHED') return `ended with ${read.types.at(-1) ?? 'nothing'} after ${read.types.length} events`;
  if (read.types.length !== expected) return `${read.types.length} events, expected ${expected}`;
  return undefined;
}
