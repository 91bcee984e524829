/** @jsxRuntime automatic */
/** @jsxImportSource hono/jsx */
import type { RunAgentInput } from '@ag-ui/core';
import { RunAgentInputSchema } from '@ag-ui/core/schemas';
import { Hono, type Context, type MiddlewareHandler } from 'hono';
import type { AuditAction, AuditActor, AuditEntry } from '../../core/audit/record.js';
import type { AuditSegment } from '../../core/audit/seal.js';
import type { SealedSegment } from '../../core/ports.js';
import type { Gateway } from '../../core/gateway.js';
import type { Budget, Principal, StoredEvent } from '../../core/model.js';
import { UNSETTLED, type UnsettledStatus } from '../../core/operator.js';
import { auditRequests, noteAudit, noteCancelled, noteStarted, requestIdOf, type AuditNote } from '../audit.js';
import { lostAudit } from '../audit-routes.js';
import { errorResponse } from '../http-errors.js';
import { describeIssue } from '../input.js';
import { BudgetSchema } from '../usage.js';
import { eventStream, framedByTurn, SSE_HEADERS, type SseOptions } from '../sse.js';
import { ASSETS } from './assets.js';
import { documentOf, path, type View } from './layout.js';
import { AgentsPage, AuditPage, CancelPage, RefusalPage, SignInPage, UsagePage, type SegmentView } from './pages/admin.js';
import { OverviewPage } from './pages/overview.js';
import { RunPage } from './pages/run.js';
import { ThreadPage, ThreadsPage, type ThreadFilter } from './pages/threads.js';
import { consoleBase, sessions, type ConsoleAccess, type ConsoleEnv } from './session.js';

export interface ConsoleOptions extends ConsoleAccess {
  /** Leave message text and tool arguments out of every page (`FUNDUQ_CONSOLE_HIDE_CONTENT`). */
  hideContent?: boolean;
  sse: SseOptions;
  onAuditLost?: (entry: AuditEntry, error: unknown) => void;
  /** A sealed segment's payload when its signature is funduq's audit key's, else undefined; absent, signatures are not checked. */
  verifySegment?: (jws: string) => Promise<string | undefined>;
}

const THREADS_PAGE = 50;
/** Events a page of a run's log holds (at most about 1.7 MB of JSON), read from the store this many at a time. */
const EVENTS_PAGE = 5000;
const EVENTS_READ = 1000;

/**
 * The operator's console (`/console`): pages drawn on the server from what the gateway holds, and
 * acts that go through the same use cases as the API's, each audited with the operator as its actor.
 */
