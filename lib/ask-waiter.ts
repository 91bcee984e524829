import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as iam from 'aws-cdk-lib/aws-iam';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import { Construct } from 'constructs';
import { ALARM_PERIOD, alarmOnAny } from './alarm.js';
import { ENV } from '../lambdas/runtimes/environment.js';
import { GatewayFunction } from './gateway-function.js';
import type { Store } from './store.js';

export interface AskWaiterProps {
  store: Store;
  logRetention: logs.RetentionDays;
  environment: Record<string, string>;
}

/**
 * The outbound gap's clock: one Standard execution per waiting run, named after the run, with
 * input `{ runId, expiresAt, context? }` (the run's context rides through every state). It waits until the earliest `expiresAt`, then the expirer marks
 * the run's open asks `expired`. An answer or a cancel stops the execution (StopExecution by its
 * name, so nothing has to remember a task token). The expirer answers with the input of the next
 * round: `{ runId }` when it is done, `{ runId, expiresAt }` when it was woken early and the run
 * must wait again (the core re-arms in that case, and a running execution cannot be started again).
 */
export class AskWaiter extends Construct {
  readonly stateMachine: sfn.StateMachine;
  readonly expirer: GatewayFunction;
  readonly failuresAlarm: cloudwatch.Alarm;

  constructor(scope: Construct, id: string, props: AskWaiterProps) {
    super(scope, id);
    this.expirer = new GatewayFunction(this, 'Expirer', {
      handler: 'ask-expirer',
      description: 'funduq: marks the open asks of a waiting run expired',
      timeout: Duration.seconds(30),
      memorySize: 256,
      logRetention: props.logRetention,
      environment: props.environment,
    });
    // It reads the run and closes its asks (one item of the runs table), and writes the audit record of the expiry (a new item).
    props.store.runs.grant(this.expirer.function, 'dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:PutItem');

    const hasExpiry = new sfn.Choice(this, 'Has an expiry?');
    const waitForExpiry = new sfn.Wait(this, 'Wait until the earliest expiresAt', {
      time: sfn.WaitTime.timestampPath('$.expiresAt'),
    });
    const expire = new tasks.LambdaInvoke(this, 'Expire the open asks', {
      lambdaFunction: this.expirer.function,
      // No payload named: the expirer takes the state whole, since a path to a field that may be
      // absent (the run's context) would fail the task.
      payloadResponseOnly: true,
      retryOnServiceExceptions: true,
    });
    expire.addRetry({
      errors: ['States.ALL'],
      interval: Duration.seconds(5),
      backoffRate: 2,
      maxAttempts: 6,
    });
    const done = new sfn.Succeed(this, 'Nothing left to expire');
    hasExpiry
      .when(sfn.Condition.isPresent('$.expiresAt'), waitForExpiry.next(expire).next(hasExpiry))
      .otherwise(done);

    this.stateMachine = new sfn.StateMachine(this, 'StateMachine', {
      stateMachineType: sfn.StateMachineType.STANDARD,
      definitionBody: sfn.DefinitionBody.fromChainable(hasExpiry),
      comment: 'funduq ask waiter: expires the open asks of a waiting run at their earliest expiresAt',
      logs: {
        destination: new logs.LogGroup(this, 'Logs', { retention: props.logRetention }),
        level: sfn.LogLevel.ERROR,
      },
    });

    this.failuresAlarm = alarmOnAny(
      this,
      'FailuresAlarm',
      'funduq ask waiter: an execution failed, so some asks may never expire',
      this.stateMachine.metricFailed({ period: ALARM_PERIOD, statistic: cloudwatch.Stats.SUM }),
    );
  }

  /** What a function needs to arm the timer of a run (the dispatcher, when a run settles with asks). */
  grantArm(grantee: iam.IGrantable): void {
    this.stateMachine.grantStartExecution(grantee);
  }

  /** What a function needs to disarm it (the doors, on an answer or a cancel). */
  grantDisarm(grantee: iam.IGrantable): void {
    this.stateMachine.grantExecution(grantee, 'states:StopExecution');
  }

  get environment(): Record<string, string> {
    return { [ENV.askWaiterArn]: this.stateMachine.stateMachineArn };
  }
}
