import { existsSync, statSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { NotARecord, SCHEMA_VERSION, SchemaTooNew, SqliteStore, StoreLocked, createSqliteStore } from '../../../lambdas/adapters/local/sqlite/store.js';
import { StoreUnavailable } from '../../../lambdas/core/errors.js';
import { aPushConfig, aRun, aThread, anAgent, events, openAsk, range, seqs } from '../../support/store-fixtures.js';
import { TaskStates } from '../../../lambdas/core/a2a/vocabulary.js';
import { eventually } from '../../support/core-harness.js';
import { recordProjections } from '../../../lambdas/core/a2a/task-state.js';

/**
 * What only the SQLite adapter does: its file, its lock, its schema version, its transactions.
 * The port's own behaviour is test/adapters/run-store.test.ts.
 */
let dir: string;
let file: string;
const open: SqliteStore[] = [];

function openStore(): SqliteStore {
  const store = createSqliteStore(file, { projections: recordProjections });
  open.push(store);
  return store;
}

/** A record as schema 4 left it: without the task index, its runs' inputs in their rows, no arrivals, no principals' keys, no leases, no audit log. */
function asSchema4(raw: Database.Database): void {
  raw.exec(`
    DROP TABLE retention;
    DROP INDEX threads_idle;
    ALTER TABLE threads DROP COLUMN last_activity_at;
    DROP TABLE audit_records;
    DROP TABLE audit_segments;
    DROP TABLE leases;
    DROP TABLE principals;
    DROP TABLE arrivals;
    ALTER TABLE runs ADD COLUMN input TEXT NOT NULL DEFAULT '';
    UPDATE runs SET input = (SELECT input FROM run_inputs WHERE run_inputs.run_id = runs.run_id);
    DROP TABLE run_inputs;
    DROP TABLE tasks;
    CREATE INDEX root_runs_by_tenant ON runs (tenant, created_at, run_id) WHERE is_root = 1;
  `);
  raw.pragma('user_version = 4');
}

/** A record as schema 1 left it: without the tables later steps make either. */
function asSchema1(raw: Database.Database): void {
  asSchema4(raw);
  raw.exec('DROP TABLE providers; DROP TABLE places');
  raw.pragma('user_version = 1');
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'funduq-sqlite-'));
  file = join(dir, 'funduq.sqlite');
});

afterEach(async () => {
  for (const store of open.splice(0)) await store.close();
  await rm(dir, { recursive: true, force: true });
});

