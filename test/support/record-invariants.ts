import { BatchGetItemCommand, QueryCommand, ScanCommand, type BatchGetItemCommandInput, type BatchGetItemCommandOutput, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type Database from 'better-sqlite3';
import type { SqliteStore } from '../../lambdas/adapters/local/sqlite/store.js';
import { RUNS_TABLE, type TableNames } from '../../lambdas/adapters/aws/dynamodb/tables.js';
import { isTerminal, threadKey, type Run, type Thread } from '../../lambdas/core/model.js';
import { taskStateOf } from '../../lambdas/core/a2a/task-state.js';
import { cancelAudit, submissionAudit } from '../../lambdas/core/audit/acts.js';
import type { AuditRecord } from '../../lambdas/core/audit/record.js';

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
  /** The audit log's records (a whole record's: a slice read by key has none, and is not checked for them). */
  audits?: AuditRecord[];
}

/** Every promise of the record that does not hold, one line each; none when all hold. */
export function recordBreaks(record: RecordSnapshot): string[] {
  const breaks: string[] = [];
  const runs = new Map(record.runs.map((run) => [run.runId, run]));
  const byThread = new Map<string, Run[]>();
  for (const run of record.runs) byThread.set(threadKey(run), [...(byThread.get(threadKey(run)) ?? []), run]);
  const threads = new Map(record.threads.map((thread) => [threadKey(thread), thread]));
  const lineages = new Map<string, Run[]>();
  for (const run of record.runs) lineages.set(run.rootRunId, [...(lineages.get(run.rootRunId) ?? []), run]);

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
      const tail = (lineages.get(run.runId) ?? []).reduce((last, other) => (other.arrival > last.arrival ? other : last), run);
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
  if (record.audits) breaks.push(...auditBreaks(record.runs, record.audits));
  return breaks;
}

/**
 * Every run has the audit record of its submission, once (none missing, none doubled: a repeat of
 * its request writes none), and a run a cancel changed has that cancel's.
 */
function auditBreaks(runs: readonly Run[], audits: readonly AuditRecord[]): string[] {
  const breaks: string[] = [];
  const ids = new Set(audits.map((record) => record.id));
  const submissions = new Map<string, number>();
  for (const record of audits) {
    if (record.outcome === 'ok' && ['run.submitted', 'ask.answered', 'run.interjected'].includes(record.action)) submissions.set(record.target, (submissions.get(record.target) ?? 0) + 1);
  }
  for (const run of runs) {
    const count = submissions.get(`run:${run.runId}`) ?? 0;
    if (!ids.has(submissionAudit(run).id)) breaks.push(`run ${run.runId} has no audit record of its submission`);
    if (count > 1) breaks.push(`run ${run.runId} has ${count} audit records of its submission`);
    if (run.cancelRequest && !ids.has(cancelAudit(run)!.id)) breaks.push(`run ${run.runId} was cancelled with no audit record of the cancel`);
  }
  return breaks;
}

/**
 * The part of the record that a few requests can have changed: the threads named by `ids` (as
 * thread ids of `tenant`), the threads of the runs named by `ids` and of the runs holding the
 * tenant's places, with every run of those threads, their seqs and task index entries, and the
 * tenant's places. `recordBreaks` of it checks those threads and runs whole and the tenant's count
 * against the runs holding its places, in a few keyed reads however large the record has grown.
 */
export interface RecordSlice {
  tenant: string;
  ids: Iterable<string>;
}

type ThreadRow = { body: string; unsettled: number; arrivals: number; waiting_run_id: string | null };

function threadOfRow(row: ThreadRow): Thread {
  const thread: Thread = { ...JSON.parse(row.body), unsettled: row.unsettled, arrivals: row.arrivals };
  // Kept as a JSON string (SqliteStore: RUN_ID_COLUMNS_AS_JSON).
  if (row.waiting_run_id !== null) thread.waitingRunId = JSON.parse(row.waiting_run_id);
  return thread;
}

/** What the invariants read of a run: its body (its input, up to 350 KB, plays no part). */
const bodyOnly = (body: string) => JSON.parse(body) as Run;

const sliceStatements = new WeakMap<Database.Database, ReturnType<typeof prepareSlice>>();

function prepareSlice(db: Database.Database) {
  return {
    thread: db.prepare('SELECT body, unsettled, arrivals, waiting_run_id FROM threads WHERE thread_key = ?'),
    runThread: db.prepare('SELECT thread_key FROM runs WHERE run_id = ?'),
    threadRuns: db.prepare('SELECT run_id, body FROM runs WHERE thread_key = ?'),
    seqs: db.prepare('SELECT seq, count FROM run_events WHERE run_id = ? ORDER BY seq'),
    places: db.prepare('SELECT places FROM tenants WHERE tenant = ? AND places IS NOT NULL'),
    holders: db.prepare('SELECT run_id FROM places WHERE owner = ?'),
    task: db.prepare('SELECT tail_arrival, state FROM tasks WHERE task_id = ?'),
  };
}

