import { defineConfig } from 'vitest/config';
import { quiet, runWide, shared } from '../../../vitest.config.js';

/** The project's test settings, shaped as the suite's (run-wide options, then a project), over the one fixture file beside this one. */
export default defineConfig({ test: { ...runWide, projects: [{ test: { ...shared, name: 'quiet', env: quiet, include: ['test/support/quiet/noisy.fixture.ts'] } }] } });
