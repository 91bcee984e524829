import { fileURLToPath } from 'node:url';
import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

const cores = Math.max(2, availableParallelism());

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
 * The AWS box's fault matrix: it kills functions at each of their calls across every flow, a crowd
 * of Lambda processes on Node 22 at once, and its waits are the ones a shared core stretches past
 * their limits (seen with another file beside it), so it runs after the rest, alone.
 */
const BOXED = ['test/aws/fault-matrix.test.ts'];

/**
 * Three projects: `sqlite` is the suite on the SQLite store (what `npm start` keeps its record in);
 * `dynamodb` runs the store conformance and every core and door test again on the DynamoDB adapter
 * over dynalite (test/support/stores.ts reads FUNDUQ_TEST_STORE). Those two share the machine's
 * cores (vitest's default leaves one idle); `aws-box` runs next, alone.
 */
export default defineConfig({
  test: {
    ...runWide,
    projects: [
      { test: { ...shared, name: 'sqlite', include: ['test/**/*.test.ts'], exclude: BOXED, maxWorkers: cores, env: { ...quiet, FUNDUQ_TEST_STORE: 'sqlite' } } },
      {
        test: {
          ...shared,
          name: 'dynamodb',
          include: ['test/core/**/*.test.ts', 'test/doors/**/*.test.ts', 'test/adapters/run-store.test.ts', 'test/adapters/usage-store.test.ts', 'test/adapters/provider-store.test.ts'],
          maxWorkers: cores,
          env: { ...quiet, FUNDUQ_TEST_STORE: 'dynamodb' },
        },
      },
      { test: { ...shared, name: 'aws-box', include: BOXED, maxWorkers: 1, sequence: { groupOrder: 1 }, env: { ...quiet, FUNDUQ_TEST_STORE: 'sqlite' } } },
    ],
  },
});
