/** @jsxRuntime automatic */
/** @jsxImportSource hono/jsx */
import type { Child } from 'hono/jsx';
import { ASSETS } from './assets.js';
import type { Session } from './session.js';

/** What every page is drawn with: the session (its role, its CSRF token) and whether content is shown. */
export interface View {
  session: Session;
  /** Message text and tool arguments are left out (`FUNDUQ_CONSOLE_HIDE_CONTENT`). */
  hideContent: boolean;
  /**
   * Where the console is, as the browser reaches it (`/console/`, or `/prod/console/` behind an API
   * Gateway stage): every page's base, so its links are relative and hold no path of the gateway's.
   */
  base: string;
}

const SECTIONS: [string, string][] = [
  ['../console', 'Overview'],
  ['threads', 'Threads'],
  ['usage', 'Usage and budgets'],
  ['agents', 'Agents and providers'],
  ['audit', 'Audit log'],
];

/** A page as the browser takes it: a document in standards mode. */
export function documentOf(page: unknown): string {
  return `<!DOCTYPE html>${String(page)}`;
}

/** Every page's head: its title, and its base (the console's path as the browser reaches it). */
export function Head(props: { base: string; title: string; children?: Child }) {
  return (
    <head>
      <meta charset="utf-8" />
      <meta name="viewport" content="width=device-width, initial-scale=1" />
      <title>{`${props.title} · funduq console`}</title>
      <base href={props.base} />
      {props.children}
    </head>
  );
}

export function Page(props: { view: View; title: string; children?: Child; current?: string }) {
  const { session } = props.view;
  return (
    <html lang="en">
      <Head base={props.view.base} title={props.title}>
        <link rel="stylesheet" href={ASSETS.css.path} />
        <script src={ASSETS.js.path} defer></script>
      </Head>
      <body>
        <header>
          <a class="brand" href="../console">
            funduq console
          </a>
          <nav aria-label="Console">
            <ul>
              {SECTIONS.map(([href, name]) => (
                <li>
                  <a href={href} aria-current={props.current === href ? 'page' : undefined}>
                    {name}
                  </a>
                </li>
              ))}
            </ul>
          </nav>
          {session.open ? null : (
            <form method="post" action="sign-out" class="inline">
              <span class="role">{session.role === 'admin' ? 'Signed in as admin' : 'Signed in read-only'}</span>
              <Csrf session={session} />
              <button type="submit">Sign out</button>
            </form>
          )}
        </header>
        {session.open ? (
          <p role="alert" class="warning">
            FUNDUQ_ADMIN_TOKEN is not set: anyone who reaches this console can read every thread and act on it.
          </p>
        ) : null}
        <main>
          <h1>{props.title}</h1>
          {props.children}
        </main>
      </body>
    </html>
  );
}

export function Csrf(props: { session: Session }) {
  return <input type="hidden" name="csrf" value={props.session.csrf} />;
}

/** An act's form: its CSRF token, and its button named by what it does. */
export function Act(props: { view: View; action: string; label: string; fields?: Record<string, string>; danger?: boolean }) {
  if (props.view.session.role !== 'admin') return null;
  return (
    <form method="post" action={props.action} class="inline">
      <Csrf session={props.view.session} />
      {Object.entries(props.fields ?? {}).map(([name, value]) => (
        <input type="hidden" name={name} value={value} />
      ))}
      <button type="submit" class={props.danger ? 'danger' : undefined}>
        {props.label}
      </button>
    </form>
  );
}

export function Time(props: { at?: string }) {
  return props.at ? <time datetime={props.at}>{props.at.replace('T', ' ').replace(/\.\d+Z$/, 'Z')}</time> : <span>—</span>;
}

/** A live countdown to `at` (the script keeps it current); the time itself without script. */
export function Countdown(props: { at?: string }) {
  if (!props.at) return <span>no expiry</span>;
  return (
    <time datetime={props.at} data-countdown={props.at}>
      {props.at}
    </time>
  );
}

export function Status(props: { status: string }) {
  return <span class={`status ${props.status}`}>{props.status}</span>;
}

export const path = {
  thread: (tenant: string, threadId: string) => `tenants/${encodeURIComponent(tenant)}/threads/${encodeURIComponent(threadId)}`,
  run: (tenant: string, runId: string) => `tenants/${encodeURIComponent(tenant)}/runs/${encodeURIComponent(runId)}`,
  threads: (query: Record<string, string | undefined>) => `threads${search(query)}`,
};

export function search(query: Record<string, string | undefined>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) if (value !== undefined && value !== '') params.set(key, value);
  const text = params.toString();
  return text ? `?${text}` : '';
}

/** A table with a caption (its accessible name) and column headers. */
export function Table(props: { caption: string; head: string[]; rows: Child[][]; empty?: string }) {
  if (props.rows.length === 0) return <p class="empty">{props.empty ?? `No ${props.caption.toLowerCase()}.`}</p>;
  return (
    <table>
      <caption>{props.caption}</caption>
      <thead>
        <tr>
          {props.head.map((name) => (
            <th scope="col">{name}</th>
          ))}
        </tr>
      </thead>
      <tbody>
        {props.rows.map((cells) => (
          <tr>
            {cells.map((cell) => (
              <td>{cell}</td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** A filter of a listing: a GET form (so the view it makes is a link), a search landmark named by `label`. */
export function Filters(props: { action: string; label: string; submit: string; texts?: [name: string, label: string, value: string | undefined][]; children?: Child }) {
  return (
    <form method="get" action={props.action} class="filters" role="search" aria-label={props.label}>
      {(props.texts ?? []).map(([name, label, value]) => (
        <label>
          {label}
          <input name={name} value={value ?? ''} />
        </label>
      ))}
      {props.children}
      <button type="submit">{props.submit}</button>
    </form>
  );
}
