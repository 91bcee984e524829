import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { get, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunAgentInput } from '@ag-ui/core';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import { createParser } from 'eventsource-parser';
import { afterAll, describe, expect, it } from 'vitest';
import { startChildGateway, type ChildGateway } from '../support/child-gateway.js';
import { eventually } from '../support/core-harness.js';
import { readSse } from '../support/gateway.js';

const dirs: string[] = [];
const gateways: ChildGateway[] = [];

const servers: Server[] = [];

afterAll(async () => {
  for (const gateway of gateways) await gateway.kill();
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** The gateway as `npm start` runs it, on a heap small enough that an unbounded load would end it. */
async function smallGateway(env: Record<string, string>, agents: object[] = [], heapMb = 128): Promise<ChildGateway> {
  const dataDir = mkdtempSync(join(tmpdir(), 'funduq-load-'));
  dirs.push(dataDir);
  if (agents.length > 0) {
    env = { ...env, FUNDUQ_AGENTS_FILE: join(dataDir, 'agents.json') };
    writeFileSync(env.FUNDUQ_AGENTS_FILE, JSON.stringify({ agents }));
  }
  const gateway = await startChildGateway({ nodeFlags: [`--max-old-space-size=${heapMb}`], env: { FUNDUQ_DATA_DIR: dataDir, ...env } });
  gateways.push(gateway);
  return gateway;
}

const BIG = 'x'.repeat(340 * 1024 - 512);

/** A peak RSS, printed when asked (FUNDUQ_TEST_FIGURES=1): a passing suite prints nothing. */
function figure(load: string, peakRssMb: number): void {
  if (process.env.FUNDUQ_TEST_FIGURES) console.log(`peak RSS, ${load}: ${Math.round(peakRssMb)} MB`);
}

function bigRun(url: string, i: number, threadId = `load-${i}`, content = BIG): Promise<Response> {
  const input = { threadId, runId: `load-run-${i}`, messages: [{ id: `m-${i}`, role: 'user', content }], tools: [], context: [], state: {}, forwardedProps: {} };
  return fetch(`${url}/agui/demo`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(input) });
}

interface ThreadView {
  activeRun?: unknown;
  queue: unknown[];
}

async function threadView(url: string, threadId: string): Promise<ThreadView> {
  return (await fetch(`${url}/threads/${threadId}`)).json() as Promise<ThreadView>;
}

describe('the gateway under more large requests than it can hold at once', () => {
  it('refuses what it cannot take in with 503 gateway_busy and Retry-After, finishes every run it took, and stays up with its memory bounded', async () => {
    // Refused at once (no wait for room): the refusals themselves are under test.
    const gateway = await smallGateway({ FUNDUQ_MAX_INFLIGHT_MB: '4', FUNDUQ_MAX_INFLIGHT_REQUESTS: '64', FUNDUQ_ADMISSION_WAIT_MS: '0' });
    const outcomes = await Promise.all(
      Array.from({ length: 150 }, async (_, i) => {
        const response = await bigRun(gateway.url, i);
        if (response.status === 503) return { status: 503, retryAfter: response.headers.get('Retry-After'), body: (await response.json()) as { error: { code: string } } };
        const { events } = await readSse(response);
        return { status: response.status, last: events.at(-1)?.data.type };
      }),
    );
    const refused = outcomes.filter((o) => o.status === 503);
    const taken = outcomes.filter((o) => o.status === 200);
    expect(refused.length + taken.length).toBe(150);
    expect(refused.length).toBeGreaterThan(0);
    expect(taken.length).toBeGreaterThan(0);
    for (const o of refused) {
      expect(o.retryAfter).toMatch(/^\d+$/);
      expect(o.body?.error.code).toBe('gateway_busy');
    }
    for (const o of taken) expect(o.last).toBe('RUN_FINISHED');
    expect(gateway.alive()).toBe(true);
    expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200);
    figure('150 × 340 KB refused at once past 4 MB in flight', gateway.peakRssMb());
    expect(gateway.peakRssMb()).toBeLessThan(450);
  }, 120_000);
});

