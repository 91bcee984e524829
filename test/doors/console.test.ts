import { randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { eventually } from '../support/core-harness.js';
import { aguiAgent, startTestGateway, userMessage } from '../support/gateway.js';

/**
 * The console's access over HTTP, as a browser (or an attacker's page) would reach it: sign-in and
 * its cookie, refusals without a session, with a stale CSRF token, from another origin, and by a
 * read-only session; acts audited with the admin as the actor; content hidden by a setting.
 */
const ADMIN = 'console-admin-token';
const READER = 'console-read-token';
let gateway: LocalGateway;
const url = (path: string) => `${gateway.url}${path}`;

beforeAll(async () => {
  gateway = await startTestGateway({ adminToken: ADMIN, consoleReadToken: READER, demoSlowIntervalMs: 50 });
});
afterAll(async () => {
  await gateway?.close();
});

/** Signs in with `token`: the session cookie as a browser would send it back, and the Set-Cookie it came in. */
async function signIn(token: string, headers: Record<string, string> = {}) {
  const response = await fetch(url('/console/sign-in'), {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: gateway.url, ...headers },
    body: new URLSearchParams({ token, next: 'threads?tenant=anonymous' }),
  });
  const setCookie = response.headers.get('set-cookie') ?? '';
  return { response, setCookie, cookie: setCookie.split(';')[0] };
}

/** A page's CSRF token, as its forms carry it. */
async function csrfOf(cookie: string): Promise<string> {
  const page = await (await fetch(url('/console'), { headers: { cookie } })).text();
  return /name="csrf" value="([^"]+)"/.exec(page)![1];
}

