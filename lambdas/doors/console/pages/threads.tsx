/** @jsxRuntime automatic */
/** @jsxImportSource hono/jsx */
import type { Message } from '@ag-ui/core';
import type { Thread } from '../../../core/model.js';
import type { ThreadView } from '../../../core/thread-view.js';
import { Act, Countdown, Csrf, Filters, Page, path, Status, Table, Time, type View } from '../layout.js';

export interface ThreadFilter {
  tenant?: string;
  agent?: string;
  state?: 'active' | 'idle';
}

export function ThreadsPage(props: { view: View; filter: ThreadFilter; threads: Thread[]; next?: string; agents: string[] }) {
  const { filter } = props;
  return (
    <Page view={props.view} title="Threads" current="threads">
      <Filters action="threads" label="Filter threads" submit="Filter" texts={[['tenant', 'Tenant', filter.tenant]]}>
        <label>
          Agent
          <select name="agent">
            <option value="">any</option>
            {props.agents.map((agent) => (
              <option value={agent} selected={filter.agent === agent}>
                {agent}
              </option>
            ))}
          </select>
        </label>
        <label>
          State
          <select name="state">
            <option value="">any</option>
            <option value="active" selected={filter.state === 'active'}>
              active (a run holds a place)
            </option>
            <option value="idle" selected={filter.state === 'idle'}>
              idle
            </option>
          </select>
        </label>
      </Filters>
      <Table
        caption="Threads, latest activity first"
        head={['Thread', 'Tenant', 'Agent', 'Runs', 'Not settled', 'Last activity']}
        rows={props.threads.map((thread) => [
          <a href={path.thread(thread.tenant, thread.threadId)}>{thread.threadId}</a>,
          thread.tenant,
          thread.agentId,
          String(thread.arrivals),
          String(thread.unsettled),
          <Time at={thread.lastActivityAt ?? thread.createdAt} />,
        ])}
        empty="No thread matches."
      />
      {props.next ? (
        <p>
          <a href={path.threads({ tenant: filter.tenant, agent: filter.agent, state: filter.state, cursor: props.next })}>Next page</a>
        </p>
      ) : null}
    </Page>
  );
}

export function ThreadPage(props: { view: View; tenant: string; thread: ThreadView; schemas: Record<string, unknown> }) {
  const { thread, tenant, view } = props;
  const order = [...(thread.activeRun ? [thread.activeRun] : []), ...thread.queue];
  return (
    <Page view={view} title={`Thread ${thread.threadId}`} current="threads">
      <dl>
        <dt>Tenant</dt>
        <dd>{tenant}</dd>
        <dt>Agent</dt>
        <dd>{thread.agentId}</dd>
        <dt>Created</dt>
        <dd>
          <Time at={thread.createdAt} />
        </dd>
      </dl>
      <section aria-labelledby="queue">
        <h2 id="queue">Queue</h2>
        <Table
          caption="The running run and the runs waiting their turn, in order"
          head={['Place', 'Run', 'Status', 'Waits for', 'Created', 'Act']}
          rows={order.map((run, i) => [
            i === 0 && thread.activeRun ? 'running' : String(thread.activeRun ? i : i + 1),
            <a href={path.run(tenant, run.runId)}>{run.runId}</a>,
            <Status status={run.status} />,
            i === 0 ? (thread.activeRun ? '—' : 'its dispatch') : order[i - 1].runId,
            <Time at={run.createdAt} />,
            <Act view={view} action={`${path.run(tenant, run.runId)}/cancel`} label="Cancel run" danger />,
          ])}
          empty="Nothing is running or waiting."
        />
      </section>
      <section aria-labelledby="asks">
        <h2 id="asks">Open asks</h2>
        {thread.openAsks.length === 0 ? (
          <p class="empty">No ask is open.</p>
        ) : (
          <>
            <Table
              caption="Asks waiting for an answer"
              head={['Ask', 'Kind', 'Run', 'Expires']}
              rows={thread.openAsks.map((ask) => [
                ask.id,
                `${ask.kind}${ask.reason ? `: ${ask.reason}` : ask.toolCallName ? `: ${ask.toolCallName}` : ''}`,
                <a href={path.run(tenant, ask.runId)}>{ask.runId}</a>,
                <Countdown at={ask.expiresAt} />,
              ])}
            />
            {view.session.role === 'admin' ? <AnswerForm view={view} tenant={tenant} thread={thread} schemas={props.schemas} /> : null}
          </>
        )}
      </section>
      <section aria-labelledby="runs">
        <h2 id="runs">Runs</h2>
        <Table
          caption="Every run of the thread, in arrival order"
          head={['Run', 'Status', 'Outcome', 'Reason', 'Answers', 'Created']}
          rows={thread.runs.map((run) => [
            <a href={path.run(tenant, run.runId)}>{run.runId}</a>,
            <Status status={run.status} />,
            run.outcome ?? '—',
            run.reason ?? '—',
            run.parentRunId ?? '—',
            <Time at={run.createdAt} />,
          ])}
        />
      </section>
      <section aria-labelledby="messages">
        <h2 id="messages">Messages</h2>
        {view.hideContent ? <p class="empty">Message content is hidden on this gateway.</p> : <Messages messages={thread.messages} />}
      </section>
    </Page>
  );
}