export function consoleDoor(gateway: Gateway, options: ConsoleOptions) {
  const door = new Hono<ConsoleEnv>();
  const access = sessions(options);
  const base = consoleBase(options.publicUrl);
  const hideContent = options.hideContent ?? false;
  const view = (c: Context<ConsoleEnv>): View => ({ session: c.get('session'), hideContent, base });
  // Redirects name a path within the console: the browser's base (an API Gateway stage) goes before it.
  const to = (within: string) => (within === '' ? base.slice(0, -1) : `${base}${within}`);
  const render = (c: Context, node: unknown, status?: 200 | 401) => c.html(documentOf(node), status);
  // The operator acts on a tenant's records as a principal of it named "admin" (what its runs' records say).
  const operator = (c: Context<ConsoleEnv>, tenant: string): Principal => ({ id: 'admin', tenant, ...(c.get('session').credentialId ? { credentialId: c.get('session').credentialId } : {}) });

  door.use('*', async (c, next) => {
    await next();
    // A refusal a browser navigated to is a page saying so; its status and code stay what the API's are.
    if (c.res.status >= 400 && c.res.headers.get('Content-Type')?.startsWith('application/json') && (c.req.header('Accept') ?? '').includes('text/html')) {
      const { error } = (await c.res.clone().json()) as { error?: { code: string; message: string } };
      if (error) c.res = c.html(documentOf(<RefusalPage base={base} code={error.code} message={error.message} />), c.res.status as 400);
    }
    c.header('X-Frame-Options', 'DENY');
    c.header('X-Content-Type-Options', 'nosniff');
    c.header('Referrer-Policy', 'same-origin');
    if (!c.res.headers.has('Content-Security-Policy')) c.header('Content-Security-Policy', "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'self'");
  });

  for (const asset of Object.values(ASSETS)) {
    door.get(`/${asset.path}`, (c) => c.body(asset.body, 200, { 'Content-Type': asset.type, 'Cache-Control': 'public, max-age=31536000, immutable' }));
  }

  door.get('/sign-in', (c) => render(c, <SignInPage base={base} next={safeNext(c.req.query('next'))} failed={false} />));
  door.post('/sign-in', async (c) => {
    if (!access.sameOrigin(c)) return errorResponse(c, 'console_cross_origin', "sign in from the console's own page");
    const form = await c.req.parseBody();
    const role = typeof form.token === 'string' ? await access.roleOf(form.token) : undefined;
    const next = safeNext(typeof form.next === 'string' ? form.next : undefined);
    if (!role) return render(c, <SignInPage base={base} next={next} failed />, 401);
    await access.begin(c, role);
    return c.redirect(to(next), 303);
  });

  door.use('*', access.guard);
  door.post('/sign-out', async (c) => {
    if (!access.sameOrigin(c)) return errorResponse(c, 'console_cross_origin', "the console's acts come only from its own pages");
    access.end(c);
    return c.redirect(to('sign-in'), 303);
  });

  // The operator is the admin, named by the token it signed in with (its digest).
  const actorOf = (c: Context): AuditActor => {
    const credentialId = (c.get('session') as ConsoleEnv['Variables']['session'] | undefined)?.credentialId;
    return { kind: 'admin', principal: 'admin', ...(credentialId ? { credentialId } : {}) };
  };
  door.use('*', auditRequests({ write: gateway.audit.write, actorOf, onLost: options.onAuditLost ?? ((entry, error) => console.error(lostAudit(entry, error).message)) }));

  // An act is noted before its session is checked: one refused (a stale form, another site, a
  // read-only session) is recorded with the code it was refused with, as the API's acts are.
  const act = (describe: (c: Context<ConsoleEnv>) => AuditNote): MiddlewareHandler<ConsoleEnv> => async (c, next) => {
    c.set('note', noteAudit(c, describe(c)));
    return access.act(c, next);
  };

  door.get('/', async (c) => render(c, <OverviewPage view={view(c)} overview={await gateway.operator.overview()} />));

  door.get('/threads', async (c) => {
    const state = c.req.query('state');
    const filter: ThreadFilter = {
      ...(c.req.query('tenant') ? { tenant: c.req.query('tenant') } : {}),
      ...(c.req.query('agent') ? { agent: c.req.query('agent') } : {}),
      ...(state === 'active' || state === 'idle' ? { state } : {}),
    };
    const cursor = c.req.query('cursor');
    let page;
    try {
      page = await gateway.operator.threads({ tenant: filter.tenant, agentId: filter.agent, state: filter.state, limit: THREADS_PAGE, ...(cursor ? { cursor } : {}) });
    } catch (error) {
      if (error instanceof RangeError) return errorResponse(c, 'invalid_input', 'cursor: not a cursor this listing gave; start from the first page');
      throw error;
    }
    const agents = (await gateway.listAgents()).map((agent) => agent.id);
    return render(c, <ThreadsPage view={view(c)} filter={filter} threads={page.threads} next={page.cursor} agents={agents} />);
  });

  door.get('/tenants/:tenant/threads/:threadId', async (c) => {
    const tenant = c.req.param('tenant');
    const thread = await gateway.threadView(c.req.param('threadId'), operator(c, tenant));
    if (!thread.ok) return errorResponse(c, thread.code, thread.message);
    const waiting = thread.value.openAsks[0] ? await gateway.getRun(thread.value.openAsks[0].runId, operator(c, tenant)) : undefined;
    const schemas = Object.fromEntries(Object.values(waiting?.asks ?? {}).map((ask) => [ask.id, ask.interrupt?.responseSchema]));
    return render(c, <ThreadPage view={view(c)} tenant={tenant} thread={thread.value} schemas={schemas} />);
  });

  door.get('/tenants/:tenant/runs/:runId', async (c) => {
    const run = await gateway.getRun(c.req.param('runId'), operator(c, c.req.param('tenant')));
    if (!run) return errorResponse(c, 'run_not_found', `no run "${c.req.param('runId')}" of the tenant "${c.req.param('tenant')}"`);
    return render(c, <RunPage view={view(c)} run={run} task={await gateway.operator.task(run)} />);
  });

  door.get('/tenants/:tenant/runs/:runId/events.json', async (c) => {
    const run = await gateway.getRun(c.req.param('runId'), operator(c, c.req.param('tenant')));
    if (!run) return errorResponse(c, 'run_not_found', 'no such run');
    const after = c.req.query('after') ?? '0';
    if (!/^\d{1,15}$/.test(after)) return errorResponse(c, 'invalid_input', 'after must be an event id: a whole number');
    // A page at a time: a buffered Lambda response holds 6 MB, and a log can hold far more.
    const events: Summary[] = [];
    let seq = Number(after);
    for (let page = await gateway.operator.events(run.runId, seq, EVENTS_READ); page.length > 0; ) {
      for (const stored of page) events.push(summaryOf(stored, hideContent));
      seq = page[page.length - 1].seq;
      page = page.length < EVENTS_READ || events.length >= EVENTS_PAGE ? [] : await gateway.operator.events(run.runId, seq, EVENTS_READ);
    }
    return c.json({ runId: run.runId, status: run.status, events, ...(events.length >= EVENTS_PAGE ? { next: seq } : {}) });
  });

  door.get('/tenants/:tenant/runs/:runId/stream', async (c) => {
    const run = await gateway.getRun(c.req.param('runId'), operator(c, c.req.param('tenant')));
    if (!run) return errorResponse(c, 'run_not_found', 'no such run');
    const after = c.req.header('Last-Event-ID') ?? c.req.query('after') ?? '0';
    if (!/^\d{1,15}$/.test(after)) return errorResponse(c, 'invalid_input', 'after must be an event id: a whole number');
    const frame = (stored: StoredEvent) => `id: ${stored.seq}\ndata: ${JSON.stringify(summaryOf(stored, hideContent))}\n\n`;
    return c.body(
      eventStream((signal) => framedByTurn(gateway.followRun(run.runId, Number(after), signal), frame), (frames) => frames, options.sse),
      200,
      SSE_HEADERS,
    );
  });

  door.post('/tenants/:tenant/runs/:runId/cancel', act((c) => ({ action: 'run.cancel_requested', target: `run:${c.req.param('runId')}`, tenant: c.req.param('tenant') })), async (c) => {
    const tenant = c.req.param('tenant');
    const note = c.get('note')!;
    const cancelled = await gateway.cancelRun(c.req.param('runId'), operator(c, tenant), undefined, requestIdOf(c));
    if (!cancelled.ok) return errorResponse(c, cancelled.code, cancelled.message);
    noteCancelled(note, cancelled.value, requestIdOf(c));
    return c.redirect(to(path.run(tenant, cancelled.value.runId)), 303);
  });

  door.get('/cancel', async (c) => {
    const filter = runFilterOf(c.req.query());
    const { runs, atLeast } = await gateway.operator.runsMatching(filter.core);
    return render(c, <CancelPage view={view(c)} filter={filter.shown} runs={runs} atLeast={atLeast} />);
  });

  // The filter's act is one record (what it named, how many it cancelled); each cancel it made is the run's own.
  door.post('/cancel', act(() => ({ action: 'run.cancel_requested', target: 'runs:filter', tenant: null })), async (c) => {
    const filter = runFilterOf((await c.req.parseBody()) as Record<string, string>);
    const { runs } = await gateway.operator.runsMatching(filter.core);
    let done = 0;
    for (const run of runs) {
      const note = noteAudit(c, { action: 'run.cancel_requested', target: `run:${run.runId}`, tenant: run.tenant });
      const cancelled = await gateway.cancelRun(run.runId, operator(c, run.tenant), undefined, requestIdOf(c));
      if (cancelled.ok) {
        done++;
        noteCancelled(note, cancelled.value, requestIdOf(c));
      } else note.outcome = cancelled.code;
    }
    c.get('note')!.detail = { filter: filter.shown, named: runs.length, cancelled: done };
    const left = await gateway.operator.runsMatching(filter.core);
    return render(c, <CancelPage view={view(c)} filter={filter.shown} runs={left.runs} atLeast={left.atLeast} done={done} />);
  });

  door.post('/tenants/:tenant/runs/:runId/answer', act((c) => ({ action: 'ask.answered', target: `run:${c.req.param('runId')}`, tenant: c.req.param('tenant') })), async (c) => {
    const tenant = c.req.param('tenant');
    const principal = operator(c, tenant);
    const note = c.get('note')!;
    const asking = await gateway.getRun(c.req.param('runId'), principal);
    if (!asking) return errorResponse(c, 'run_not_found', 'no such run');
    const form = (await c.req.parseBody()) as Record<string, string>;
    const answer = answerOf(form);
    if (!answer.ok) return errorResponse(c, 'invalid_input', answer.message);
    const thread = await gateway.threadView(asking.threadId, principal);
    if (!thread.ok) return errorResponse(c, thread.code, thread.message);
    const runId = crypto.randomUUID();
    // Judged as the AG-UI door judges what a caller posts: the answer's payloads are the operator's.
    const parsed = RunAgentInputSchema.safeParse({
      threadId: asking.threadId,
      runId,
      parentRunId: asking.runId,
      // What an AG-UI caller sends: the whole conversation, then the answer.
      messages: [...thread.value.messages, ...answer.toolMessages.map((message) => ({ id: crypto.randomUUID(), role: 'tool' as const, ...message }))],
      tools: [],
      context: [],
      state: {},
      forwardedProps: {},
      ...(answer.resume.length > 0 ? { resume: answer.resume } : {}),
    });
    if (!parsed.success) return errorResponse(c, 'invalid_input', describeIssue('RunAgentInput', parsed.error));
    const input = parsed.data;
    note.target = `run:${runId}`;
    const started = await gateway.startRun({ agentId: asking.agentId, input, door: 'agui', principal, requestId: requestIdOf(c) });
    if (!started.ok) return errorResponse(c, started.code, started.message, started.retryAfterSeconds);
    noteStarted(note, started.value.run);
    return c.redirect(to(path.run(tenant, runId)), 303);
  });

  door.get('/usage', async (c) => {
    const tenant = c.req.query('tenant') || undefined;
    const tenants = await gateway.operator.tenants(tenant ? [tenant] : []);
    const range = gateway.usage.range({});
    const report = tenant && range.ok ? await gateway.usage.report({ ...range.value, tenant }, ['day', 'agent']) : undefined;
    return render(c, <UsagePage view={view(c)} tenants={tenants} tenant={tenant} report={report} />);
  });

  door.post('/tenants/:tenant/budget', act((c) => ({ action: 'tenant.budget_changed', target: `tenant:${c.req.param('tenant')}`, tenant: c.req.param('tenant') })), async (c) => {
    const tenant = c.req.param('tenant');
    const note = c.get('note')!;
    const form = (await c.req.parseBody()) as Record<string, string>;
    const budget = form.remove === '1' ? null : budgetOf(form);
    if (budget !== null && 'message' in budget) return errorResponse(c, 'invalid_input', budget.message);
    note.before = (await gateway.usage.tenant(tenant)).budget ?? null;
    await gateway.usage.setBudget(tenant, budget);
    note.after = budget;
    return c.redirect(to(`usage?tenant=${encodeURIComponent(tenant)}`), 303);
  });

  door.get('/agents', async (c) => {
    const providers = await gateway.link.providers.list().catch(() => []);
    return render(c, <AgentsPage view={view(c)} agents={await gateway.listAgents()} providers={providers} />);
  });

  door.post('/agents/:agentId/status', act((c) => ({ action: 'agent.changed', target: `agent:${c.req.param('agentId')}`, tenant: null })), async (c) => {
    const agentId = c.req.param('agentId');
    const note = c.get('note')!;
    const status = (await c.req.parseBody()).status;
    if (status !== 'enabled' && status !== 'disabled') return errorResponse(c, 'invalid_input', 'status: must be "enabled" or "disabled"');
    const agent = await gateway.getAgent(agentId);
    if (!agent) return errorResponse(c, 'agent_not_found', `no agent named "${agentId}"`);
    await gateway.putAgent({ ...agent, status });
    Object.assign(note, { before: { status: agent.status ?? 'enabled' }, after: { status } });
    return c.redirect(to('agents'), 303);
  });

  door.get('/audit', async (c) => {
    const now = Date.now();
    const q = c.req.query();
    const from = q.from || new Date(now - 86_400_000).toISOString();
    const to = q.to || new Date(now + 60_000).toISOString();
    if (Number.isNaN(Date.parse(from)) || Number.isNaN(Date.parse(to))) return errorResponse(c, 'invalid_input', 'from and to must be ISO 8601 times');
    const filter = { ...(q.tenant ? { tenant: q.tenant } : {}), ...(q.actor ? { actor: q.actor } : {}), ...(q.action ? { action: q.action } : {}), from, to };
    let page;
    try {
      page = await gateway.audit.list({ ...filter, action: filter.action as AuditAction | undefined, limit: 100, ...(q.cursor ? { cursor: q.cursor } : {}) });
    } catch (error) {
      if (error instanceof RangeError) return errorResponse(c, 'invalid_input', 'cursor: not a cursor this listing gave; start from the first page');
      throw error;
    }
    const segments = await Promise.all((await gateway.operator.segments(10)).map((shown) => judged(shown, options.verifySegment)));
    return render(c, <AuditPage view={view(c)} filter={filter} records={page.records} next={page.cursor} segments={segments} sealed={gateway.audit.publicKey !== undefined} />);
  });

  return door;
}