function act(path: string, cookie: string, form: Record<string, string>, origin = gateway.url) {
  return fetch(url(path), { method: 'POST', redirect: 'manual', headers: { cookie, origin, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(form) });
}

describe('the console’s access', () => {
  it('sends a request without a session to sign in, and refuses an act or a read of data without one', async () => {
    const page = await fetch(url('/console/threads?tenant=x'), { redirect: 'manual' });
    expect(page.status).toBe(303);
    expect(page.headers.get('location')).toBe(`/console/sign-in?next=${encodeURIComponent('threads?tenant=x')}`);
    for (const [method, path] of [
      ['POST', '/console/tenants/anonymous/runs/r1/cancel'],
      ['GET', '/console/tenants/anonymous/runs/r1/events.json'],
      ['GET', '/console/tenants/anonymous/runs/r1/stream'],
    ]) {
      const refused = await fetch(url(path), { method, redirect: 'manual' });
      expect({ path, status: refused.status, body: await refused.json() }).toMatchObject({ path, status: 401, body: { error: { code: 'console_session_required' } } });
    }
    // A cookie it did not sign is no session.
    expect((await fetch(url('/console'), { redirect: 'manual', headers: { cookie: 'funduq_console=admin.9999999999999.x.forged' } })).status).toBe(303);
  });

  it('signs in with the admin token into a cookie that is HttpOnly, SameSite=Strict, Secure over HTTPS, and expires', async () => {
    const wrong = await signIn('not-the-token');
    expect(wrong.response.status).toBe(401);
    expect(wrong.setCookie).toBe('');

    const { response, setCookie } = await signIn(ADMIN);
    expect(response.status).toBe(303);
    expect(response.headers.get('location')).toBe('/console/threads?tenant=anonymous');
    expect(setCookie).toMatch(/^funduq_console=[^;]+; Max-Age=28800; Path=\/console; Expires=[^;]+; HttpOnly; SameSite=Strict$/);
    expect(Date.parse(/Expires=([^;]+)/.exec(setCookie)![1]) - Date.now()).toBeGreaterThan(7.9 * 3600_000);
    // Behind TLS (a proxy, API Gateway) the cookie is Secure.
    expect((await signIn(ADMIN, { 'x-forwarded-proto': 'https', origin: gateway.url.replace('http:', 'https:') })).setCookie).toMatch(/; Secure/);
    // A sign-in posted from another site is refused (login CSRF).
    expect((await signIn(ADMIN, { origin: 'https://evil.example' })).response.status).toBe(403);
    // A next that leaves the console goes to its overview instead.
    const away = await fetch(url('/console/sign-in'), { method: 'POST', redirect: 'manual', headers: { origin: gateway.url, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ token: ADMIN, next: '//evil.example/x' }) });
    expect(away.headers.get('location')).toBe('/console');
  });

  it('refuses an act with a stale CSRF token, from another origin, or by a read-only session; takes it from its own page', async () => {
    const { cookie } = await signIn(ADMIN);
    const csrf = await csrfOf(cookie);
    const threadId = `t-${randomUUID()}`;
    const runId = `slow-${randomUUID()}`;
    const slow = aguiAgent(gateway, threadId);
    slow.messages = [userMessage('/slow 200')];
    const done = slow.runAgent({ runId }).catch(() => undefined);
    const path = `/console/tenants/anonymous/runs/${runId}/cancel`;
    await eventually(async () => expect((await gateway.gateway.getRun(runId, { id: 'x', tenant: 'anonymous' }))?.status).toBe('running'));

    const stale = await act(path, cookie, { csrf: 'a'.repeat(64) });
    expect({ status: stale.status, body: await stale.json() }).toMatchObject({ status: 403, body: { error: { code: 'console_csrf_invalid' } } });
    // A browser that posted it is shown a page saying so, with the same status and code.
    const shown = await fetch(url(path), { method: 'POST', headers: { cookie, origin: gateway.url, accept: 'text/html', 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ csrf: 'stale' }) });
    expect([shown.status, shown.headers.get('content-type')]).toEqual([403, 'text/html; charset=UTF-8']);
    expect(await shown.text()).toContain('<code>console_csrf_invalid</code>');
    const elsewhere = await act(path, cookie, { csrf }, 'https://evil.example');
    expect({ status: elsewhere.status, body: await elsewhere.json() }).toMatchObject({ status: 403, body: { error: { code: 'console_cross_origin' } } });
    // Another session's token is not this one's.
    const other = await signIn(ADMIN);
    expect((await act(path, other.cookie, { csrf })).status).toBe(403);

    const reader = await signIn(READER);
    const readOnly = await act(path, reader.cookie, { csrf: await csrfOf(reader.cookie) });
    expect({ status: readOnly.status, body: await readOnly.json() }).toMatchObject({ status: 403, body: { error: { code: 'console_read_only' } } });
    // A read-only page offers no act.
    expect(await (await fetch(url(`/console/tenants/anonymous/runs/${runId}`), { headers: { cookie: reader.cookie } })).text()).not.toContain('Cancel run');

    const taken = await act(path, cookie, { csrf });
    expect(taken.status).toBe(303);
    await done;
    expect(await gateway.gateway.getRun(runId, { id: 'x', tenant: 'anonymous' })).toMatchObject({ status: 'cancelled', cancelRequest: { principal: 'admin' } });

    const audit = await (await fetch(url(`/admin/audit?action=run.cancel_requested&target=run:${runId}`), { headers: { authorization: `Bearer ${ADMIN}` } })).json();
    const recorded = (audit.records as { outcome: string }[]).filter((record) => record.outcome === 'ok');
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({ tenant: 'anonymous', actor: { principal: 'admin' } });
    // The refused attempts are recorded too, each with its code.
    expect((audit.records as { outcome: string }[]).map((record) => record.outcome).filter((outcome) => outcome !== 'ok').sort()).toEqual([
      'console_cross_origin',
      'console_csrf_invalid',
      'console_csrf_invalid',
      'console_csrf_invalid',
      'console_read_only',
    ]);
  });

  it('cancels by filter only with a filter, showing the count first', async () => {
    const { cookie } = await signIn(ADMIN);
    const csrf = await csrfOf(cookie);
    const none = await (await fetch(url('/console/cancel'), { headers: { cookie } })).text();
    expect(none).toContain('Name at least one of tenant, agent, thread or status');
    expect(none).not.toMatch(/Cancel \d+/);
    const threadId = `t-${randomUUID()}`;
    const slow = aguiAgent(gateway, threadId);
    slow.messages = [userMessage('/slow 200')];
    const running = slow.runAgent({ runId: `a-${randomUUID()}` }).catch(() => undefined);
    await eventually(async () => expect((await gateway.gateway.threadView(threadId, { id: 'x', tenant: 'anonymous' })).ok).toBe(true));
    const preview = await (await fetch(url(`/console/cancel?thread=${threadId}`), { headers: { cookie } })).text();
    expect(preview).toContain('Cancel 1 runs');
    // An empty filter confirmed cancels nothing.
    expect(await (await act('/console/cancel', cookie, { csrf })).text()).toContain('Cancel requested for 0 runs.');
    expect(await (await act('/console/cancel', cookie, { csrf, thread: threadId })).text()).toContain('Cancel requested for 1 runs.');
    await running;
  });
});

