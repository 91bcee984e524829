import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..');

/** Variables this worker has from the test settings or the runner itself: the child must get them from the settings alone. */
const INHERITED = /^(VITEST|AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED$|POWERTOOLS_DEV$|NODE_OPTIONS$|TEST$)/;

describe('npm test', () => {
  it('prints nothing of a passing test but the runner, and all of a failing one: its logs and what failed', () => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !INHERITED.test(name)));
    const run = spawnSync(process.execPath, [join(ROOT, 'node_modules/vitest/vitest.mjs'), 'run', '--config', 'test/support/quiet/vitest.config.ts'], {
      cwd: ROOT,
      env: { ...env, NO_COLOR: '1', FORCE_COLOR: '0' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    const output = `${run.stdout}${run.stderr}`;
    expect(run.status).toBe(1);
    expect(output).toContain('1 failed | 1 passed');
    expect(output).not.toContain('NodeVersionSupportWarning');
    expect(output).not.toContain('an expected failure');
    expect(output).not.toContain('passing-run');
    expect(output).toContain('funduq: dispatch of run failing-run failed');
    expect(output).toMatch(/"message": ?"a door failed to answer"/);
    expect(output).toContain("expected 'what the test got' to be 'what it wanted'");
  });
});
