import { Duration, Stack } from 'aws-cdk-lib';
import * as apigwv2 from 'aws-cdk-lib/aws-apigatewayv2';
import { WebSocketLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import type * as logs from 'aws-cdk-lib/aws-logs';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { ENV } from '../lambdas/runtimes/environment.js';
import { ALARM_PERIOD, alarmOnAny } from './alarm.js';
import type { AskWaiter } from './ask-waiter.js';
import { GatewayFunction } from './gateway-function.js';
import type { Store } from './store.js';
import type { ThreadQueue } from './thread-queue.js';

/** The WebSocket API's stage: providers link at `wss://{api}.execute-api.{region}.amazonaws.com/link`. */
export const LINK_STAGE = 'link';
/** API Gateway waits 29 s for a WebSocket route's integration; a message's handling is well within. */
const LINK_FUNCTION_TIMEOUT = Duration.seconds(29);
const LINK_TIMER_TIMEOUT = Duration.seconds(60);

export interface ProviderLinkProps {
  store: Store;
  threadQueue: ThreadQueue;
  askWaiter: AskWaiter;
  logRetention: logs.RetentionDays;
  environment: Record<string, string>;
}

/**
 * Agents that dial out (`link` agents) on AWS: an API Gateway WebSocket API whose three routes are
 * one function (`$connect` checks the handshake in the upgrade's headers, `$default` is one frame,
 * `$disconnect` the link's end), funduq's link key derived from a generated secret (every function
 * reading it has the same Ed25519 key), and the link's timers as delayed messages on a standard
 * queue read by a function of their own. No function is held for a run: the dispatcher offers and
 * returns, each frame is one short invocation.
 */
export class ProviderLink extends Construct {
  readonly api: apigwv2.WebSocketApi;
  readonly stage: apigwv2.WebSocketStage;
  readonly keySecret: secretsmanager.Secret;
  readonly timerQueue: sqs.Queue;
  readonly timerDeadLetters: sqs.Queue;
  readonly timerDeadLettersAlarm: cloudwatch.Alarm;
  readonly function: GatewayFunction;
  readonly timerFunction: GatewayFunction;

  constructor(scope: Construct, id: string, props: ProviderLinkProps) {
    super(scope, id);
    this.keySecret = new secretsmanager.Secret(this, 'KeySecret', {
      description: "funduq: the secret funduq's link key (Ed25519) is derived from; providers pin its public key (GET /admin/link). A new value is a new key",
      generateSecretString: { passwordLength: 56, excludePunctuation: true },
    });
    this.timerDeadLetters = new sqs.Queue(this, 'TimerDeadLetters', {
      retentionPeriod: Duration.days(14),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
    });
    this.timerDeadLettersAlarm = alarmOnAny(
      this,
      'TimerDeadLettersAlarm',
      'funduq link timers: a timer of a link run kept failing (a run may be left without its limit)',
      this.timerDeadLetters.metricApproximateNumberOfMessagesVisible({ period: ALARM_PERIOD, statistic: cloudwatch.Stats.MAXIMUM }),
    );
    this.timerQueue = new sqs.Queue(this, 'TimerQueue', {
      // Six times the function's timeout, as AWS asks of a queue that is a Lambda event source.
      visibilityTimeout: Duration.seconds(LINK_TIMER_TIMEOUT.toSeconds() * 6),
      retentionPeriod: Duration.days(4),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      deadLetterQueue: { queue: this.timerDeadLetters, maxReceiveCount: 10 },
    });

    const environment = props.environment;
    this.function = new GatewayFunction(this, 'Link', {
      handler: 'link',
      description: "funduq: the provider link's WebSocket routes ($connect, $default, $disconnect)",
      timeout: LINK_FUNCTION_TIMEOUT,
      memorySize: 256,
      logRetention: props.logRetention,
      environment,
    });
    this.timerFunction = new GatewayFunction(this, 'LinkTimer', {
      handler: 'link-timer',
      description: "funduq: the provider link's timers (offers, limits, grace windows)",
      timeout: LINK_TIMER_TIMEOUT,
      memorySize: 256,
      logRetention: props.logRetention,
      environment,
    });

    const integration = new WebSocketLambdaIntegration('Routes', this.function.function);
    this.api = new apigwv2.WebSocketApi(this, 'Api', {
      apiName: 'funduq-link',
      description: 'funduq: providers of link agents dial out to here',
      connectRouteOptions: { integration },
      disconnectRouteOptions: { integration },
      defaultRouteOptions: { integration },
    });
    this.stage = new apigwv2.WebSocketStage(this, 'Stage', { webSocketApi: this.api, stageName: LINK_STAGE, autoDeploy: true });

    this.timerFunction.function.addEventSource(new SqsEventSource(this.timerQueue, { batchSize: 10, reportBatchItemFailures: true }));
    for (const fn of [this.function.function, this.timerFunction.function]) {
      // Frames and timers settle runs, as the dispatcher does: the record, the ask waiter, the thread queue's held messages.
      props.store.grantRecord(fn);
      props.askWaiter.grantArm(fn);
      props.threadQueue.grantRelease(fn);
      this.grantLink(fn);
    }
  }

  /** funduq's identity key (the secret it is derived from): the link's, the actor chains' hops' and the audit log's seal (the sweep's). */
  grantKey(fn: lambda.Function): void {
    fn.addToRolePolicy(new iam.PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: [this.keySecret.secretArn] }));
    fn.addEnvironment(ENV.linkKeySecretArn, this.keySecret.secretArn);
  }

  /**
   * What a function that takes part in the link needs (the doors, the dispatcher, the link's own):
   * funduq's key, the link's connections (post and close, on this API's stage only) and its timers.
   */
  grantLink(fn: lambda.Function): void {
    this.grantKey(fn);
    const connections = Stack.of(this).formatArn({ service: 'execute-api', resource: this.api.apiId, resourceName: `${LINK_STAGE}/*/@connections/*` });
    const stageArn = connections.replace(`${LINK_STAGE}/*/@connections/*`, LINK_STAGE);
    fn.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['execute-api:ManageConnections'],
        // PostToConnection is a POST and DeleteConnection a DELETE on @connections/{connectionId}.
        resources: [`${stageArn}/POST/@connections/*`, `${stageArn}/DELETE/@connections/*`],
      }),
    );
    this.timerQueue.grant(fn, 'sqs:SendMessage');
    fn.addEnvironment(ENV.linkTimerQueueUrl, this.timerQueue.queueUrl);
    fn.addEnvironment(ENV.linkConnectionsUrl, this.stage.callbackUrl);
  }
}
