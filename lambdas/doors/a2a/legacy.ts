/** A stream update as the SDK's compat layer says it to an A2A 0.3 reader (JSON-schema shapes). */
interface LegacyUpdate {
  kind?: string;
  final?: boolean;
  id?: string;
  contextId?: string;
  status?: { state?: string };
  artifact?: { parts?: unknown[] };
}

/** 0.3 states at which a stream ends without the task having ended: it waits for its caller. */
const INTERRUPTED: ReadonlySet<string> = new Set(['input-required', 'auth-required']);

/**
 * An update of a 0.3 stream as funduq sends it, or undefined when it sends none.
 * - A 0.3 reader knows its stream is over by `final: true` on the last status update. A stream ends
 *   when its task ends or waits for its caller (input-required, auth-required), but the SDK's compat
 *   layer marks only the terminal states final, so a reader of an interrupted task would wait on.
 * - The empty update that closes an artifact (`lastChunk: true`, no parts) is not sent: its text went
 *   out in the chunks before it, and an artifact with no parts says nothing a 0.3 reader can use.
 */
export function legacyUpdate<T>(update: T): T | undefined {
  const said = update as LegacyUpdate;
  if (said.kind === 'artifact-update' && (said.artifact?.parts?.length ?? 0) === 0) return undefined;
  if (said.kind === 'status-update' && INTERRUPTED.has(said.status?.state ?? '')) return { ...update, final: true };
  return update;
}

/**
 * A stream that ends on the task as it stands (a subscription to a task that waits for its caller
 * says the task and ends) ends, for a 0.3 reader, on a status update saying `final: true`.
 */
function finalStatusOf(last: unknown): Record<string, unknown> | undefined {
  const said = last as LegacyUpdate | undefined;
  if (said?.kind !== 'task' || !INTERRUPTED.has(said.status?.state ?? '')) return undefined;
  return { kind: 'status-update', taskId: said.id, contextId: said.contextId, status: said.status, final: true };
}

/**
 * A 0.3 stream with each update as funduq sends it (`legacyUpdate`): JSON-RPC envelopes (their
 * `result`; an error envelope passes as it is), or REST's bare updates.
 */
export async function* legacyStream(updates: AsyncIterable<unknown>, enveloped: boolean): AsyncGenerator<unknown> {
  let last: unknown;
  let envelope: { result?: unknown } | undefined;
  for await (const item of updates) {
    if (!enveloped) {
      const sent = legacyUpdate(item);
      if (sent !== undefined) yield (last = sent);
      continue;
    }
    envelope = item as { result?: unknown };
    if (envelope.result === undefined) {
      last = undefined;
      yield item;
      continue;
    }
    const result = legacyUpdate(envelope.result);
    if (result === undefined) continue;
    last = result;
    yield result === envelope.result ? item : { ...envelope, result };
  }
  const closing = finalStatusOf(last);
  if (closing) yield enveloped ? { ...envelope, result: closing } : closing;
}
