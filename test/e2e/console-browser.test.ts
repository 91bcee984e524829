import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { HttpAgent } from '@ag-ui/client';
import type { RunAgentInput } from '@ag-ui/core';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, seriousViolations, type Violation } from '../support/browser.js';
import { startChildGateway, type ChildGateway } from '../support/child-gateway.js';
import { startMeteredAgent, type MeteredAgent } from '../support/metered-agent.js';

/**
 * The console in a real browser (headless Chromium from npm), against the gateway as `npm start`
 * runs it, driven the way a person would: by role and name. Every page is checked by axe-core.
 */
const TOKEN = `console-${randomUUID()}`;
const EVENTS = 20_000;
let gateway: ChildGateway;
let browser: Browser;
let page: Page;
let dataDir: string;
let metered: MeteredAgent;
let burst: { url: string; close(): Promise<void> };
const violations: { page: string; violations: Violation[] }[] = [];
const figures: string[] = [];

function agent(threadId: string, agentId = 'demo') {
  return new HttpAgent({ url: `${gateway.url}/agui/${agentId}`, threadId });
}

function send(threadId: string, text: string, agentId = 'demo') {
  const client = agent(threadId, agentId);
  client.messages = [{ id: randomUUID(), role: 'user', content: text }];
  return client.runAgent({ runId: `run-${randomUUID()}` });
}

/** Goes to a console page and checks it with axe-core. */
async function visit(path: string) {
  await page.goto(`${gateway.url}/console${path}`);
  await check(path);
}

async function check(name: string) {
  const found = await seriousViolations(page);
  if (found.length > 0) violations.push({ page: name, violations: found });
}

/** An AG-UI agent that bursts `count` events at once. */
async function startBurstAgent(count: number) {
  const app = new Hono().post('/', async (c) => {
    const input = (await c.req.json()) as RunAgentInput;
    return streamSSE(c, async (stream) => {
      const messageId = `m-${input.runId}`;
      const frames = [{ type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId }, { type: 'TEXT_MESSAGE_START', messageId, role: 'assistant' }];
      for (let i = 0; i < count - 4; i++) frames.push({ type: 'TEXT_MESSAGE_CONTENT', messageId, delta: `chunk ${i} ` } as never);
      frames.push({ type: 'TEXT_MESSAGE_END', messageId } as never, { type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId } as never);
      await stream.write(frames.map((frame) => `data: ${JSON.stringify(frame)}\n\n`).join(''));
    });
  });
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s as Server));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

async function register(agentId: string, url: string) {
  const response = await fetch(`${gateway.url}/admin/agents/${agentId}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url, description: `${agentId} for the console's tests` }),
  });
  expect(response.status).toBe(201);
}

/** The status the run page shows now (reloaded). */
async function runStatus(): Promise<string> {
  await page.reload();
  return (await page.locator('#run-status').textContent()) ?? '';
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'funduq-console-'));
  [gateway, browser, metered, burst] = await Promise.all([
    startChildGateway({ env: { FUNDUQ_DATA_DIR: dataDir, FUNDUQ_ADMIN_TOKEN: TOKEN } }),
    launchBrowser(),
    startMeteredAgent(),
    startBurstAgent(EVENTS),
  ]);
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
}, 60_000);

afterAll(async () => {
  await page?.close();
  await browser?.close();
  await Promise.all([gateway?.kill(), metered?.close(), burst?.close()]);
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  if (process.env.FUNDUQ_TEST_FIGURES) console.log(figures.join('\n'));
});