describe('SqliteStore: its file', () => {
  it('keeps threads, runs, events, agents and push configs across a reopen of the same file', async () => {
    const first = openStore();
    const thread = aThread();
    const run = aRun({ threadId: thread.threadId, status: 'completed', closingEvents: [{ type: 'RUN_FINISHED' }] });
    await first.threads.create(thread, 'run-0');
    await first.threads.reserveArrival(thread, run.runId, 8);
    await first.runs.create(run);
    await first.events.append(events(run.runId, 3));
    await first.agents.put(anAgent('research'));
    await first.pushConfigs.put(aPushConfig(run.runId, 'hook'));
    await first.close();

    const second = openStore();
    expect(await second.threads.get(thread)).toEqual({ ...thread, unsettled: 1, arrivals: 1 });
    expect(await second.runs.get(run.runId)).toEqual(run);
    expect(seqs(await second.events.read(run.runId, 0))).toEqual([1, 2, 3]);
    expect(await second.agents.get('research')).toEqual(anAgent('research'));
    expect(await second.pushConfigs.list(run.runId)).toEqual([aPushConfig(run.runId, 'hook')]);
  });

  it('writes ahead to a log beside the file (WAL), so a commit does not rewrite the database', async () => {
    const store = openStore();
    await store.events.append(events('run-1', 10));
    expect(existsSync(`${file}-wal`)).toBe(true);
  });

  it("copies its log into the file on a thread of its own while it stays open, none of its commits doing it", async () => {
    const store = openStore();
    const empty = statSync(file).size;
    const big = { type: 'CUSTOM', name: 'big', value: 'x'.repeat(60_000) } as const;
    for (let i = 0; i < 40; i++) await store.events.append([{ runId: 'run-1', seq: i + 1, event: big }]);
    // 2.4 MB of commits, under SQLite's own threshold of 1,000 pages: left to the commits, the file would not grow before the close.
    await eventually(() => expect(statSync(file).size).toBeGreaterThan(empty + 2_000_000));
    expect(seqs(await store.events.read('run-1', 0))).toEqual(range(1, 40));
  });

  it('copies its log in its own commits again, saying so, when the checkpoint thread is gone', async () => {
    const said: string[] = [];
    const store = createSqliteStore(file, { projections: recordProjections, onCheckpointFailure: (message) => said.push(message) });
    open.push(store);
    const { checkpointer, db } = store as unknown as { checkpointer: { worker: { terminate(): Promise<number> } }; db: Database.Database };
    expect(db.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
    await checkpointer.worker.terminate();
    await eventually(() => expect(said).toEqual([expect.stringMatching(/^the record's checkpoint thread stopped .*the gateway's own commits copy the log into .*funduq\.sqlite from now on$/)]));
    expect(db.pragma('wal_autocheckpoint', { simple: true })).toBe(1000);
  });

  it('is held by one process at a time: a second opening is refused until the first closes', async () => {
    const first = openStore();
    expect(() => openStore()).toThrow(StoreLocked);
    await first.close();
    expect(() => openStore()).not.toThrow();
  });

  it('refuses a file written by a newer funduq, saying which schema and what to do', async () => {
    await openStore().close();
    const raw = new Database(file);
    raw.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    raw.close();

    expect(() => openStore()).toThrow(SchemaTooNew);
    expect(() => openStore()).toThrow(`record schema ${SCHEMA_VERSION + 1}; this one reads up to ${SCHEMA_VERSION}`);
  });

  it('brings a file of schema 1 up: the waiting run ids it kept as text read back as they were', async () => {
    const store = openStore();
    const thread = aThread({ waitingRunId: 'run-waiting' });
    await store.threads.create(thread, 'run-waiting');
    await store.close();
    open.splice(0);
    const raw = new Database(file);
    raw.prepare('UPDATE threads SET waiting_run_id = ?').run('run-waiting');
    asSchema1(raw);
    raw.close();

    expect(await openStore().threads.get(thread)).toMatchObject({ waitingRunId: 'run-waiting' });
  });

  it('gives a record of schema 1 the holders of its places from its unsettled runs, so each is given back once', async () => {
    const first = openStore();
    const thread = aThread({ unsettled: 1, arrivals: 1 });
    await first.threads.create(thread, 'queued-1');
    await first.runs.create(aRun({ runId: 'queued-1', threadId: thread.threadId, status: 'queued', tenantPlace: true }));
    await first.close();
    const raw = new Database(file);
    asSchema1(raw);
    raw.close();

    const store = openStore();
    expect(await store.threads.placeHolders(thread)).toEqual(['queued-1']);
    await store.threads.releasePlace(thread, 'queued-1');
    await store.threads.releasePlace(thread, 'queued-1');
    expect(await store.threads.get(thread)).toMatchObject({ unsettled: 0 });
  });

  it('gives a record of schema 4 its task index from its runs (each task listed under its tail run\'s state) and its runs\' inputs a table of their own', async () => {
    const first = openStore();
    const waiting = aRun({ runId: 'waiting', status: 'completed', asks: { a1: openAsk('a1') }, createdAt: '2025-01-01T00:00:00.000Z' });
    const answered = aRun({ runId: 'answered', threadId: 'thread-b', status: 'completed', asks: { a1: { ...openAsk('a1'), state: 'answered', closedByRunId: 'answer' } } });
    const answer = aRun({ runId: 'answer', threadId: 'thread-b', rootRunId: 'answered', parentRunId: 'answered', arrival: 2, status: 'running' });
    for (const run of [waiting, answered, answer]) await first.runs.create(run);
    await first.close();
    open.splice(0);
    const raw = new Database(file);
    asSchema4(raw);
    raw.close();

    const store = openStore();
    const listed = async (state: number) => (await store.tasks.list('acme', { agentId: 'demo', state, limit: 10 })).runs.map((run) => run.runId);
    expect(await listed(TaskStates.INPUT_REQUIRED)).toEqual(['waiting']);
    expect(await listed(TaskStates.WORKING)).toEqual(['answered']);
    expect(await listed(TaskStates.SUBMITTED)).toEqual([]);
    expect(await store.runs.get('answer')).toEqual(answer);
    expect(store.census()).toMatchObject({ runs: 3, run_inputs: 3, tasks: 2 });
  });

  it('refuses a SQLite database that is not a funduq record, and a file that is not a database', async () => {
    const stranger = new Database(file);
    stranger.exec('CREATE TABLE notes (text TEXT)');
    await stranger.close();
    expect(() => openStore()).toThrow(NotARecord);
    expect(() => openStore()).toThrow('not a funduq record');

    const other = join(dir, 'text.sqlite');
    await writeFile(other, 'x'.repeat(4096));
    expect(() => createSqliteStore(other, { projections: recordProjections })).toThrow('not a SQLite database');
  });
});

describe('SqliteStore: writes that span rows', () => {
  it('stores a batch of events whole or not at all', async () => {
    const store = openStore();
    await store.events.append(events('run-1', 5));

    // The batch's last event repeats a stored seq: the write fails, and none of its events stays.
    await expect(store.events.append([...events('run-1', 5, 6), ...events('run-1', 1, 5)])).rejects.toThrow();
    expect(seqs(await store.events.read('run-1', 0))).toEqual(range(1, 5));
  });

  it('fails an event write the disk cannot take with store_unavailable, storing none of it', async () => {
    const store = openStore();
    await store.events.append(events('run-1', 5));
    // A full disk, for this file only: the database may not grow past the pages it has.
    const db = (store as unknown as { db: Database.Database }).db;
    db.pragma(`max_page_count = ${db.pragma('page_count', { simple: true }) as number}`);
    const big = events('run-1', 50, 6).map((e) => ({ ...e, event: { ...e.event, delta: 'x'.repeat(4_000) } }));

    const writing = store.events.append(big);

    await expect(writing).rejects.toBeInstanceOf(StoreUnavailable);
    await expect(writing).rejects.toMatchObject({ code: 'store_unavailable', cause: { code: 'SQLITE_FULL' } });
    expect(seqs(await store.events.read('run-1', 0))).toEqual(range(1, 5));
  });
});