/**
 * A segment as the audit page shows it: signed by funduq's key or not, and chained when its signed
 * payload names the hash of the segment before it (neither is known without the key).
 */
async function judged(shown: { segment: SealedSegment; prevHash: string | null | undefined }, verify: ConsoleOptions['verifySegment']): Promise<SegmentView> {
  if (!verify) return { segment: shown.segment };
  const payload = await verify(shown.segment.jws).catch(() => undefined);
  if (payload === undefined) return { segment: shown.segment, signed: false };
  const { prev } = JSON.parse(payload) as Pick<AuditSegment, 'prev'>;
  return { segment: shown.segment, signed: true, ...(shown.prevHash !== undefined ? { chained: prev === shown.prevHash } : {}) };
}

/** Only a path within the console (relative, no scheme, no host): a sign-in link cannot send anyone elsewhere. */
function safeNext(next: string | undefined): string {
  return next && /^[a-z0-9?][^:\\]*$/i.test(next) && !next.includes('//') ? next : '';
}

interface Summary {
  seq: number;
  type: string;
  text: string;
}

const CONTENT_FIELDS = ['delta', 'content', 'args', 'result', 'value', 'snapshot'];

/** One line of a run's log for a person: its type and what it says, content left out when the console hides it. */
function summaryOf(stored: StoredEvent, hideContent: boolean): Summary {
  const { type, ...rest } = stored.event;
  const shown: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(rest)) shown[key] = hideContent && CONTENT_FIELDS.includes(key) ? '[hidden]' : value;
  const text = typeof shown.delta === 'string' ? shown.delta : JSON.stringify(shown);
  return { seq: stored.seq, type, text: text.length > 300 ? `${text.slice(0, 300)}…` : text };
}

