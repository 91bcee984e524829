import { fileURLToPath } from 'node:url';
import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

/**
 * Worker processes: one more than the machine's cores (two at least). The AWS box's fault matrix
 * holds one for the whole run (it mostly waits for its functions), the rest share the others.
 */
const workers = Math.max(2, availableParallelism()) + 1;

/** Options of the whole run: vitest does not read them from a project. */
export const runWide = {
  // Many tests make things fail on purpose, and the gateway logs each failure as it would in
  // production: the runner keeps what a test printed and shows it only when the test fails.
  silent: 'passed-only' as const,
};

export const shared = {
  testTimeout: 30_000,
  hookTimeout: 60_000,
  pool: 'forks' as const,
  setupFiles: [fileURLToPath(new URL('./test/support/quiet/stock-client-log.ts', import.meta.url))],
};

export const quiet = {
  // The AWS SDK's notice that its versions of 2027 will want Node.js 22, once per test file:
  // about the machine, not the code (the README says so once).
  AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
  // Powertools writes through the global console (not a Console of its own on stdout), so its
  // logs and metrics are held back with the rest and shown for a failing test.
  POWERTOOLS_DEV: 'true',
};

/**
 * The AWS box's fault matrix: it kills functions at each of their calls across every flow, one case
 * after another (each moves its box's clock), so it is one long file that waits more than it
 * computes. Its project's name sorts first, so it starts first and runs beside the rest (every wait
 * of it bounded and observed: none times out under a shared core).
 */
const BOXED = ['test/aws/fault-matrix.test.ts'];

/**
 * Three projects: `sqlite` is the suite on the SQLite store (what `npm start` keeps its record in);
 * `dynamodb` runs the store conformance and every core and door test again on the DynamoDB adapter
 * over dynalite (test/support/stores.ts reads FUNDUQ_TEST_STORE). All three share one pool of
 * workers (vitest's default would leave a core idle).
 */
/**
 * The suite's projects but the AWS box's run their files one after another in each worker, sharing
 * its loaded modules (`isolate: false`): importing the gateway and the AWS SDK afresh for each of
 * some 250 files cost more CPU than a third of the suite's tests. No test relies on a fresh module.
 */
export default defineConfig({
  test: {
    ...runWide,
    projects: [
      { test: { ...shared, name: 'sqlite', isolate: false, include: ['test/**/*.test.ts'], exclude: BOXED, maxWorkers: workers, env: { ...quiet, FUNDUQ_TEST_STORE: 'sqlite' } } },
      {
        test: {
          ...shared,
          name: 'dynamodb',
          isolate: false,
          include: ['test/core/**/*.test.ts', 'test/doors/**/*.test.ts', 'test/adapters/run-store.test.ts', 'test/adapters/record-model.test.ts', 'test/adapters/usage-store.test.ts', 'test/adapters/provider-store.test.ts'],
          maxWorkers: workers,
          env: { ...quiet, FUNDUQ_TEST_STORE: 'dynamodb' },
        },
      },
      { test: { ...shared, name: 'aws-box', include: BOXED, maxWorkers: workers, env: { ...quiet, FUNDUQ_TEST_STORE: 'sqlite' } } },
    ],
  },
});