describe('the console’s pages', () => {
  it('shows the audit log’s sealed segments, each chained to the one before and signed by funduq’s key', async () => {
    const { cookie } = await signIn(ADMIN);
    expect(await gateway.gateway.audit.seal()).toBeGreaterThan(0);
    const agent = aguiAgent(gateway, `t-${randomUUID()}`);
    agent.messages = [userMessage('one more record')];
    await agent.runAgent({ runId: `r-${randomUUID()}` });
    expect(await gateway.gateway.audit.seal()).toBeGreaterThan(0);
    const page = await (await fetch(url('/console/audit'), { headers: { cookie } })).text();
    const rows = [...page.matchAll(/<tr><td>(\d+)<\/td>.*?<\/tr>/g)].map((row) => row[0]);
    expect(rows.length).toBeGreaterThanOrEqual(2);
    for (const row of rows) expect(row).toMatch(/<td>linked<\/td><td>funduq&#39;s<\/td>/);
  });

  it('serves one script, well under 50 KB gzipped, and no page loads anything from elsewhere', async () => {
    const { cookie } = await signIn(ADMIN);
    const page = await (await fetch(url('/console'), { headers: { cookie } })).text();
    const sources = [...page.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    expect(sources.filter((source) => /^(?:[a-z]+:)?\/\//i.test(source))).toEqual([]);
    const script = /<script src="([^"]+)"/.exec(page)![1];
    const body = Buffer.from(await (await fetch(url(`/console/${script}`))).arrayBuffer());
    expect(gzipSync(body).length).toBeLessThan(50 * 1024);
  });
});

describe('a console that must not show conversations', () => {
  let hidden: LocalGateway;
  beforeAll(async () => {
    hidden = await startTestGateway({ consoleHideContent: true });
  });
  afterAll(async () => {
    await hidden?.close();
  });

  it('leaves message text and event content out of its pages, and says it is open', async () => {
    const threadId = `t-${randomUUID()}`;
    const agent = aguiAgent(hidden, threadId);
    agent.messages = [userMessage('a secret about the merger')];
    const { newMessages } = await agent.runAgent({ runId: `r-${randomUUID()}` });
    expect(JSON.stringify(newMessages)).toContain('merger');
    // Open mode: a session is made on the first page, with the warning on it.
    const first = await fetch(`${hidden.url}/console/tenants/anonymous/threads/${threadId}`);
    const cookie = (first.headers.get('set-cookie') ?? '').split(';')[0];
    const page = await first.text();
    expect(page).toContain('FUNDUQ_ADMIN_TOKEN is not set');
    expect(page).toContain('Message content is hidden');
    expect(page).not.toContain('merger');
    const runId = /runs\/([^"]+)"/.exec(page)![1];
    const events = await (await fetch(`${hidden.url}/console/tenants/anonymous/runs/${runId}/events.json`, { headers: { cookie } })).text();
    expect(events).toContain('TEXT_MESSAGE_CONTENT');
    expect(events).toContain('[hidden]');
    expect(events).not.toContain('merger');
  });
});
