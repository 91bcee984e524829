/** @jsxRuntime automatic */
/** @jsxImportSource hono/jsx */
import type { Overview } from '../../../core/operator.js';
import { Countdown, Page, path, Status, Table, Time, type View } from '../layout.js';

export function OverviewPage(props: { view: View; overview: Overview }) {
  const { runs, queues, asks, recent, providers, tenants } = props.overview;
  return (
    <Page view={props.view} title="Overview" current="../console">
      <section aria-labelledby="now">
        <h2 id="now">Runs now</h2>
        <Table
          caption="Runs not settled, by status"
          head={['Status', 'Runs']}
          rows={Object.entries(runs).map(([status, { count, atLeast }]) => [
            <a href={`cancel?status=${status}`}>{status}</a>,
            `${count}${atLeast ? '+' : ''}`,
          ])}
        />
      </section>
      <div class="grid">
        <section aria-labelledby="queues">
          <h2 id="queues">Thread queues</h2>
          <Table
            caption="Threads with runs waiting"
            head={['Thread', 'Tenant', 'Waiting']}
            rows={queues.map(({ thread, waiting }) => [<a href={path.thread(thread.tenant, thread.threadId)}>{thread.threadId}</a>, thread.tenant, String(waiting)])}
            empty="No thread has runs waiting."
          />
        </section>
        <section aria-labelledby="asks">
          <h2 id="asks">Open asks</h2>
          <Table
            caption="Open asks, soonest to expire first"
            head={['Thread', 'Ask', 'Expires']}
            rows={asks.map((ask) => [
              <a href={path.thread(ask.tenant, ask.threadId)}>{ask.threadId}</a>,
              `${ask.kind}${ask.reason ? `: ${ask.reason}` : ask.toolCallName ? `: ${ask.toolCallName}` : ''}`,
              <Countdown at={ask.expiresAt} />,
            ])}
            empty="No ask is open."
          />
        </section>
      </div>
      <section aria-labelledby="recent">
        <h2 id="recent">Latest threads</h2>
        <Table
          caption="Latest threads and their latest run"
          head={['Thread', 'Tenant', 'Agent', 'Latest run', 'Status', 'Created']}
          rows={recent.map(({ thread, latest }) => [
            <a href={path.thread(thread.tenant, thread.threadId)}>{thread.threadId}</a>,
            thread.tenant,
            thread.agentId,
            latest ? <a href={path.run(thread.tenant, latest.runId)}>{latest.runId}</a> : '—',
            latest ? <Status status={latest.status} /> : '—',
            <Time at={latest?.createdAt ?? thread.createdAt} />,
          ])}
          empty="No thread yet."
        />
        <p>
          <a href="threads">All threads</a>
        </p>
      </section>
      <div class="grid">
        <section aria-labelledby="providers">
          <h2 id="providers">Providers</h2>
          <Table
            caption="Providers that dial out"
            head={['Provider', 'Linked', 'Places', 'Serving']}
            rows={providers.map((provider) => [provider.providerId, provider.linked ? 'linked' : 'not linked', `${provider.places} of ${provider.maxConcurrentRuns}`, provider.serving.join(', ') || '—'])}
            empty="No provider is registered."
          />
        </section>
        <section aria-labelledby="budgets">
          <h2 id="budgets">Budgets</h2>
          <Table
            caption="Tenants nearest their budget"
            head={['Tenant', 'Spent', 'Budget']}
            rows={tenants.slice(0, 10).map((tenant) => [
              <a href={`usage?tenant=${encodeURIComponent(tenant.tenant)}`}>{tenant.tenant}</a>,
              tenant.share === undefined ? '—' : `${Math.round(tenant.share * 100)}%`,
              tenant.budget ? budgetText(tenant.budget) : 'none',
            ])}
            empty="No thread yet."
          />
        </section>
      </div>
    </Page>
  );
}

export function budgetText(budget: { period: string; tokens?: number; cost?: { amount: number; currency: string }; spent: { tokens: number; cost?: number } }): string {
  const parts: string[] = [];
  if (budget.tokens !== undefined) parts.push(`${budget.spent.tokens} of ${budget.tokens} tokens`);
  if (budget.cost) parts.push(`${(budget.spent.cost ?? 0).toFixed(4)} of ${budget.cost.amount} ${budget.cost.currency}`);
  return `${parts.join(', ')} a ${budget.period}`;
}
