/**
 * Run by test/quiet.test.ts under the project's own test settings (never by `npm test`: the name
 * is not a test file's): what the gateway's tests print, in one passing and one failing test.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { expect, it } from 'vitest';
import { logger } from '../../../lambdas/runtimes/powertools.js';

it('passes, having logged the way a test of a failure does', () => {
  new DynamoDBClient({ region: 'us-east-1' }).destroy();
  console.error('funduq: dispatch of run passing-run failed (an expected failure)');
  logger.error('a door failed to answer (an expected failure)', { runId: 'passing-run' });
  expect(true).toBe(true);
});

it('fails, having logged why', () => {
  console.error('funduq: dispatch of run failing-run failed');
  logger.error('a door failed to answer', { runId: 'failing-run' });
  expect('what the test got').toBe('what it wanted');
});