function Messages(props: { messages: Message[] }) {
  if (props.messages.length === 0) return <p class="empty">No message yet.</p>;
  return (
    <Table
      caption="The thread's messages, folded from its runs"
      head={['Role', 'Content']}
      rows={props.messages.map((message) => [message.role, textOf(message)])}
    />
  );
}

function textOf(message: Message): string {
  const content = (message as { content?: unknown }).content;
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((part) => (typeof part?.text === 'string' ? part.text : `[${part?.type ?? 'part'}]`)).join(' ');
  const calls = (message as { toolCalls?: { function: { name: string; arguments: string } }[] }).toolCalls;
  if (calls) return calls.map((call) => `${call.function.name}(${call.function.arguments})`).join('; ');
  return '';
}

/**
 * One form answering every open ask at once (an answer run answers all of them): a field for each
 * property of an interrupt's `responseSchema`, or its payload as JSON; a tool call's result as text.
 */
function AnswerForm(props: { view: View; tenant: string; thread: ThreadView; schemas: Record<string, unknown> }) {
  const { thread, tenant } = props;
  const runId = thread.openAsks[0].runId;
  return (
    <form method="post" action={`${path.run(tenant, runId)}/answer`} class="act" aria-label="Answer the open asks">
      <Csrf session={props.view.session} />
      {thread.openAsks.map((ask) =>
        ask.kind === 'tool_call' ? (
          <label>
            {`Result of ${ask.toolCallName ?? 'the tool call'} (${ask.id})`}
            <textarea name={`tool:${ask.toolCallId ?? ask.id}`} rows={2} cols={40}></textarea>
          </label>
        ) : (
          <fieldset>
            <legend>{`Answer to ${ask.reason ?? 'the interrupt'} (${ask.id})`}</legend>
            <SchemaFields ask={ask.id} schema={props.schemas[ask.id]} />
          </fieldset>
        ),
      )}
      <button type="submit">Answer</button>
    </form>
  );
}

type Schema = { type?: string; properties?: Record<string, Schema>; enum?: unknown[]; title?: string; description?: string };

function SchemaFields(props: { ask: string; schema: unknown }) {
  const schema = props.schema as Schema | undefined;
  const fields = schema?.type === 'object' ? Object.entries(schema.properties ?? {}) : [];
  const simple = fields.length > 0 && fields.every(([, field]) => ['boolean', 'string', 'number', 'integer'].includes(field.type ?? ''));
  if (!simple) {
    return (
      <label>
        Payload (JSON)
        <textarea name={`json:${props.ask}`} rows={3} cols={40}>
          {'{}'}
        </textarea>
      </label>
    );
  }
  return (
    <>
      {fields.map(([name, field]) => {
        const label = field.title ?? name;
        const key = `field:${props.ask}:${field.type}:${name}`;
        if (field.type === 'boolean') {
          return (
            <label>
              {label}
              <select name={key}>
                <option value="true">yes</option>
                <option value="false">no</option>
              </select>
            </label>
          );
        }
        if (field.enum) {
          return (
            <label>
              {label}
              <select name={key}>
                {field.enum.map((value) => (
                  <option value={String(value)}>{String(value)}</option>
                ))}
              </select>
            </label>
          );
        }
        return (
          <label>
            {label}
            <input name={key} type={field.type === 'string' ? 'text' : 'number'} step={field.type === 'number' ? 'any' : undefined} />
          </label>
        );
      })}
    </>
  );
}

