import { ScanCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type Database from 'better-sqlite3';
import type { SqliteRunStore } from '../../lambdas/adapters/local/sqlite-run-store.js';
import type { TableNames } from '../../lambdas/adapters/aws/dynamodb/tables.js';
import { isTerminal, threadKey, type Run, type Thread } from '../../lambdas/core/model.js';
import { taskStateOf } from '../../lambdas/core/a2a/task-state.js';

/**
 * The whole record read at rest, whichever store kept it: what the invariants below are checked
 * on after a fuzz case, a kill, or a fault the AWS box injected.
 */
export interface RecordSnapshot {
  threads: Thread[];
  runs: Run[];
  /** The seqs stored per run, in order. */
  seqs: Map<string, number[]>;
  /** Tenant places held, per tenant that has a count. */
  tenantPlaces: Map<string, number>;
  /** The task index ListTasks reads: per task (its root run's id), the tail run it was written from and the state it says. */
  tasks: Map<string, { tailArrival: number; state: number }>;
}

/** Every promise of the record that does not hold, one line each; none when all hold. */
export function recordBreaks(record: RecordSnapshot): string[] {
  const breaks: string[] = [];
  const runs = new Map(record.runs.map((run) => [run.runId, run]));
  const byThread = new Map<string, Run[]>();
  for (const run of record.runs) byThread.set(threadKey(run), [...(byThread.get(threadKey(run)) ?? []), run]);
  const threads = new Map(record.threads.map((thread) => [threadKey(thread), thread]));

  for (const thread of record.threads) {
    const key = threadKey(thread);
    const mine = byThread.get(key) ?? [];
    if (mine.length === 0) breaks.push(`thread ${key} has no run (a ghost thread)`);
    const unsettled = mine.filter((run) => !isTerminal(run.status)).length;
    if (thread.unsettled !== unsettled) breaks.push(`thread ${key} holds ${thread.unsettled} places for ${unsettled} unsettled runs`);
    if (thread.waitingRunId !== undefined && !runs.has(thread.waitingRunId)) breaks.push(`thread ${key} waits on run ${thread.waitingRunId}, which does not exist`);
  }
  for (const key of byThread.keys()) if (!threads.has(key)) breaks.push(`runs of thread ${key} have no thread`);

  const tenants = new Set([...record.tenantPlaces.keys(), ...record.runs.filter((run) => run.tenantPlace).map((run) => run.tenant)]);
  for (const tenant of tenants) {
    const held = record.tenantPlaces.get(tenant) ?? 0;
    const unsettled = record.runs.filter((run) => run.tenant === tenant && run.tenantPlace && !isTerminal(run.status)).length;
    if (held !== unsettled) breaks.push(`tenant ${tenant} holds ${held} places for ${unsettled} unsettled runs that took one`);
  }

  for (const run of record.runs) {
    const seqs = record.seqs.get(run.runId) ?? [];
    const hole = seqs.findIndex((seq, i) => seq !== i + 1);
    if (hole >= 0) breaks.push(`run ${run.runId} has no event at seq ${hole + 1} (it has ${seqs.slice(0, 8).join(', ')}…)`);
    if (isTerminal(run.status)) {
      if (run.lastSeq === undefined) breaks.push(`run ${run.runId} is ${run.status} with no lastSeq`);
      // Closing events still held on the record are the log's end; a reader gets them from there.
      else if (run.closingEvents === undefined && seqs.length !== run.lastSeq) breaks.push(`run ${run.runId} ended at seq ${run.lastSeq} with ${seqs.length} events stored`);
      if (run.status !== 'completed' && !run.reason) breaks.push(`run ${run.runId} is ${run.status} with no reason`);
    }
    if (run.parentRunId !== undefined && !runs.has(run.parentRunId)) breaks.push(`run ${run.runId} answers run ${run.parentRunId}, which does not exist`);
    if (run.runId === run.rootRunId) {
      // The index names the state of the task's tail: the run of its lineage that arrived last.
      const tail = record.runs.filter((other) => other.rootRunId === run.runId).reduce((last, other) => (other.arrival > last.arrival ? other : last), run);
      const entry = record.tasks.get(run.runId);
      if (!entry) breaks.push(`task ${run.runId} is not in the task index: ListTasks cannot list it`);
      else if (entry.tailArrival !== tail.arrival || entry.state !== taskStateOf(tail)) {
        breaks.push(`task ${run.runId} is indexed in state ${entry.state} from arrival ${entry.tailArrival}; its tail ${tail.runId} (arrival ${tail.arrival}, ${tail.status}) is in state ${taskStateOf(tail)}`);
      }
    }
    for (const ask of Object.values(run.asks ?? {})) {
      if (ask.state === 'open' && !isTerminal(run.status)) breaks.push(`run ${run.runId} is ${run.status} with ask ${ask.id} open`);
      if (ask.state === 'answered') {
        const answer = ask.closedByRunId === undefined ? undefined : runs.get(ask.closedByRunId);
        if (!answer) breaks.push(`ask ${ask.id} of run ${run.runId} is answered by run ${ask.closedByRunId}, which does not exist`);
        else if (answer.parentRunId !== run.runId) breaks.push(`ask ${ask.id} of run ${run.runId} is answered by run ${answer.runId}, which answers ${answer.parentRunId}`);
      }
    }
  }
  return breaks;
}

/**
 * The record of a SQLite store, read from its database: the file of a stopped gateway opened
 * anew, or an open store's own connection.
 */
export function sqliteSnapshot(source: Database.Database | SqliteRunStore): RecordSnapshot {
  const db = 'prepare' in source ? source : source['db'];
  const threads = (db.prepare('SELECT body, unsettled, arrivals, waiting_run_id FROM threads').all() as Array<Record<string, never>>).map((row) => {
    const thread: Thread = { ...JSON.parse(row.body), unsettled: row.unsettled, arrivals: row.arrivals };
    // Kept as a JSON string (SqliteRunStore: RUN_ID_COLUMNS_AS_JSON).
    if (row.waiting_run_id !== null) thread.waitingRunId = JSON.parse(row.waiting_run_id);
    return thread;
  });
  const rows = db.prepare('SELECT run_id, body, input FROM runs JOIN run_inputs USING (run_id)').all() as Array<{ run_id: string; body: string; input: string }>;
  const runs = rows.map((row) => ({ ...JSON.parse(row.body), input: JSON.parse(row.input) }) as Run);
  // A key column reads back an id with a lone surrogate as U+FFFD; the run's body has the id itself.
  const idOfKey = new Map(rows.map((row, i) => [row.run_id, runs[i].runId]));
  const seqs = new Map<string, number[]>();
  for (const row of db.prepare('SELECT run_id, seq, count FROM run_events ORDER BY run_id, seq').all() as Array<{ run_id: string; seq: number; count: number }>) {
    const runId = idOfKey.get(row.run_id) ?? row.run_id;
    const list = seqs.get(runId) ?? [];
    for (let n = 0; n < row.count; n++) list.push(row.seq + n);
    seqs.set(runId, list);
  }
  const tenantPlaces = new Map<string, number>();
  for (const row of db.prepare('SELECT tenant, places FROM tenants WHERE places IS NOT NULL').all() as Array<{ tenant: string; places: number }>) {
    tenantPlaces.set(row.tenant, row.places);
  }
  const tasks: RecordSnapshot['tasks'] = new Map();
  for (const row of db.prepare('SELECT task_id, tail_arrival, state FROM tasks').all() as Array<{ task_id: string; tail_arrival: number; state: number }>) {
    tasks.set(idOfKey.get(row.task_id) ?? row.task_id, { tailArrival: row.tail_arrival, state: row.state });
  }
  return { threads, runs, seqs, tenantPlaces, tasks };
}

/** The record of the DynamoDB store, scanned from its two tables. */
export async function dynamoSnapshot(client: DynamoDBClient, tables: TableNames): Promise<RecordSnapshot> {
  const snapshot: RecordSnapshot = { threads: [], runs: [], seqs: new Map(), tenantPlaces: new Map(), tasks: new Map() };
  for (const item of await scanAll(client, tables.runs)) {
    const pk = String(item.pk);
    if (pk.startsWith('thread#') && item.sk === 'thread') snapshot.threads.push(item as unknown as Thread);
    else if (pk.startsWith('run#') && item.sk === 'run') snapshot.runs.push(item as unknown as Run);
    else if (pk.startsWith('tenant#') && item.sk === 'tenant' && typeof item.places === 'number') snapshot.tenantPlaces.set(pk.slice('tenant#'.length), item.places);
    else if (pk.startsWith('task#') && item.sk === 'index') snapshot.tasks.set(pk.slice('task#'.length), { tailArrival: Number(item.tailArrival), state: Number(item.state) });
  }
  for (const item of await scanAll(client, tables.runEvents)) {
    const list = snapshot.seqs.get(String(item.runId)) ?? [];
    list.push(Number(item.seq));
    snapshot.seqs.set(String(item.runId), list);
  }
  for (const list of snapshot.seqs.values()) list.sort((a, b) => a - b);
  return snapshot;
}

async function scanAll(client: DynamoDBClient, table: string): Promise<Array<Record<string, unknown>>> {
  const items: Array<Record<string, unknown>> = [];
  let start: Record<string, never> | undefined;
  do {
    const page = await client.send(new ScanCommand({ TableName: table, ConsistentRead: true, ExclusiveStartKey: start }));
    for (const item of page.Items ?? []) items.push(unmarshall(item));
    start = page.LastEvaluatedKey as Record<string, never> | undefined;
  } while (start);
  return items;
}
