/** @jsxRuntime automatic */
/** @jsxImportSource hono/jsx */
import type { AuditRecord } from '../../../core/audit/record.js';
import type { UsageReport } from '../../../core/metering.js';
import type { Agent, Run } from '../../../core/model.js';
import type { TenantSpend } from '../../../core/operator.js';
import type { SealedSegment } from '../../../core/ports.js';

/** A segment as the page shows it: whether funduq's key signed it and whether it names the one before it (undefined: not checked). */
export interface SegmentView {
  segment: SealedSegment;
  signed?: boolean;
  chained?: boolean;
}
import type { Child } from 'hono/jsx';
import { Act, Csrf, Filters, Head, Page, path, search, Status, Table, Time, type View } from '../layout.js';
import { budgetText } from './overview.js';

export function UsagePage(props: { view: View; tenants: TenantSpend[]; tenant?: string; report?: UsageReport }) {
  const { view, report, tenant } = props;
  const own = props.tenants.find((entry) => entry.tenant === tenant);
  return (
    <Page view={view} title="Usage and budgets" current="usage">
      <Table
        caption="Tenants of the latest threads, nearest their budget first"
        head={['Tenant', 'Spent', 'Budget']}
        rows={props.tenants.map((entry) => [
          <a href={`usage${search({ tenant: entry.tenant })}`}>{entry.tenant}</a>,
          entry.share === undefined ? '—' : `${Math.round(entry.share * 100)}%`,
          entry.budget ? budgetText(entry.budget) : 'none',
        ])}
        empty="No thread yet."
      />
      <Filters action="usage" label="Choose a tenant" submit="Show usage" texts={[['tenant', 'Tenant', tenant]]} />
      {tenant !== undefined && report ? (
        <section aria-labelledby="tenant-usage">
          <h2 id="tenant-usage">{`Tenant ${tenant}`}</h2>
          <p>{own?.budget ? `Budget: ${budgetText(own.budget)}${own.budget.exhausted ? ' (exhausted)' : ''}` : 'No budget: runs are not limited by spend.'}</p>
          <Table
            caption="Usage this month by agent and day"
            head={['Day', 'Agent', 'Runs', 'Events', 'Tokens', 'Cost']}
            rows={(report.groups ?? []).map((group) => [
              group.day ?? '—',
              group.agent ?? '—',
              String(group.runs),
              String(group.events),
              String((group.tokens ?? []).reduce((sum, usage) => sum + (usage.inputTokens ?? 0) + (usage.outputTokens ?? 0), 0)),
              (group.cost ?? []).map((cost) => `${cost.amount} ${cost.currency}`).join(', ') || '—',
            ])}
            empty="No run settled this month."
          />
          {view.session.role === 'admin' ? (
            <form method="post" action={`tenants/${encodeURIComponent(tenant)}/budget`} class="act" aria-label="Set the budget">
              <Csrf session={view.session} />
              <label>
                Period
                <select name="period">
                  <option value="month">month</option>
                  <option value="day">day</option>
                </select>
              </label>
              <label>
                Tokens
                <input name="tokens" type="number" min="0" step="1" />
              </label>
              <label>
                Cost
                <input name="cost" type="number" min="0" step="any" />
              </label>
              <label>
                Currency
                <input name="currency" value="USD" size={4} />
              </label>
              <button type="submit">Set budget</button>
            </form>
          ) : null}
          {own?.budget ? <Act view={view} action={`tenants/${encodeURIComponent(tenant)}/budget`} label="Remove budget" fields={{ remove: '1' }} /> : null}
        </section>
      ) : null}
    </Page>
  );
}

export function AgentsPage(props: { view: View; agents: Agent[]; providers: { providerId: string; linked: boolean; places: number; maxConcurrentRuns: number; agents: string[]; serving: string[] }[] }) {
  const { view } = props;
  return (
    <Page view={view} title="Agents and providers" current="agents">
      <Table
        caption="Agents"
        head={['Agent', 'Kind', 'Status', 'Interjections', 'Act']}
        rows={props.agents.map((agent) => {
          const disabled = agent.status === 'disabled';
          return [
            agent.id,
            agent.provider.kind,
            disabled ? 'disabled' : 'enabled',
            agent.takesInterjections ? 'taken' : 'queued',
            <Act view={view} action={`agents/${encodeURIComponent(agent.id)}/status`} label={disabled ? `Enable ${agent.id}` : `Disable ${agent.id}`} fields={{ status: disabled ? 'enabled' : 'disabled' }} danger={!disabled} />,
          ];
        })}
        empty="No agent is registered."
      />
      <Table
        caption="Providers that dial out"
        head={['Provider', 'Agents', 'Linked', 'Places', 'Serving now']}
        rows={props.providers.map((provider) => [
          provider.providerId,
          provider.agents.join(', '),
          provider.linked ? 'linked' : 'not linked',
          `${provider.places} of ${provider.maxConcurrentRuns}`,
          provider.serving.join(', ') || '—',
        ])}
        empty="No provider is registered."
      />
    </Page>
  );
}

export interface AuditFilter {
  tenant?: string;
  actor?: string;
  action?: string;
  from: string;
  to: string;
}