/** A slice (see `RecordSlice`) of a SQLite store, read by key from its database. */
export function sqliteSlice(source: Database.Database | SqliteStore, slice: RecordSlice): RecordSnapshot {
  const db = 'prepare' in source ? source : source['db'];
  let read = sliceStatements.get(db);
  if (!read) sliceStatements.set(db, (read = prepareSlice(db)));
  const threadKeys = new Set<string>();
  const runIds = [...new Set(slice.ids)];
  for (const id of runIds) threadKeys.add(threadKey({ tenant: slice.tenant, threadId: id }));
  for (const row of read.holders.all(`n:${slice.tenant}`) as Array<{ run_id: string }>) runIds.push(row.run_id);
  for (const id of runIds) {
    const row = read.runThread.get(id) as { thread_key: string } | undefined;
    if (row) threadKeys.add(row.thread_key);
  }
  const snapshot: RecordSnapshot = { threads: [], runs: [], seqs: new Map(), tenantPlaces: new Map(), tasks: new Map() };
  const tenants = new Set([slice.tenant]);
  for (const key of threadKeys) {
    const thread = read.thread.get(key) as ThreadRow | undefined;
    if (thread) snapshot.threads.push(threadOfRow(thread));
    for (const row of read.threadRuns.all(key) as Array<{ run_id: string; body: string }>) {
      const run = bodyOnly(row.body);
      snapshot.runs.push(run);
      tenants.add(run.tenant);
      const seqs: number[] = [];
      for (const events of read.seqs.all(row.run_id) as Array<{ seq: number; count: number }>) for (let n = 0; n < events.count; n++) seqs.push(events.seq + n);
      snapshot.seqs.set(run.runId, seqs);
      const task = read.task.get(row.run_id) as { tail_arrival: number; state: number } | undefined;
      if (task) snapshot.tasks.set(run.runId, { tailArrival: task.tail_arrival, state: task.state });
    }
  }
  for (const tenant of tenants) {
    const row = read.places.get(tenant) as { places: number } | undefined;
    if (row) snapshot.tenantPlaces.set(tenant, row.places);
  }
  return snapshot;
}

/**
 * A slice (see `RecordSlice`) of the DynamoDB store, read by key from its two tables: the items
 * the ids may name in one BatchGetItem (most name nothing), then each thread's runs and their events.
 */
export async function dynamoSlice(client: DynamoDBClient, tables: TableNames, slice: RecordSlice): Promise<RecordSnapshot> {
  const ids = [...new Set(slice.ids)];
  const tenantKey = `tenant#${slice.tenant}`;
  const named = await batchGet(client, tables.runs, [[tenantKey, 'tenant'], ...ids.flatMap((id): Array<[string, string]> => [[`thread#${threadKey({ tenant: slice.tenant, threadId: id })}`, 'thread'], [`run#${id}`, 'run']])]);
  const holders = [...((named.get(tenantKey)?.holders as Set<string> | undefined) ?? [])].filter((id) => !named.has(`run#${id}`));
  const items = new Map([...named, ...(await batchGet(client, tables.runs, holders.map((id): [string, string] => [`run#${id}`, 'run'])))]);
  const threadKeys = new Set<string>();
  for (const [pk, item] of items) {
    if (pk.startsWith('thread#')) threadKeys.add(pk.slice('thread#'.length));
    if (pk.startsWith('run#')) threadKeys.add(threadKey(item as unknown as Run));
  }
  const missing = [...threadKeys].filter((key) => !items.has(`thread#${key}`)).map((key): [string, string] => [`thread#${key}`, 'thread']);
  for (const [pk, item] of await batchGet(client, tables.runs, missing)) items.set(pk, item);

  const snapshot: RecordSnapshot = { threads: [], runs: [], seqs: new Map(), tenantPlaces: new Map(), tasks: new Map() };
  for (const key of threadKeys) {
    const thread = items.get(`thread#${key}`);
    if (thread) snapshot.threads.push(thread as unknown as Thread);
  }
  await Promise.all(
    [...threadKeys].map(async (key) => {
      const runs = await queryAll(client, {
        TableName: tables.runs,
        IndexName: RUNS_TABLE.byThread.indexName,
        KeyConditionExpression: '#thread = :thread',
        ExpressionAttributeNames: { '#thread': RUNS_TABLE.byThread.partitionKey },
        ExpressionAttributeValues: { ':thread': { S: key } },
      });
      for (const run of runs.filter((item) => item.sk === 'run') as unknown as Run[]) snapshot.runs.push(run);
    }),
  );
  await Promise.all(
    snapshot.runs.map(async (run) => {
      const events = await queryAll(client, {
        TableName: tables.runEvents,
        KeyConditionExpression: 'runId = :run',
        ProjectionExpression: '#seq',
        ExpressionAttributeNames: { '#seq': 'seq' },
        ExpressionAttributeValues: { ':run': { S: run.runId } },
        ConsistentRead: true,
      });
      snapshot.seqs.set(run.runId, events.map((event) => Number(event.seq)).sort((a, b) => a - b));
    }),
  );
  const roots = snapshot.runs.filter((run) => run.runId === run.rootRunId);
  const tenants = [...new Set([slice.tenant, ...snapshot.runs.map((run) => run.tenant)])];
  const more = await batchGet(client, tables.runs, [
    ...roots.map((run): [string, string] => [`task#${run.runId}`, 'index']),
    ...tenants.filter((tenant) => tenant !== slice.tenant).map((tenant): [string, string] => [`tenant#${tenant}`, 'tenant']),
  ]);
  for (const run of roots) {
    const entry = more.get(`task#${run.runId}`);
    if (entry) snapshot.tasks.set(run.runId, { tailArrival: Number(entry.tailArrival), state: Number(entry.state) });
  }
  for (const tenant of tenants) {
    const places = (tenant === slice.tenant ? items : more).get(`tenant#${tenant}`)?.places;
    if (typeof places === 'number') snapshot.tenantPlaces.set(tenant, places);
  }
  return snapshot;
}

