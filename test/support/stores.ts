import { afterAll } from 'vitest';
import { SqliteStore, createSqliteStore } from '../../lambdas/adapters/local/sqlite/store.js';
import { StoreUnavailable } from '../../lambdas/core/errors.js';
import type { RunStore } from '../../lambdas/core/ports.js';
import { mapParts } from '../../lambdas/core/record/port.js';
import type { LocalStoreKind } from '../../lambdas/runtimes/local.js';
import { useDynalite } from './dynalite.js';
import { recordProjections } from '../../lambdas/core/a2a/task-state.js';

/**
 * The store the core, door and conformance tests run on: SQLite (what `npm start` keeps its record
 * in), or the DynamoDB adapter on dynalite with FUNDUQ_TEST_STORE=dynamodb. vitest.config.ts runs
 * those tests once for each (two projects), so both adapters pass the same tests.
 */
export const TEST_STORE: LocalStoreKind = process.env.FUNDUQ_TEST_STORE === 'dynamodb' ? 'dynamodb' : 'sqlite';

/** Fresh, empty stores of the kind under test, none shared between tests; call at the top of a test file. */
export function useStore() {
  const dynamo = TEST_STORE === 'dynamodb' ? useDynalite() : undefined;
  const opened: SqliteStore[] = [];
  afterAll(async () => {
    for (const store of opened) await store.close();
  });
  return {
    kind: TEST_STORE,
    async freshStore(): Promise<RunStore> {
      if (dynamo) return dynamo.freshStore();
      const store = createSqliteStore(':memory:', { projections: recordProjections });
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
  const events = Object.assign(Object.create(store.events) as RunStore['events'], {
    append: refusing(store.events.append.bind(store.events)),
    appendNew: refusing(store.events.appendNew.bind(store.events)),
  });
  return Object.assign(Object.create(store) as RunStore, { events });
}

/**
 * The store with every call of its parts made through `around`, which is told the call (`runs.get`)
 * and its arguments and makes it with `invoke`: for tests that count, note or record what a
 * request asked of the store. Anything else of the store reaches it as it is.
 */
export function aroundCalls(store: RunStore, around: (call: string, args: unknown[], invoke: () => Promise<unknown>) => Promise<unknown>): RunStore {
  return mapParts(store, (name, part) =>
    new Proxy(part, {
      get(target, key) {
        const value: unknown = Reflect.get(target, key, target);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => around(`${name}.${String(key)}`, args, () => (value as (...a: unknown[]) => Promise<unknown>).apply(target, args));
      },
    }),
  );
}
