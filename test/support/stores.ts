import { afterAll } from 'vitest';
import { SqliteRunStore } from '../../lambdas/adapters/local/sqlite-run-store.js';
import { StoreUnavailable } from '../../lambdas/core/errors.js';
import type { RunStore } from '../../lambdas/core/ports.js';
import type { LocalStoreKind } from '../../lambdas/runtimes/local.js';
import { useDynalite } from './dynalite.js';

/**
 * The store the core, door and conformance tests run on: SQLite (what `npm start` keeps its record
 * in), or the DynamoDB adapter on dynalite with FUNDUQ_TEST_STORE=dynamodb. vitest.config.ts runs
 * those tests once for each (two projects), so both adapters pass the same tests.
 */
export const TEST_STORE: LocalStoreKind = process.env.FUNDUQ_TEST_STORE === 'dynamodb' ? 'dynamodb' : 'sqlite';

/** Fresh, empty stores of the kind under test, none shared between tests; call at the top of a test file. */
export function useStore() {
  const dynamo = TEST_STORE === 'dynamodb' ? useDynalite() : undefined;
  const opened: SqliteRunStore[] = [];
  afterAll(async () => {
    for (const store of opened) await store.close();
  });
  return {
    kind: TEST_STORE,
    async freshStore(): Promise<RunStore> {
      if (dynamo) return dynamo.freshStore();
      const store = new SqliteRunStore(':memory:');
      opened.push(store);
      return store;
    },
  };
}

/**
 * A store whose event writes are refused while `refuses(call)` says so, as the adapters refuse
 * them when their database cannot take writes (DynamoDB throttling past its retries, a full disk
 * under SQLite): with `StoreUnavailable`. Everything else reaches the store as it is.
 */
export function refusingEventWrites(store: RunStore, refuses: (call: number) => boolean): RunStore {
  let calls = 0;
  const refusing =
    <A extends unknown[], R>(write: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      calls += 1;
      if (refuses(calls)) throw new StoreUnavailable(`the store did not take write ${calls} of events`);
      return write(...args);
    };
  return Object.assign(Object.create(store) as RunStore, {
    appendEvents: refusing(store.appendEvents.bind(store)),
    appendNew: refusing(store.appendNew.bind(store)),
  });
}