describe('the console in a browser', { timeout: 120_000 }, () => {
  it('signs in, and the overview shows a run just made', async () => {
    // The checker finds what it is for: an image with no text is a critical violation.
    const probe = await browser.newPage();
    await probe.setContent('<!DOCTYPE html><html lang="en"><title>t</title><main><img src="x.png"></main></html>');
    expect((await seriousViolations(probe)).map((violation) => violation.id)).toContain('image-alt');
    await probe.close();

    await page.goto(`${gateway.url}/console`);
    await page.getByRole('heading', { name: 'Sign in to the funduq console' }).waitFor();
    await check('sign-in');
    await page.getByLabel('Token').fill('not the token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').waitFor();
    await page.getByLabel('Token').fill(TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();

    const threadId = `overview-${randomUUID()}`;
    await send(threadId, 'hello');
    await visit('');
    const recent = page.getByRole('table', { name: 'Latest threads and their latest run' });
    await recent.getByRole('link', { name: threadId }).waitFor();
    expect(await recent.getByRole('row').filter({ hasText: threadId }).textContent()).toContain('completed');
  });

  it('shows a busy thread’s queue, streams a running run’s events live, and cancels it from its page', async () => {
    const threadId = `queue-${randomUUID()}`;
    const slow = send(threadId, '/slow 300').catch((error: unknown) => error);
    const thread = `/tenants/anonymous/threads/${encodeURIComponent(threadId)}`;
    await expect.poll(async () => (await fetch(`${gateway.url}/threads/${threadId}`)).status, { timeout: 10_000 }).toBe(200);
    const behind = [send(threadId, 'after one'), send(threadId, 'after two')];
    await expect
      .poll(async () => {
        await visit(thread);
        return page.getByRole('table', { name: 'The running run and the runs waiting their turn, in order' }).getByRole('row').count();
      })
      .toBe(4);
    const queue = page.getByRole('table', { name: 'The running run and the runs waiting their turn, in order' });
    // The picture docs/console.md shows (FUNDUQ_CONSOLE_SCREENSHOT=docs/console.png takes it again).
    const shot = await page.screenshot({ path: process.env.FUNDUQ_CONSOLE_SCREENSHOT ?? join(dataDir, 'console.png'), fullPage: true });
    expect(shot.subarray(1, 4).toString()).toBe('PNG');
    const rows = queue.getByRole('row');
    const running = (await rows.nth(1).getByRole('link').textContent())!;
    expect(await rows.nth(1).textContent()).toContain('running');
    // Each waiting run waits for the one before it.
    expect(await rows.nth(2).textContent()).toContain(running);

    await queue.getByRole('link', { name: running }).click();
    await page.getByRole('heading', { name: `Run ${running}` }).waitFor();
    await check('run (live)');
    const log = page.locator('#event-log');
    await expect.poll(async () => Number(await log.getAttribute('data-loaded'))).toBeGreaterThan(0);
    const first = Number(await log.getAttribute('data-loaded'));
    // The page is not reloaded: what it gains came on its stream.
    await expect.poll(async () => Number(await log.getAttribute('data-loaded')), { timeout: 15_000 }).toBeGreaterThan(first + 2);

    await page.getByRole('button', { name: 'Cancel run' }).click();
    await expect.poll(runStatus, { timeout: 15_000 }).toContain('cancelled');
    await slow;
    await Promise.all(behind);
    await visit(thread);
    const runs = page.getByRole('table', { name: 'Every run of the thread, in arrival order' });
    expect(await runs.getByRole('row').filter({ hasText: 'completed' }).count()).toBe(2);
  });

  it('answers an open ask from its form, and the answer run appears', async () => {
    const threadId = `ask-${randomUUID()}`;
    await send(threadId, '/ask 600');
    await visit(`/tenants/anonymous/threads/${encodeURIComponent(threadId)}`);
    const asks = page.getByRole('table', { name: 'Asks waiting for an answer' });
    expect(await asks.getByRole('row').count()).toBe(2);
    await expect.poll(async () => asks.locator('[data-countdown]').textContent()).toMatch(/^expires in \d\dm \d\ds$/);
    const form = page.getByRole('form', { name: 'Answer the open asks' });
    await form.getByLabel('approved').selectOption('true');
    await form.getByRole('button', { name: 'Answer' }).click();
    await page.getByRole('heading', { name: /^Run / }).waitFor();
    await check('run (answer)');
    await expect.poll(runStatus, { timeout: 10_000 }).toContain('completed');
    // The same run as the A2A door projects it: the task of the asking run, done.
    expect(await page.getByRole('definition').filter({ hasText: /^TASK_STATE_COMPLETED$/ }).count()).toBe(1);
    await visit(`/tenants/anonymous/threads/${encodeURIComponent(threadId)}`);
    expect(await page.getByText('No ask is open.').count()).toBe(1);
    const runs = page.getByRole('table', { name: 'Every run of the thread, in arrival order' }).getByRole('row');
    expect(await runs.count()).toBe(3);
    expect(await runs.nth(2).textContent()).toContain(await runs.nth(1).getByRole('link').textContent());
  });

  it('opens a run of 20,000 events at once and reaches its last event', async () => {
    await register('burst', burst.url);
    const threadId = `burst-${randomUUID()}`;
    // Read straight off the wire (the stock client takes seconds over 20,000 events: not what is tested here).
    const streamed = await fetch(`${gateway.url}/agui/burst`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ threadId, runId: `run-${randomUUID()}`, messages: [{ id: 'm', role: 'user', content: 'go' }], tools: [], context: [], state: {}, forwardedProps: {} }),
    });
    expect((await streamed.text()).match(/^id: /gm)).toHaveLength(EVENTS);
    const view = (await (await fetch(`${gateway.url}/threads/${threadId}`)).json()) as { runs: { runId: string }[] };
    const runId = view.runs[0].runId;
    await page.goto(`${gateway.url}/console/tenants/anonymous/runs/${runId}`);
    const log = page.locator('#event-log');
    await expect.poll(async () => log.getAttribute('data-loaded'), { timeout: 20_000 }).toBe(String(EVENTS));
    const painted = await page.evaluate(() => performance.getEntriesByName('funduq-events-drawn')[0]?.startTime ?? NaN);
    await check('run (20,000 events)');
    // Only a screenful is in the page, however long the log.
    expect(await log.getByRole('row').count()).toBeLessThan(120);
    const scrolled = await page.evaluate(async (last) => {
      const started = performance.now();
      (document.querySelector('.to-end') as HTMLButtonElement).click();
      for (;;) {
        await new Promise(requestAnimationFrame);
        if (Array.from(document.querySelectorAll('#event-log td:first-child')).some((cell) => cell.textContent === String(last))) return performance.now() - started;
      }
    }, EVENTS);
    await log.getByRole('cell', { name: String(EVENTS), exact: true }).waitFor();
    figures.push(`console: a run of ${EVENTS} events first painted ${Math.round(painted)} ms after navigation; scrolled to its last event in ${Math.round(scrolled)} ms`);

    // The type filter hides what it is told to.
    await log.getByLabel('TEXT_MESSAGE_CONTENT').uncheck();
    await expect.poll(async () => log.locator('.count').textContent()).toBe(`4 of ${EVENTS} events shown`);
  });

  it('sets a tenant’s budget, which refuses the next run; disables an agent; and the audit page lists those acts', async () => {
    await register('metered', metered.url);
    await send(`metered-${randomUUID()}`, 'count me', 'metered');
    await visit('/usage?tenant=anonymous');
    const form = page.getByRole('form', { name: 'Set the budget' });
    await form.getByLabel('Tokens').fill('100');
    await form.getByRole('button', { name: 'Set budget' }).click();
    await page.getByText(/Budget: 120 of 100 tokens a month \(exhausted\)/).waitFor();
    const refused = await fetch(`${gateway.url}/agui/demo`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ threadId: `t-${randomUUID()}`, runId: `r-${randomUUID()}`, messages: [{ id: 'm', role: 'user', content: 'hi' }], tools: [], context: [], state: {}, forwardedProps: {} }),
    });
    expect({ status: refused.status, body: await refused.json() }).toMatchObject({ status: 429, body: { error: { code: 'tenant_budget_exhausted' } } });

    await visit('/agents');
    await page.getByRole('button', { name: 'Disable burst' }).click();
    await page.getByRole('button', { name: 'Enable burst' }).waitFor();
    await check('agents');

    await visit('/threads?state=idle');
    expect(await page.getByRole('table', { name: 'Threads, latest activity first' }).getByRole('row').count()).toBeGreaterThan(4);
    await visit('/cancel?tenant=anonymous');

    await visit('/audit?actor=admin');
    const records = page.getByRole('table', { name: 'Audit records, oldest first' });
    for (const action of ['run.cancel_requested', 'ask.answered', 'tenant.budget_changed', 'agent.changed']) {
      expect({ action, rows: await records.getByRole('row').filter({ hasText: action }).count() }).toMatchObject({ action, rows: expect.toSatisfy((n: number) => n > 0) });
    }
    expect(violations).toEqual([]);
  });
});
