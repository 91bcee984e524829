import { RunAgentInputSchema } from '@ag-ui/core/schemas';
import { Hono } from 'hono';
import type { Gateway } from '../core/gateway.js';
import type { Principal } from '../core/model.js';
import { errorResponse } from './http-errors.js';
import { describeIssue, readJson } from './input.js';
import { SSE_HEADERS, sseStream, type SseOptions } from './sse.js';

type Env = { Variables: { principal: Principal } };

/**
 * The AG-UI door: POST a RunAgentInput, read the run as SSE. Extensions (documented in the
 * README): replay-then-tail of a run's events with Last-Event-ID, and cancel.
 */
export function aguiDoor(gateway: Gateway, sse: SseOptions) {
  const door = new Hono<Env>();

  door.post('/:agentId', async (c) => {
    const body = await readJson(c);
    if (!body.ok) return errorResponse(c, 'invalid_input', body.message);
    const parsed = RunAgentInputSchema.safeParse(body.value);
    if (!parsed.success) return errorResponse(c, 'invalid_input', describeIssue('RunAgentInput', parsed.error));
    // Watched from before it exists, a new run's stream needs no read of the store to begin.
    const watch = gateway.watchRun(parsed.data.runId);
    const started = await gateway
      .startRun({ agentId: c.req.param('agentId'), input: parsed.data, door: 'agui', principal: c.get('principal') })
      .catch((error: unknown) => {
        watch.close();
        throw error;
      });
    if (!started.ok || started.value.attached) watch.close();
    if (!started.ok) return errorResponse(c, started.code, started.message, started.retryAfterSeconds);
    const { run, attached } = started.value;
    const created = attached ? undefined : { run, watch };
    return c.body(sseStream((signal) => gateway.followRun(run.runId, 0, signal, created), sse), 200, {
      ...SSE_HEADERS,
      'X-Funduq-Thread-Id': run.threadId,
      'X-Funduq-Run-Id': run.runId,
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
    const run = await gateway.getRun(c.req.param('runId'), c.get('principal'));
    if (!run || run.agentId !== c.req.param('agentId')) return errorResponse(c, 'run_not_found', 'no such run');
    const cancelled = await gateway.cancelRun(run.runId, c.get('principal'));
    if (!cancelled.ok) return errorResponse(c, cancelled.code, cancelled.message);
    const { runId, status, cancelRequested } = cancelled.value;
    return c.json({ runId, status, cancelRequested: cancelRequested ?? false }, 202);
  });

  return door;
}
