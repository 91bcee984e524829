import { SpanKind, SpanStatusCode, trace, type Attributes, type Link, type Span, type Context as TraceContext } from '@opentelemetry/api';
import type { Agent, Run } from '../../core/model.js';
import type { ProviderCall, ProviderCallScope, RefusedSubmission, RunLife } from '../../core/run-life.js';
import { ANSWERS_CONTEXT, ATTR, EVENT, INVOKE_AGENT, SPAN, TRACEPARENT } from '../../core/traces.js';
import type { Tracing } from './tracing.js';

/** How long a provider call's span waits for its run's settle (which adds the usage and the outcome) before it ends without them. */
const SETTLE_WAIT_MS = 30_000;

/**
 * Each run's life as spans, in the trace its door took from the caller (`Run.context`):
 * - `funduq.queue.wait`: from the run's record to its dispatch (its wait behind the thread's
 *   earlier runs), made when it starts, so it needs no process to have seen both ends;
 * - `invoke_agent {agent}` (CLIENT) for each call to the provider, whose context goes out with the
 *   call (`traceparent` to an `agui-http` agent, a `lambda` invocation, a link offer), with the
 *   GenAI attributes, the usage record's models and tokens, the outcome, and events for the asks
 *   it opened, the tool calls the agent reported (observed: the gateway runs none) and a cancel;
 *   an answer's call links to the asking run's trace, which may be hours old, from the
 *   `traceparent` its record carries (`funduq-answers`), so the process that took the answer
 *   need not be the one that calls its provider;
 * - refusals and expiries as spans of their own (nothing else of theirs is in this process), and
 *   a retry of a recorded run (`funduq.run.retry`) in the retry's trace, linked to the first attempt's.
 * Message content is recorded nowhere unless `captureContent` is on; then the call carries the
 * messages the caller sent (`gen_ai.input.messages`).
 */
