/** @jsxRuntime automatic */
/** @jsxImportSource hono/jsx */
import { TaskState, type Task } from '@a2a-js/sdk';
import { isTerminal, type Run } from '../../../core/model.js';
import { traceOf } from '../../../core/run-context.js';
import { Act, Page, path, Status, Table, Time, type View } from '../layout.js';

/**
 * A run: its record, its A2A task beside it, and its AG-UI event log, which the script draws a
 * screenful at a time and follows while the run goes on (`assets.ts`).
 */
export function RunPage(props: { view: View; run: Run; task?: Task }) {
  const { run, view } = props;
  const base = path.run(run.tenant, run.runId);
  const live = !isTerminal(run.status);
  const { traceId } = traceOf(run);
  return (
    <Page view={view} title={`Run ${run.runId}`} current="threads">
      <div class="grid">
        <section aria-labelledby="record">
          <h2 id="record">Record</h2>
          <dl>
            <dt>Status</dt>
            <dd>
              <output id="run-status">
                <Status status={run.status} />
              </output>
            </dd>
            <dt>Thread</dt>
            <dd>
              <a href={path.thread(run.tenant, run.threadId)}>{run.threadId}</a>
            </dd>
            <dt>Tenant</dt>
            <dd>{run.tenant}</dd>
            <dt>Agent</dt>
            <dd>{run.agentId}</dd>
            <dt>Door</dt>
            <dd>{run.door}</dd>
            <dt>Caller</dt>
            <dd>{run.principal}</dd>
            <dt>Created</dt>
            <dd>
              <Time at={run.createdAt} />
            </dd>
            <dt>Started</dt>
            <dd>
              <Time at={run.startedAt} />
            </dd>
            <dt>Ended</dt>
            <dd>
              <Time at={run.endedAt} />
            </dd>
            <dt>Outcome</dt>
            <dd>{run.outcome ?? '—'}</dd>
            <dt>Reason</dt>
            <dd>{run.reason ? `${run.reason}${run.message ? `: ${run.message}` : ''}` : '—'}</dd>
            {run.parentRunId ? (
              <>
                <dt>Answers</dt>
                <dd>
                  <a href={path.run(run.tenant, run.parentRunId)}>{run.parentRunId}</a>
                </dd>
              </>
            ) : null}
            <dt>Trace</dt>
            <dd>{traceId ?? 'none'}</dd>
            {run.actorChain ? (
              <>
                <dt>Actor chain</dt>
                <dd>
                  <ol>
                    {run.actorChain.map((hop) => (
                      <li>
                        <code>{hop.length > 80 ? `${hop.slice(0, 80)}…` : hop}</code>
                      </li>
                    ))}
                  </ol>
                </dd>
              </>
            ) : null}
          </dl>
          {live ? <Act view={view} action={`${base}/cancel`} label="Cancel run" danger /> : null}
        </section>
        <section aria-labelledby="usage">
          <h2 id="usage">Usage</h2>
          {run.usage ? (
            <dl>
              <dt>Events</dt>
              <dd>{String(run.usage.events)}</dd>
              <dt>Log bytes</dt>
              <dd>{String(run.usage.bytes)}</dd>
              <dt>Tokens</dt>
              <dd>{run.usage.tokens?.map((t) => `${t.model ?? t.provider ?? 'model'}: ${(t.inputTokens ?? 0) + (t.outputTokens ?? 0)}`).join(', ') || 'none reported'}</dd>
              <dt>Cost</dt>
              <dd>{run.usage.cost ? `${run.usage.cost.amount} ${run.usage.cost.currency}` : 'not priced'}</dd>
            </dl>
          ) : (
            <p class="empty">Counted when the run settles.</p>
          )}
          <h2 id="task">A2A task</h2>
          {props.task ? <TaskView task={props.task} /> : <p class="empty">No task.</p>}
        </section>
      </div>
      <section aria-labelledby="events" id="event-log" data-src={`${base}/events.json`} data-stream={`${base}/stream`} data-live={live ? '1' : '0'}>
        <h2 id="events">Events</h2>
        <fieldset class="types">
          <legend>Event types shown</legend>
        </fieldset>
        <p>
          <span class="count" aria-live="polite">
            Loading events…
          </span>{' '}
          <button type="button" class="to-end">
            Go to the last event
          </button>
        </p>
        <div class="viewport" tabindex={0} role="region" aria-label="Event log">
          <table>
            <caption>The run's AG-UI events, in order</caption>
            <colgroup>
              <col style="width: 5rem" />
              <col style="width: 16rem" />
              <col />
            </colgroup>
            <thead>
              <tr>
                <th scope="col">Seq</th>
                <th scope="col">Type</th>
                <th scope="col">Detail</th>
              </tr>
            </thead>
            <tbody></tbody>
          </table>
        </div>
      </section>
    </Page>
  );
}

function TaskView(props: { task: Task }) {
  const { task } = props;
  return (
    <>
      <dl>
        <dt>Task</dt>
        <dd>{task.id}</dd>
        <dt>State</dt>
        <dd>{task.status ? (TaskState[task.status.state] ?? String(task.status.state)) : 'unknown'}</dd>
        <dt>History</dt>
        <dd>{`${task.history?.length ?? 0} messages`}</dd>
      </dl>
      <Table
        caption="Artifacts"
        head={['Artifact', 'Name', 'Parts']}
        rows={(task.artifacts ?? []).map((artifact) => [artifact.artifactId, artifact.name ?? '—', String(artifact.parts.length)])}
        empty="No artifact."
      />
    </>
  );
}