function runFilterOf(given: Record<string, string | undefined>) {
  const pick = (name: string) => (given[name] ? given[name] : undefined);
  const status = UNSETTLED.includes(given.status as UnsettledStatus) ? (given.status as UnsettledStatus) : undefined;
  const shown = { tenant: pick('tenant'), agent: pick('agent'), thread: pick('thread'), status };
  return { shown, core: { tenant: shown.tenant, agentId: shown.agent, threadId: shown.thread, status } };
}

type Answer = { ok: true; resume: NonNullable<RunAgentInput['resume']>; toolMessages: { toolCallId: string; content: string }[] } | { ok: false; message: string };

/** The answer form's fields (`field:<ask>:<type>:<name>`, `json:<ask>`, `tool:<toolCallId>`) as resume entries and tool messages. */
function answerOf(form: Record<string, string>): Answer {
  const payloads = new Map<string, Record<string, unknown>>();
  const resume: NonNullable<RunAgentInput['resume']> = [];
  const toolMessages: { toolCallId: string; content: string }[] = [];
  for (const [key, value] of Object.entries(form)) {
    const field = /^field:([^:]+):(boolean|string|number|integer):(.+)$/.exec(key);
    if (field) {
      const [, ask, type, name] = field;
      const payload = payloads.get(ask) ?? {};
      if (type === 'boolean') payload[name] = value === 'true';
      else if (type === 'string') payload[name] = value;
      else if (value !== '') {
        const number = Number(value);
        if (!Number.isFinite(number) || (type === 'integer' && !Number.isInteger(number))) return { ok: false, message: `${name}: must be ${type === 'integer' ? 'a whole number' : 'a number'}` };
        payload[name] = number;
      }
      payloads.set(ask, payload);
    } else if (key.startsWith('json:')) {
      try {
        resume.push({ interruptId: key.slice(5), status: 'resolved', payload: JSON.parse(value) });
      } catch {
        return { ok: false, message: `the payload for ${key.slice(5)} is not JSON` };
      }
    } else if (key.startsWith('tool:')) toolMessages.push({ toolCallId: key.slice(5), content: value });
  }
  for (const [ask, payload] of payloads) resume.push({ interruptId: ask, status: 'resolved', payload });
  return { ok: true, resume, toolMessages };
}

/** The budget form as `PUT /admin/tenants/{tenant}` would take it: the same schema judges both. */
function budgetOf(form: Record<string, string>): Budget | { message: string } {
  const number = (text: string | undefined) => (text ? Number(text) : undefined);
  const amount = number(form.cost);
  const given = {
    period: form.period === 'day' ? 'day' : 'month',
    ...(form.tokens ? { tokens: number(form.tokens) } : {}),
    ...(amount !== undefined ? { cost: { amount, currency: (form.currency || 'USD').toUpperCase() } } : {}),
  };
  const parsed = BudgetSchema.safeParse(given);
  return parsed.success ? parsed.data : { message: describeIssue('Budget', parsed.error) };
}