describe('a request that finds no room', () => {
  it('waits for one with its body unread, first come first in: a burst of large requests is taken whole, its memory bounded', async () => {
    // 4 MB holds 12 at once; 200 may wait (as many as may be in flight).
    const gateway = await smallGateway({ FUNDUQ_MAX_INFLIGHT_MB: '4', FUNDUQ_MAX_INFLIGHT_REQUESTS: '200', FUNDUQ_ADMISSION_WAIT_MS: '60000' });
    const outcomes = await Promise.all(
      Array.from({ length: 150 }, async (_, i) => {
        const response = await bigRun(gateway.url, i);
        return { status: response.status, last: (await readSse(response)).events.at(-1)?.data.type };
      }),
    );
    expect(outcomes.filter((o) => o.status === 200 && o.last === 'RUN_FINISHED')).toHaveLength(150);
    expect(gateway.alive()).toBe(true);
    figure('150 × 340 KB waiting for room', gateway.peakRssMb());
    expect(gateway.peakRssMb()).toBeLessThan(450);
  }, 120_000);

  it('is let in once the request ahead of it ends, or refused 503 gateway_busy once its wait is over', async () => {
    const patient = await smallGateway({ FUNDUQ_MAX_INFLIGHT_REQUESTS: '1', FUNDUQ_ADMISSION_WAIT_MS: '60000' });
    const first = await bigRun(patient.url, 1, 'wait-first', '/slow 4');
    const second = bigRun(patient.url, 2, 'wait-second').then((response) => ({ response, at: performance.now() }));
    // The first holds the only place until its stream ends; the second's answer comes after that.
    const firstEnded = await readSse(first).then(() => performance.now());
    const { response, at } = await second;
    expect(response.status).toBe(200);
    expect(at).toBeGreaterThanOrEqual(firstEnded);
    expect((await readSse(response)).events.at(-1)?.data.type).toBe('RUN_FINISHED');

    const hasty = await smallGateway({ FUNDUQ_MAX_INFLIGHT_REQUESTS: '1', FUNDUQ_ADMISSION_WAIT_MS: '200' });
    const holding = await bigRun(hasty.url, 3, 'hasty-first', '/slow 20');
    const refused = await bigRun(hasty.url, 4, 'hasty-second');
    expect(refused.status).toBe(503);
    expect(refused.headers.get('Retry-After')).toMatch(/^\d+$/);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('gateway_busy');
    await holding.body?.cancel();
  }, 60_000);
});

/** An AG-UI agent on loopback that streams 100 events of 380 KB once `release` is called. */
async function startHeavyAgent(): Promise<{ url: string; release: () => void }> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const app = new Hono().post('/', async (c) => {
    const { threadId, runId } = (await c.req.json()) as RunAgentInput;
    return streamSSE(c, async (stream) => {
      const send = (event: Record<string, unknown>) => stream.writeSSE({ data: JSON.stringify(event) });
      await send({ type: 'RUN_STARTED', threadId, runId });
      await released;
      await send({ type: 'TEXT_MESSAGE_START', messageId: 'm', role: 'assistant' });
      for (let i = 0; i < 100; i++) await send({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: `${i}`.padEnd(380 * 1024, '.') });
      await send({ type: 'TEXT_MESSAGE_END', messageId: 'm' });
      await send({ type: 'RUN_FINISHED', threadId, runId });
    });
  });
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s as Server));
  });
  servers.push(server);
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, release };
}

/** A reader of a run's events over plain HTTP that reads nothing past the response's head until told to. */
function stalledReader(url: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    get(url, (response) => {
      response.pause();
      resolve(response);
    }).on('error', reject);
  });
}

/** Everything a reader had not read, to the end of its stream: the events' ids and the comments. */
async function drain(response: IncomingMessage): Promise<{ ids: number[]; types: string[]; comments: string[] }> {
  const ids: number[] = [];
  const types: string[] = [];
  const comments: string[] = [];
  const parser = createParser({
    onEvent: (event) => {
      ids.push(Number(event.id));
      types.push((JSON.parse(event.data) as { type: string }).type);
    },
    onComment: (comment) => comments.push(comment.trim()),
  });
  response.setEncoding('utf8');
  for await (const chunk of response) parser.feed(chunk as string);
  return { ids, types, comments };
}

