import { UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { DynamoStore, createDynamoStore } from '../../lambdas/adapters/aws/dynamodb/store/store.js';
import { SqliteStore, createSqliteStore } from '../../lambdas/adapters/local/sqlite/store.js';
import type { RunStore } from '../../lambdas/core/ports.js';
import { eventually, harness } from './core-harness.js';
import { useDynalite } from './dynalite.js';
import { dynamoSlice, dynamoSnapshot, recordBreaks, sqliteSlice, sqliteSnapshot, type RecordSnapshot } from './record-invariants.js';
import { recordProjections } from '../../lambdas/core/a2a/task-state.js';

const dynalite = useDynalite();

/** Two runs of one thread, run to their ends. */
async function exercise(store: RunStore) {
  const h = await harness(store);
  const first = await h.send('one');
  const second = await h.send('two');
  expect(first.ok && second.ok).toBe(true);
  await h.settled();
  await eventually(async () => expect((await h.store.runs.get('run-2'))?.status).toBe('completed'));
}

function broken(snapshot: RecordSnapshot, change: (s: RecordSnapshot) => void): string[] {
  const copy: RecordSnapshot = structuredClone(snapshot);
  change(copy);
  return recordBreaks(copy);
}

describe('the record’s invariants', () => {
  it('hold for a record the gateway wrote, on SQLite and on DynamoDB, and name each break', async () => {
    const sqlite = createSqliteStore(':memory:', { projections: recordProjections });
    await exercise(sqlite);
    const tables = await dynalite.freshTables();
    await exercise(createDynamoStore({ client: dynalite.client, tables, projections: recordProjections }));
    const snapshots = [sqliteSnapshot(sqlite), await dynamoSnapshot(dynalite.client, tables)];
    for (const snapshot of snapshots) {
      expect(snapshot.runs.map((run) => run.status).sort()).toEqual(['completed', 'completed']);
      expect(recordBreaks(snapshot)).toEqual([]);
      expect(broken(snapshot, (s) => (s.threads[0].unsettled += 1))).toEqual([expect.stringMatching(/holds 1 places for 0 unsettled runs/)]);
      expect(broken(snapshot, (s) => s.seqs.set('run-1', s.seqs.get('run-1')!.filter((seq) => seq !== 2)))).toContainEqual(expect.stringMatching(/run run-1 has no event at seq 2/));
      expect(broken(snapshot, (s) => (s.runs = []))).toContainEqual(expect.stringMatching(/has no run \(a ghost thread\)/));
      // (An answered ask changes the task's state too: its index entry is behind it then.)
      expect(
        broken(snapshot, (s) => (s.runs[0].asks = { a: { id: 'a', kind: 'interrupt', state: 'answered', closedByRunId: 'nobody' } })),
      ).toContainEqual(expect.stringMatching(/answered by run nobody, which does not exist/));
      expect(broken(snapshot, (s) => s.tasks.delete('run-1'))).toEqual([expect.stringMatching(/task run-1 is not in the task index/)]);
      expect(broken(snapshot, (s) => (s.tasks.get('run-2')!.state = 0))).toEqual([expect.stringMatching(/task run-2 is indexed in state 0 from arrival \d+; its tail run-2/)]);
      expect(broken(snapshot, (s) => s.tenantPlaces.set(s.runs[0].tenant, 1))).toEqual([expect.stringMatching(/holds 1 places for 0 unsettled runs that took one/)]);
      // Each run's submission is in the audit log, once.
      expect(snapshot.audits?.map((record) => [record.action, record.target]).sort()).toEqual([['run.submitted', 'run:run-1'], ['run.submitted', 'run:run-2']]);
      expect(broken(snapshot, (s) => (s.audits = s.audits!.filter((record) => record.target !== 'run:run-2')))).toEqual(['run run-2 has no audit record of its submission']);
      expect(broken(snapshot, (s) => s.audits!.push({ ...s.audits![0], id: `${s.audits![0].id}-again` }))).toEqual([expect.stringMatching(/has 2 audit records of its submission/)]);
      expect(broken(snapshot, (s) => (s.runs[0].cancelRequest = { principal: 'anonymous', at: s.runs[0].createdAt }))).toEqual([expect.stringMatching(/was cancelled with no audit record of the cancel/)]);
    }
    await sqlite.close();
  });

  it('of a slice are those of the threads and runs it names, read by key, on SQLite and on DynamoDB', async () => {
    const sqlite = createSqliteStore(':memory:', { projections: recordProjections });
    await exercise(sqlite);
    const tables = await dynalite.freshTables();
    await exercise(createDynamoStore({ client: dynalite.client, tables, projections: recordProjections }));
    const stores = [
      {
        slice: async (ids: string[]) => sqliteSlice(sqlite, { tenant: 'anonymous', ids }),
        breakThread: async () => void sqlite['db'].prepare('UPDATE threads SET unsettled = 1').run(),
      },
      {
        slice: (ids: string[]) => dynamoSlice(dynalite.client, tables, { tenant: 'anonymous', ids }),
        breakThread: async () =>
          void (await dynalite.client.send(
            new UpdateItemCommand({ TableName: tables.runs, Key: { pk: { S: 'thread#anonymous/thread-1' }, sk: { S: 'thread' } }, UpdateExpression: 'SET unsettled = :one', ExpressionAttributeValues: { ':one': { N: '1' } } }),
          )),
      },
    ];
    for (const { slice, breakThread } of stores) {
      // A thread named by its id or by one of its runs' is read whole; an id that names nothing reads nothing.
      for (const ids of [['thread-1'], ['run-2']]) {
        const named = await slice(ids);
        expect(named.threads.map((thread) => thread.threadId)).toEqual(['thread-1']);
        expect(named.runs.map((run) => run.runId).sort()).toEqual(['run-1', 'run-2']);
        expect(named.seqs.get('run-1')?.length).toBeGreaterThan(0);
        expect(recordBreaks(named)).toEqual([]);
      }
      expect(await slice(['nobody'])).toMatchObject({ threads: [], runs: [] });
      await breakThread();
      expect(recordBreaks(await slice(['run-1']))).toEqual([expect.stringMatching(/thread anonymous\/thread-1 holds 1 places for 0 unsettled runs/)]);
      expect(recordBreaks(await slice(['nobody']))).toEqual([]);
    }
    await sqlite.close();
  });
});