/** The items of these keys (pk, sk) that exist, by pk: BatchGetItem takes 100 distinct keys a call, and may leave some for another. */
async function batchGet(client: DynamoDBClient, table: string, keys: Array<[string, string]>): Promise<Map<string, Record<string, unknown>>> {
  const found = new Map<string, Record<string, unknown>>();
  const distinct = [...new Map(keys.map(([pk, sk]) => [`${pk}\u0000${sk}`, { pk: { S: pk }, sk: { S: sk } }])).values()];
  for (let at = 0; at < distinct.length; at += 100) {
    let request: BatchGetItemCommandInput['RequestItems'] = { [table]: { Keys: distinct.slice(at, at + 100), ConsistentRead: true } };
    while (request && Object.keys(request).length > 0) {
      const page: BatchGetItemCommandOutput = await client.send(new BatchGetItemCommand({ RequestItems: request }));
      for (const item of page.Responses?.[table] ?? []) {
        const value = unmarshall(item);
        found.set(String(value.pk), value);
      }
      request = page.UnprocessedKeys;
    }
  }
  return found;
}

/**
 * The record of a SQLite store, read from its database: the file of a stopped gateway opened
 * anew, or an open store's own connection. The runs' inputs are left unread: the invariants do
 * not look at them, and a fuzzed record holds many of hundreds of KB.
 */
export function sqliteSnapshot(source: Database.Database | SqliteStore): RecordSnapshot {
  const db = 'prepare' in source ? source : source['db'];
  const threads = (db.prepare('SELECT body, unsettled, arrivals, waiting_run_id FROM threads').all() as ThreadRow[]).map(threadOfRow);
  const rows = db.prepare('SELECT run_id, body FROM runs').all() as Array<{ run_id: string; body: string }>;
  const runs = rows.map((row) => bodyOnly(row.body));
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
  const audits = (db.prepare('SELECT body FROM audit_records').all() as Array<{ body: string }>).map((row) => JSON.parse(row.body) as AuditRecord);
  return { threads, runs, seqs, tenantPlaces, tasks, audits };
}

/** The record of the DynamoDB store, scanned from its two tables. */
export async function dynamoSnapshot(client: DynamoDBClient, tables: TableNames): Promise<RecordSnapshot> {
  const snapshot: RecordSnapshot = { threads: [], runs: [], seqs: new Map(), tenantPlaces: new Map(), tasks: new Map(), audits: [] };
  for (const item of await scanAll(client, tables.runs)) {
    const pk = String(item.pk);
    if (pk.startsWith('audit#') && item.sk === 'audit') snapshot.audits!.push(JSON.parse(String(item.body)) as AuditRecord);
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

async function queryAll(client: DynamoDBClient, input: ConstructorParameters<typeof QueryCommand>[0]): Promise<Array<Record<string, unknown>>> {
  const items: Array<Record<string, unknown>> = [];
  let start: Record<string, never> | undefined;
  do {
    const page = await client.send(new QueryCommand({ ...input, ExclusiveStartKey: start }));
    for (const item of page.Items ?? []) items.push(unmarshall(item));
    start = page.LastEvaluatedKey as Record<string, never> | undefined;
  } while (start);
  return items;
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
