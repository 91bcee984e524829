import { createHash } from 'node:crypto';
import { StartExecutionCommand, StopExecutionCommand, type SFNClient } from '@aws-sdk/client-sfn';
import type { RunContext } from '../../core/model.js';
import type { AskTimer } from '../../core/ports.js';

/** What the ask waiter's execution starts with, and what its expirer answers for the next round. */
export interface AskWaiterInput {
  runId: string;
  /** Absent: nothing left to wait for, the execution ends. */
  expiresAt?: string;
  /** The run's context, carried through the wait to the expirer and on to its next round. */
  context?: RunContext;
}

/**
 * The ask timer on Step Functions: one execution of the ask-waiter state machine per waiting
 * run, named after the run (and, once its asks were opened again, the round: a name is used once). `arm` starts it; `disarm` stops it by that name. Stopping needs no
 * task token, so nothing has to record one, read it back, or race its recording: the answer's
 * run is enqueued by the core, and the execution has nothing to hand on.
 */
export class StepFunctionsAskTimer implements AskTimer {
  constructor(private readonly options: { client: SFNClient; stateMachineArn: string }) {}

  async arm(runId: string, expiresAt: string, round = 0, context?: RunContext): Promise<void> {
    const input: AskWaiterInput = { runId, expiresAt: waitTimestamp(expiresAt), ...(context ? { context } : {}) };
    try {
      await this.options.client.send(
        new StartExecutionCommand({
          stateMachineArn: this.options.stateMachineArn,
          name: executionName(runId, round),
          input: JSON.stringify(input),
        }),
      );
    } catch (error) {
      // The run's execution was started already (a retried settle). A running one with the same
      // input is returned as is by Step Functions; a closed one or another input is refused with
      // this error, and either way the run has had its timer.
      if ((error as { name?: string }).name !== 'ExecutionAlreadyExists') throw error;
    }
  }

  async disarm(runId: string, round = 0): Promise<void> {
    try {
      await this.options.client.send(
        new StopExecutionCommand({
          executionArn: executionArn(this.options.stateMachineArn, runId, round),
          cause: 'the asks were answered or cancelled',
        }),
      );
    } catch (error) {
      // Never armed: the asks had no expiresAt.
      if ((error as { name?: string }).name !== 'ExecutionDoesNotExist') throw error;
    }
  }
}

/**
 * Execution names take 1 to 80 characters and none of whitespace, `<>{}[]?*"#%\^|~\`$&,;:/` or
 * control characters (StartExecution). Run ids may be the caller's, so an id outside the safe
 * alphabet is replaced by its SHA-256, which keeps it stable and distinct. A later round (the
 * asks were opened again) is named `sha256r<round>-` and the run id's SHA-256, so no round's name
 * is another round's or another run's.
 */
export function executionName(runId: string, round = 0): string {
  if (round > 0) return `sha256r${round}-${sha256(runId)}`;
  // A run id that starts as a stand-in does is named by its hash as well, so no id takes another's stand-in.
  return /^[A-Za-z0-9_.=+@-]{1,80}$/.test(runId) && !runId.startsWith('sha256') ? runId : `sha256-${sha256(runId)}`;
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** arn:aws:states:<region>:<account>:stateMachine:<name> → …:execution:<name>:<execution> */
export function executionArn(stateMachineArn: string, runId: string, round = 0): string {
  return `${stateMachineArn.replace(':stateMachine:', ':execution:')}:${executionName(runId, round)}`;
}

/**
 * A Wait state takes an RFC 3339 timestamp in UTC and ignores its milliseconds, so the instant is
 * rounded up to the next whole second: the timer may fire late by under a second, never early.
 */
export function waitTimestamp(expiresAt: string): string {
  const ms = Date.parse(expiresAt);
  if (Number.isNaN(ms)) throw new Error(`expiresAt is not a timestamp: "${expiresAt}"`);
  return new Date(Math.ceil(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}
