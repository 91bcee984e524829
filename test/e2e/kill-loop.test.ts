import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SqliteStore, createSqliteStore } from '../../lambdas/adapters/local/sqlite/store.js';
import { eventually } from '../support/core-harness.js';
import { readSse, userMessage } from '../support/gateway.js';
import { startChildGateway } from '../support/child-gateway.js';
import { recordBreaks, sqliteSnapshot } from '../support/record-invariants.js';
import { recordProjections } from '../../lambdas/core/a2a/task-state.js';

/**
 * `npm start` killed (SIGKILL) at seeded moments of mixed traffic — bursts, queued runs, asks and
 * their answers, cancels, first messages of new threads — and started again on the same data dir,
 * ten times in a row; then the record keeps its promises, every run ends with a reason, every
 * replay ends, and A2A and AG-UI say the same of every task.
 */
const dataDir = mkdtempSync(join(tmpdir(), 'funduq-kill-'));
const children: ChildProcess[] = [];

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

async function start() {
  const gateway = await startChildGateway({ env: { FUNDUQ_DATA_DIR: dataDir } });
  children.push(gateway.child);
  return gateway;
}

async function stop(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill(signal);
  await exited;
}

/** mulberry32: the same moments for the same seed. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type View = { runs: Array<{ runId: string; status: string; reason?: string; parentRunId?: string }>; openAsks: Array<{ id: string }> };

async function view(url: string, threadId: string): Promise<View> {
  const response = await fetch(`${url}/threads/${threadId}`);
  // A thread whose first run the gateway died before accepting was never opened.
  if (response.status === 404) return { runs: [], openAsks: [] };
  return (await response.json()) as View;
}

/** Fires a request and forgets it: the gateway may die under it. */
function fire(url: string, path: string, body?: unknown): void {
  void fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) })
    .then((response) => response.body?.cancel())
    .catch(() => undefined);
}

describe('npm start killed at any moment', () => {
  it('keeps every promise of the record after ten SIGKILLs in a row on one data dir', async () => {
    const next = random(16);
    const threads = new Set<string>();
    const runIds: string[] = [];
    let counter = 0;
    const id = (prefix: string) => `${prefix}-${++counter}`;
    const post = (url: string, threadId: string, text: string, extra: Record<string, unknown> = {}) => {
      const runId = id('run');
      threads.add(threadId);
      runIds.push(runId);
      fire(url, '/agui/demo', { threadId, runId, messages: text === '' ? [] : [userMessage(text)], ...extra });
      return runId;
    };
    for (let round = 1; round <= 10; round++) {
      const { url, child } = await start();
      // Answers to what earlier rounds left open, and cancels of what they left queued.
      for (const threadId of threads) {
        const found = await view(url, threadId);
        for (const ask of found.openAsks.slice(0, 1)) post(url, threadId, '', { resume: [{ interruptId: ask.id, status: 'resolved', payload: { round } }] });
        const queued = found.runs.find((run) => run.status === 'queued');
        if (queued && next() < 0.5) fire(url, `/agui/demo/runs/${queued.runId}/cancel`);
      }
      // A burst, eight queued runs behind it, asks, and first messages of new threads.
      const busy = `busy-${round}`;
      post(url, busy, '/slow 40');
      const waiting = Array.from({ length: 8 }, (_, i) => post(url, busy, i % 3 === 0 ? '/ask' : `queued ${i}`));
      for (let i = 0; i < 3; i++) post(url, id('new'), i === 0 ? '/ask' : 'hello');
      // The kill's moment, drawn from the seed: the point is not to wait for anything to settle,
      // but to land the SIGKILL somewhere in the middle of the traffic.
      await new Promise((resolve) => setTimeout(resolve, 20 + Math.floor(next() * 200)));
      for (const runId of waiting.filter(() => next() < 0.3)) fire(url, `/agui/demo/runs/${runId}/cancel`);
      await new Promise((resolve) => setTimeout(resolve, Math.floor(next() * 200)));
      await stop(child, 'SIGKILL');
    }

    const { url, child } = await start();
    // After the last restart everything accepted settles: nothing is left queued or running.
    await eventually(async () => {
      for (const threadId of threads) {
        const runs = (await view(url, threadId)).runs;
        expect(runs.filter((run) => run.status === 'queued' || run.status === 'running' || run.status === 'cancelling')).toEqual([]);
      }
    }, 60_000);
    const known = new Map<string, View['runs'][number]>();
    for (const threadId of threads) for (const run of (await view(url, threadId)).runs) known.set(run.runId, run);
    for (const run of known.values()) {
      if (run.status === 'failed' || run.status === 'cancelled') expect({ runId: run.runId, reason: run.reason }).toEqual({ runId: run.runId, reason: expect.any(String) });
      const { events } = await readSse(await fetch(`${url}/agui/demo/runs/${run.runId}/events`));
      expect({ runId: run.runId, ids: events.map((e) => e.id) }).toEqual({ runId: run.runId, ids: events.map((_, i) => String(i + 1)) });
      expect({ runId: run.runId, last: events.at(-1)?.data.type }).toEqual({ runId: run.runId, last: expect.stringMatching(/^RUN_(FINISHED|ERROR)$/) });
    }
    // A2A says of each task (a root run and its answers) what AG-UI says of its latest run.
    const roots = [...known.values()].filter((run) => run.parentRunId === undefined);
    for (const root of roots) {
      const rootOf = (run: View['runs'][number]): string => (run.parentRunId === undefined ? run.runId : rootOf(known.get(run.parentRunId)!));
      const lineage = [...known.values()].filter((run) => rootOf(run) === root.runId);
      const latest = lineage.at(-1)!;
      const task = (await (await fetch(`${url}/a2a/demo/rest/tasks/${root.runId}`, { headers: { 'A2A-Version': '1.0' } })).json()) as { status?: { state?: string } };
      // A completed run may have left asks open (its task waits for input), or had them cancelled (a cancel of a waiting run).
      const expected = latest.status === 'completed' ? ['COMPLETED', 'INPUT_REQUIRED', 'CANCELED'] : [latest.status === 'failed' ? 'FAILED' : 'CANCELED'];
      expect({ task: root.runId, state: task.status?.state?.replace(/^TASK_STATE_/, '') }).toEqual({ task: root.runId, state: expect.toSatisfy((state: string) => expected.includes(state)) });
    }
    await stop(child, 'SIGTERM');
    const store = createSqliteStore(join(dataDir, 'funduq.sqlite'), { projections: recordProjections });
    try {
      expect(recordBreaks(sqliteSnapshot(store))).toEqual([]);
    } finally {
      await store.close();
    }
  }, 240_000);
});