export function AuditPage(props: { view: View; filter: AuditFilter; records: AuditRecord[]; next?: string; segments: SegmentView[]; sealed: boolean }) {
  const { filter } = props;
  return (
    <Page view={props.view} title="Audit log" current="audit">
      <Filters
        action="audit"
        label="Filter the audit log"
        submit="Filter"
        texts={[
          ['tenant', 'Tenant', filter.tenant],
          ['actor', 'Actor', filter.actor],
          ['action', 'Action', filter.action],
          ['from', 'From', filter.from],
          ['to', 'To', filter.to],
        ]}
      />
      <Table
        caption="Audit records, oldest first"
        head={['At', 'Action', 'Outcome', 'Actor', 'Tenant', 'Target']}
        rows={props.records.map((record) => [
          <Time at={record.at} />,
          record.action,
          record.outcome === 'ok' ? 'ok' : <span class="error">{record.outcome}</span>,
          `${record.actor.kind}${record.actor.principal ? `: ${record.actor.principal}` : ''}`,
          record.tenant ?? '—',
          record.target,
        ])}
        empty="No audit record matches."
      />
      {props.next ? (
        <p>
          <a href={`audit${search({ ...filter, cursor: props.next })}`}>Next page</a>
        </p>
      ) : null}
      <section aria-labelledby="segments">
        <h2 id="segments">Sealed segments</h2>
        {props.sealed ? null : <p class="empty">This gateway has no audit key: its log is not sealed.</p>}
        <Table
          caption="The latest segments of the log, whether each names the one before it, and whether funduq's key signed it"
          head={['Segment', 'Records', 'From', 'To', 'Chain', 'Signature']}
          rows={props.segments.map(({ segment, chained, signed }) => [
            String(segment.seq),
            String(segment.ids.length),
            <Time at={segment.from} />,
            <Time at={segment.to} />,
            chained === undefined ? 'not checked' : chained ? 'linked' : <span class="error">broken</span>,
            signed === undefined ? 'not checked' : signed ? "funduq's" : <span class="error">not funduq's</span>,
          ])}
          empty="No segment is sealed yet."
        />
        <p>A full proof (signatures and every record's hash) is the offline verifier's: export the log and run npm run audit.</p>
      </section>
    </Page>
  );
}

export function CancelPage(props: { view: View; filter: Record<string, string | undefined>; runs: Run[]; atLeast: boolean; done?: number }) {
  const { view, filter } = props;
  const named = Object.values(filter).some((value) => value !== undefined && value !== '');
  return (
    <Page view={view} title="Cancel runs by filter">
      {props.done !== undefined ? <p role="status">{`Cancel requested for ${props.done} runs.`}</p> : null}
      <Filters
        action="cancel"
        label="Choose the runs to cancel"
        submit="Find runs"
        texts={[
          ['tenant', 'Tenant', filter.tenant],
          ['agent', 'Agent', filter.agent],
          ['thread', 'Thread', filter.thread],
        ]}
      >
        <label>
          Status
          <select name="status">
            <option value="">any not settled</option>
            {['queued', 'running', 'cancelling'].map((status) => (
              <option value={status} selected={filter.status === status}>
                {status}
              </option>
            ))}
          </select>
        </label>
      </Filters>
      {!named ? (
        <p>Name at least one of tenant, agent, thread or status: a cancel by filter never takes every run at once.</p>
      ) : (
        <>
          <Table
            caption="Runs the filter names"
            head={['Run', 'Tenant', 'Agent', 'Thread', 'Status']}
            rows={props.runs.map((run) => [<a href={path.run(run.tenant, run.runId)}>{run.runId}</a>, run.tenant, run.agentId, run.threadId, <Status status={run.status} />])}
            empty="No run that is not settled matches."
          />
          {props.runs.length > 0 ? (
            <Act view={view} action="cancel" label={`Cancel ${props.runs.length}${props.atLeast ? '+' : ''} runs`} fields={Object.fromEntries(Object.entries(filter).filter(([, value]) => value)) as Record<string, string>} danger />
          ) : null}
        </>
      )}
    </Page>
  );
}

/** A page outside the console's frame (no navigation: no session to navigate with): the sign-in, a refusal. */
function Bare(props: { base: string; title: string; heading: string; children?: Child }) {
  return (
    <html lang="en">
      <Head base={props.base} title={props.title} />
      <body>
        <main>
          <h1>{props.heading}</h1>
          {props.children}
        </main>
      </body>
    </html>
  );
}

export function SignInPage(props: { base: string; next: string; failed: boolean }) {
  return (
    <Bare base={props.base} title="Sign in" heading="Sign in to the funduq console">
      {props.failed ? <p role="alert">That token is not the admin token or the read-only one.</p> : null}
      <form method="post" action="sign-in">
        <input type="hidden" name="next" value={props.next} />
        <label>
          Token
          <input name="token" type="password" autocomplete="current-password" required />
        </label>{' '}
        <button type="submit">Sign in</button>
      </form>
    </Bare>
  );
}

/** A refusal as a page, for a browser: what was refused, its code, and the way back. */
export function RefusalPage(props: { base: string; code: string; message: string }) {
  return (
    <Bare base={props.base} title={`Refused: ${props.code}`} heading="The console refused that">
      <p role="alert">
        <code>{props.code}</code>: {props.message}
      </p>
      <p>
        <a href="../console">Back to the overview</a>
      </p>
    </Bare>
  );
}