describe('a restart that finds many large runs queued', () => {
  it('comes up and runs them a few at a time, its memory bounded', async () => {
    const THREADS = 20;
    const dataDir = mkdtempSync(join(tmpdir(), 'funduq-load-'));
    dirs.push(dataDir);
    const first = await startChildGateway({ env: { FUNDUQ_DATA_DIR: dataDir, FUNDUQ_MAX_INFLIGHT_MB: '1000' } });
    gateways.push(first);
    // Each thread: a run that keeps going, and eight large runs queued behind it; the streams are left unread.
    const streams: Promise<unknown>[] = [];
    for (let t = 0; t < THREADS; t++) {
      await (await bigRun(first.url, t * 10, `restart-${t}`, '/slow 1000')).body?.cancel();
      for (let q = 1; q <= 8; q++) streams.push(bigRun(first.url, t * 10 + q, `restart-${t}`).catch(() => undefined));
    }
    await Promise.all(streams);
    await eventually(async () => {
      for (let t = 0; t < THREADS; t++) expect((await threadView(first.url, `restart-${t}`)).queue).toHaveLength(8);
    }, 30_000);
    await first.kill();

    const second = await startChildGateway({ nodeFlags: ['--max-old-space-size=256'], env: { FUNDUQ_DATA_DIR: dataDir, FUNDUQ_MAX_RUNNING_RUNS: '4' } });
    gateways.push(second);
    expect(second.output()).toContain(`recovered: ${THREADS} run(s) failed orphaned_by_restart, ${THREADS * 8} queued again`);
    await eventually(async () => {
      for (let t = 0; t < THREADS; t++) {
        const view = await threadView(second.url, `restart-${t}`);
        expect(view.queue).toHaveLength(0);
        expect(view.activeRun).toBeUndefined();
      }
    }, 60_000);
    expect(second.alive()).toBe(true);
    figure('restart over 160 queued large runs', second.peakRssMb());
    expect(second.peakRssMb()).toBeLessThan(400);
  }, 180_000);
});

describe('readers that do not read', () => {
  it('are fed only as fast as they take, ended with a comment saying so once they fall behind, and resume with Last-Event-ID', async () => {
    const agent = await startHeavyAgent();
    const gateway = await smallGateway({ FUNDUQ_HEARTBEAT_MS: '1000' }, [
      { id: 'heavy', description: 'streams 38 MB', provider: 'agui-http', url: agent.url, timeoutSeconds: 120, idleTimeoutSeconds: 60 },
    ], 256);
    // The run's own caller reads as fast as it can (a stock client's per-event bookkeeping on 38 MB
    // of text would make it a slow reader itself on a busy machine).
    const input = { threadId: 'heavy-thread', runId: 'heavy-run', messages: [{ id: 'go', role: 'user', content: 'go' }], tools: [], context: [], state: {}, forwardedProps: {} };
    const run = fetch(`${gateway.url}/agui/heavy`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(input) }).then(readSse);
    const events = `${gateway.url}/agui/heavy/runs/heavy-run/events`;
    await eventually(async () => expect((await fetch(`${gateway.url}/threads/heavy-thread`)).status).toBe(200), 20_000);
    const readers = await Promise.all(Array.from({ length: 12 }, () => stalledReader(events)));
    agent.release();
    const whole = await run;
    expect(whole.events.map((e) => e.data.type)).toEqual(['RUN_STARTED', 'TEXT_MESSAGE_START', ...Array(100).fill('TEXT_MESSAGE_CONTENT'), 'TEXT_MESSAGE_END', 'RUN_FINISHED']);
    // Each stalled reader is ended once it has taken nothing for a heartbeat interval.
    await eventually(() => expect(gateway.output().match(/fell behind/g)?.length ?? 0).toBeGreaterThanOrEqual(12), 30_000);
    expect(gateway.alive()).toBe(true);
    figure('12 unread readers of 100 × 380 KB', gateway.peakRssMb());
    expect(gateway.peakRssMb()).toBeLessThan(450);

    const missed = await drain(readers[0]);
    expect(missed.comments.some((c) => /this reader fell behind.*resume with Last-Event-ID/.test(c))).toBe(true);
    expect(missed.types).not.toContain('RUN_FINISHED');
    const last = missed.ids.at(-1) ?? 0;
    const resumed = await readSse(await fetch(events, { headers: { 'Last-Event-ID': String(last) } }));
    const ids = [...missed.ids, ...resumed.events.map((e) => Number(e.id))];
    expect(ids).toEqual(Array.from({ length: ids.length }, (_, i) => i + 1));
    expect(resumed.events.at(-1)?.data.type).toBe('RUN_FINISHED');
    for (const reader of readers.slice(1)) reader.destroy();
  }, 120_000);
});
