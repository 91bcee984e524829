import { SFNClient, StartExecutionCommand, StopExecutionCommand } from '@aws-sdk/client-sfn';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import {
  executionName,
  StepFunctionsAskTimer,
  waitTimestamp,
} from '../../../lambdas/adapters/aws/step-functions-ask-timer.js';

const STATE_MACHINE = 'arn:aws:states:eu-west-1:123456789012:stateMachine:AskWaiter';
const sfn = mockClient(SFNClient);

afterEach(() => sfn.reset());

function timer() {
  return new StepFunctionsAskTimer({ client: new SFNClient({ region: 'eu-west-1' }), stateMachineArn: STATE_MACHINE });
}

function awsError(name: string): Error {
  return Object.assign(new Error(name), { name });
}

describe('the Step Functions ask timer', () => {
  it('arms by starting an execution named after the run, waiting until its earliest expiresAt', async () => {
    sfn.on(StartExecutionCommand).resolves({ executionArn: 'arn', startDate: new Date() });
    await timer().arm('run-1', '2026-03-01T12:00:00.000Z');
    expect(sfn.commandCalls(StartExecutionCommand).map((call) => call.args[0].input)).toEqual([
      {
        stateMachineArn: STATE_MACHINE,
        name: 'run-1',
        input: JSON.stringify({ runId: 'run-1', expiresAt: '2026-03-01T12:00:00Z' }),
      },
    ]);
  });

  it("carries the run's context in the execution's input, for the expirer and every round after", async () => {
    sfn.on(StartExecutionCommand).resolves({ executionArn: 'arn', startDate: new Date() });
    const context = { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' };
    await timer().arm('run-1', '2026-03-01T12:00:00.000Z', 0, context);
    expect(JSON.parse(sfn.commandCalls(StartExecutionCommand)[0].args[0].input.input!)).toEqual({ runId: 'run-1', expiresAt: '2026-03-01T12:00:00Z', context });
  });

  it('rounds an expiry up to the whole second, since the Wait state ignores milliseconds: late by < 1 s, never early', () => {
    expect(waitTimestamp('2026-03-01T12:00:00.001Z')).toBe('2026-03-01T12:00:01Z');
    expect(waitTimestamp('2026-03-01T14:00:00+02:00')).toBe('2026-03-01T12:00:00Z');
    expect(() => waitTimestamp('tomorrow')).toThrow(/expiresAt/);
  });

  it('takes an execution that already exists as armed (a retried settle)', async () => {
    sfn.on(StartExecutionCommand).rejects(awsError('ExecutionAlreadyExists'));
    await expect(timer().arm('run-1', '2026-03-01T12:00:00Z')).resolves.toBeUndefined();
  });

  it('passes any other refusal on', async () => {
    sfn.on(StartExecutionCommand).rejects(awsError('StateMachineDoesNotExist'));
    await expect(timer().arm('run-1', '2026-03-01T12:00:00Z')).rejects.toThrow('StateMachineDoesNotExist');
  });

  it('disarms by stopping the run’s execution, found by its name alone', async () => {
    sfn.on(StopExecutionCommand).resolves({ stopDate: new Date() });
    await timer().disarm('run-1');
    expect(sfn.commandCalls(StopExecutionCommand).map((call) => call.args[0].input)).toEqual([
      {
        executionArn: 'arn:aws:states:eu-west-1:123456789012:execution:AskWaiter:run-1',
        cause: 'the asks were answered or cancelled',
      },
    ]);
  });

  it('takes a run that was never armed (asks without expiresAt) as disarmed', async () => {
    sfn.on(StopExecutionCommand).rejects(awsError('ExecutionDoesNotExist'));
    await expect(timer().disarm('run-1')).resolves.toBeUndefined();
  });

  it('arms asks opened again under a name of their round, unused before, and disarms that round’s execution', async () => {
    sfn.on(StartExecutionCommand).resolves({ executionArn: 'arn', startDate: new Date() });
    sfn.on(StopExecutionCommand).resolves({ stopDate: new Date() });
    await timer().arm('run-1', '2026-03-01T12:00:00Z');
    await timer().arm('run-1', '2026-03-01T12:00:00Z', 1);
    await timer().arm('run-1', '2026-03-01T12:00:00Z', 2);
    await timer().disarm('run-1', 2);
    const names = sfn.commandCalls(StartExecutionCommand).map((call) => call.args[0].input.name as string);
    expect(names[0]).toBe('run-1');
    expect(new Set(names).size).toBe(3);
    for (const name of names.slice(1)) expect(name).toMatch(/^sha256r\d-[0-9a-f]{64}$/);
    // A run id that spells another run's later round is still named apart from it.
    expect(executionName(names[1])).not.toBe(executionName('run-1', 1));
    expect(names.every((name) => name.length <= 80)).toBe(true);
    expect(sfn.commandCalls(StopExecutionCommand)[0].args[0].input.executionArn).toBe(`arn:aws:states:eu-west-1:123456789012:execution:AskWaiter:${names[2]}`);
  });

  it('names the execution of a run id Step Functions would refuse by a stable stand-in', async () => {
    sfn.on(StartExecutionCommand).resolves({ executionArn: 'arn', startDate: new Date() });
    sfn.on(StopExecutionCommand).resolves({ stopDate: new Date() });
    const runId = 'tenant:a/run 1';
    await timer().arm(runId, '2026-03-01T12:00:00Z');
    await timer().disarm(runId);
    const name = sfn.commandCalls(StartExecutionCommand)[0].args[0].input.name as string;
    expect(name).toMatch(/^sha256-[0-9a-f]{64}$/);
    expect(sfn.commandCalls(StopExecutionCommand)[0].args[0].input.executionArn).toBe(
      `arn:aws:states:eu-west-1:123456789012:execution:AskWaiter:${name}`,
    );
    expect(JSON.parse(sfn.commandCalls(StartExecutionCommand)[0].args[0].input.input as string).runId).toBe(runId);
    expect(executionName('x'.repeat(81))).toMatch(/^sha256-/);
  });
});