export function tracedRunLife(tracing: Tracing, now: () => number = Date.now): RunLife {
  const { tracer } = tracing;
  const calls = new Map<string, { span: Span; timer?: ReturnType<typeof setTimeout> }>();
  /** The asks each answer recorded in this process closed, by the answer's run id (the link itself comes with the answer's run). */
  const answers = new Map<string, string[]>();
  const parentOf = (context: Run['context']): TraceContext => tracing.extract(context ?? {});
  const runAttributes = (run: Pick<Run, 'runId' | 'threadId' | 'tenant' | 'door' | 'agentId'>): Attributes => ({
    [ATTR.runId]: run.runId,
    [ATTR.threadId]: run.threadId,
    // The thread is the conversation, whichever door reached it (an A2A contextId is a thread id).
    [ATTR.conversationId]: run.threadId,
    [ATTR.tenant]: run.tenant,
    [ATTR.door]: run.door,
    [ATTR.agentId]: run.agentId,
  });
  const finish = (runId: string) => {
    const call = calls.get(runId);
    if (!call) return;
    clearTimeout(call.timer);
    calls.delete(runId);
    call.span.end();
  };
  const instant = (name: string, context: Run['context'], attributes: Attributes, error?: string, links: Link[] = []) => {
    const span = tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes, links }, parentOf(context));
    if (error) span.setStatus({ code: SpanStatusCode.ERROR, message: error });
    span.end();
  };

  return {
    started(run) {
      const span = tracer.startSpan(SPAN.queueWait, { kind: SpanKind.INTERNAL, startTime: Date.parse(run.createdAt), attributes: runAttributes(run) }, parentOf(run.context));
      span.end(run.startedAt ? Date.parse(run.startedAt) : now());
    },

    providerCall({ run, agent }: ProviderCall): ProviderCallScope {
      finish(run.runId);
      const askIds = answers.get(run.runId);
      answers.delete(run.runId);
      // The asking run's trace comes with the answer's own record, whichever process took the answer.
      const asking = run.context?.[ANSWERS_CONTEXT] ? trace.getSpanContext(tracing.extract({ [TRACEPARENT]: run.context[ANSWERS_CONTEXT] })) : undefined;
      const answer = asking || askIds ? { ...(run.parentRunId ? { [ATTR.askingRunId]: run.parentRunId } : {}), ...(askIds ? { [ATTR.askIds]: askIds } : {}) } : undefined;
      const links: Link[] = asking ? [{ context: asking, attributes: answer ?? {} }] : [];
      const span = tracer.startSpan(SPAN.invokeAgent(agentName(agent)), { kind: SpanKind.CLIENT, links, attributes: { ...runAttributes(run), ...agentAttributes(agent) } }, parentOf(run.context));
      if (tracing.captureContent) span.setAttribute(ATTR.inputMessages, JSON.stringify(run.input.messages));
      if (answer) span.addEvent(EVENT.askAnswered, answer);
      calls.set(run.runId, { span });
      return {
        headers: tracing.inject(trace.setSpan(parentOf(run.context), span)),
        ended(failure) {
          if (failure) {
            span.setAttribute(ATTR.errorType, failure.code);
            span.setStatus({ code: SpanStatusCode.ERROR, message: failure.code });
          }
          const call = calls.get(run.runId);
          if (call?.span === span) {
            call.timer = setTimeout(() => finish(run.runId), SETTLE_WAIT_MS);
            call.timer.unref?.();
          }
        },
      };
    },

    settled(run) {
      const span = calls.get(run.runId)?.span;
      if (!span) return;
      span.setAttributes({ [ATTR.status]: run.status, ...(run.outcome ? { [ATTR.outcome]: run.outcome } : {}), ...(run.reason ? { [ATTR.code]: run.reason } : {}), ...usageAttributes(run) });
      if (run.status === 'failed') span.setStatus({ code: SpanStatusCode.ERROR, message: run.reason ?? 'failed' });
      for (const ask of Object.values(run.asks ?? {})) {
        if (ask.kind === 'tool_call') {
          span.addEvent(EVENT.toolCall, {
            [ATTR.observed]: true,
            ...(ask.toolCallName ? { [ATTR.toolName]: ask.toolCallName } : {}),
            ...(ask.toolCallId ? { [ATTR.toolCallId]: ask.toolCallId } : {}),
          });
        }
        if (ask.state === 'open') span.addEvent(EVENT.askOpened, { [ATTR.askIds]: [ask.id], ...(ask.expiresAt ? { [ATTR.askExpiresAt]: ask.expiresAt } : {}) });
      }
      finish(run.runId);
    },

    cancelRequested(run) {
      calls.get(run.runId)?.span.addEvent(EVENT.cancelRequested);
    },

    answered(_waiting, answer) {
      answers.set(answer.runId, answer.askIds);
    },

    retried(run, attempt) {
      const first = trace.getSpanContext(parentOf(run.context));
      instant(SPAN.retry, attempt.context, runAttributes(run), undefined, first ? [{ context: first, attributes: { [ATTR.runId]: run.runId } }] : []);
    },

    expired(run, askIds) {
      const span = tracer.startSpan(SPAN.askExpiry, { kind: SpanKind.INTERNAL, attributes: { ...runAttributes(run), [ATTR.askIds]: askIds } }, parentOf(run.context));
      span.addEvent(EVENT.askExpired, { [ATTR.askIds]: askIds });
      span.end();
    },

    refused(refusal: RefusedSubmission) {
      instant(
        SPAN.refused,
        refusal.context,
        {
          [ATTR.code]: refusal.code,
          [ATTR.agentId]: refusal.agentId,
          [ATTR.tenant]: refusal.tenant,
          [ATTR.door]: refusal.door,
          ...(refusal.threadId ? { [ATTR.threadId]: refusal.threadId, [ATTR.conversationId]: refusal.threadId } : {}),
          ...(refusal.runId ? { [ATTR.runId]: refusal.runId } : {}),
        },
        refusal.code,
      );
    },
  };
}

function agentName(agent: Agent): string {
  return agent.id;
}

function agentAttributes(agent: Agent): Attributes {
  return {
    [ATTR.operationName]: INVOKE_AGENT,
    [ATTR.agentName]: agentName(agent),
    [ATTR.agentId]: agent.id,
    // The kind of provider funduq reaches the agent through; the model's own provider is in the usage.
    [ATTR.providerName]: `funduq.${agent.provider.kind}`,
  };
}

/** The usage record's models and token counts (its totals over every model the agent reported). */
function usageAttributes(run: Run): Attributes {
  const tokens = run.usage?.tokens ?? [];
  if (tokens.length === 0) return {};
  const sum = (key: 'inputTokens' | 'outputTokens') => tokens.reduce((total, entry) => total + (entry[key] ?? 0), 0);
  const models = [...new Set(tokens.map((entry) => entry.model).filter((model): model is string => typeof model === 'string'))];
  return {
    [ATTR.inputTokens]: sum('inputTokens'),
    [ATTR.outputTokens]: sum('outputTokens'),
    ...(models.length === 1 ? { [ATTR.responseModel]: models[0] } : {}),
    ...(models.length > 0 ? { [ATTR.models]: models } : {}),
  };
}
