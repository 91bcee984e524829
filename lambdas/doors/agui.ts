import { RunAgentInputSchema } from '@ag-ui/core/schemas';
import { Hono } from 'hono';
import type { Gateway } from '../core/gateway.js';
import type { Principal } from '../core/model.js';
import { contextOfHeaders } from '../core/run-context.js';
import { errorResponse } from './http-errors.js';
import { describeIssue, readJson } from './input.js';
import { SSE_HEADERS, sseStream, type SseOptions } from './sse.js';
import { runHeaders } from './tracing.js';
import { noteAudit, noteCancelled, noteStarted, requestIdOf } from './audit.js';
import { addressedRunIdOf } from '../core/interjection.js';

type Env = { Variables: { principal: Principal } };

/**
 * The AG-UI door: POST a RunAgentInput, read the run as SSE. Extensions (documented in
 * docs/doors.md): replay-then-tail of a run's events with Last-Event-ID, and cancel.
 */
export function aguiDoor(gateway: Gateway, sse: SseOptions) {
  const door = new Hono<Env>();

  door.post('/:agentId', async (c) => {
    const note = noteAudit(c, { action: 'run.submitted', target: `agent:${c.req.param('agentId')}` });
    const body = await readJson(c);
    if (!body.ok) return errorResponse(c, 'invalid_input', body.message);
    const parsed = RunAgentInputSchema.safeParse(body.value);
    if (!parsed.success) return errorResponse(c, 'invalid_input', describeIssue('RunAgentInput', parsed.error));
    // What it asks to be, until the record says what it became.
    note.target = `run:${parsed.data.runId}`;
    note.action = (parsed.data.resume?.length ?? 0) > 0 ? 'ask.answered' : addressedRunIdOf(parsed.data) ? 'run.interjected' : 'run.submitted';
    const context = contextOfHeaders(runHeaders(c));
    const started = await gateway.startAndFollow({ agentId: c.req.param('agentId'), input: parsed.data, door: 'agui', principal: c.get('principal'), requestId: requestIdOf(c), ...(context ? { context } : {}) });
    if (!started.ok) return errorResponse(c, started.code, started.message, started.retryAfterSeconds);
    const { run, events } = started.value;
    noteStarted(note, run);
    return c.body(sseStream(events, sse), 200, {
      ...SSE_HEADERS,
      ...idHeader('X-Funduq-Thread-Id', run.threadId),
      ...idHeader('X-Funduq-Run-Id', run.runId),
    });
  });

  door.get('/:agentId/runs/:runId/events', async (c) => {
    const run = await gateway.getRun(c.req.param('runId'), c.get('principal'));
    if (!run || run.agentId !== c.req.param('agentId')) return errorResponse(c, 'run_not_found', 'no such run');
    const cursor = c.req.header('Last-Event-ID') ?? c.req.query('after') ?? '0';
    if (!/^\d{1,15}$/.test(cursor)) {
      return errorResponse(c, 'invalid_input', 'Last-Event-ID (or ?after=) must be an event id: a whole number');
    }
    return c.body(sseStream((signal) => gateway.followRun(run.runId, Number(cursor), signal), sse), 200, SSE_HEADERS);
  });

  door.post('/:agentId/runs/:runId/cancel', async (c) => {
    const note = noteAudit(c, { action: 'run.cancel_requested', target: `run:${c.req.param('runId')}` });
    const run = await gateway.getRun(c.req.param('runId'), c.get('principal'));
    if (!run || run.agentId !== c.req.param('agentId')) return errorResponse(c, 'run_not_found', 'no such run');
    // A run on a thread bound to its head is cancelled with a signed `cancel` in the JSON body; any
    // other body is none (a cancel of a run on an open thread needs no body, as before).
    const proof: unknown = await c.req.json().then((body: { cancel?: unknown } | null) => body?.cancel, () => undefined);
    const cancelled = await gateway.cancelRun(run.runId, c.get('principal'), proof, requestIdOf(c));
    if (!cancelled.ok) return errorResponse(c, cancelled.code, cancelled.message);
    noteCancelled(note, cancelled.value, requestIdOf(c));
    const { runId, status, cancelRequested } = cancelled.value;
    return c.json({ runId, status, cancelRequested: cancelRequested ?? false }, 202);
  });

  return door;
}

/**
 * An id as a response header, when it can be one as it is: a header value is bytes, and an id a
 * caller chose may hold any character (Cyrillic, emoji, a lone surrogate). Such an id is left out
 * rather than changed; the stream's RUN_STARTED carries it.
 */
function idHeader(name: string, id: string): Record<string, string> {
  return /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(id) ? { [name]: id } : {};
}
