import { Annotations, CfnOutput, Stack, type StackProps } from 'aws-cdk-lib';
import * as acm from 'aws-cdk-lib/aws-certificatemanager';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as cognito from 'aws-cdk-lib/aws-cognito';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as sns from 'aws-cdk-lib/aws-sns';
import { EmailSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import type { Construct } from 'constructs';
import { ENV } from '../lambdas/runtimes/environment.js';
import {
  DEPLOY_SETTINGS,
  GATEWAY_SETTINGS,
  LEASE_SETTINGS,
  readSettings,
  SettingsError,
  toEnvironment,
  type DeploySettings,
  type GatewaySettings,
} from '../lambdas/runtimes/settings.js';
import { AskWaiter } from './ask-waiter.js';
import { DEAD_LETTERS_TIMEOUT, DeadLetters } from './dead-letters.js';
import { Dispatcher, DISPATCHER_TIMEOUT } from './dispatcher.js';
import { DoorsApi, type ApiAuth } from './doors-api.js';
import { GatewayFunction } from './gateway-function.js';
import { ProviderLink } from './provider-link.js';
import { PushSigning } from './push-signing.js';
import { Repair } from './repair.js';
import { Sweep } from './sweep.js';
import { Store } from './store.js';
import { StreamHandler } from './stream-handler.js';
import { ThreadQueue } from './thread-queue.js';

export type ApiAuthMode = ApiAuth['mode'];

/**
 * The deploy-time settings: the gateway's own (handed to the functions) and the stack's, each
 * with a default, all from the one settings schema (`lambdas/runtimes/settings.ts`).
 */
export type FunduqSettings = GatewaySettings & DeploySettings;

/** The settings the stack reads from CDK context, by their context keys. */
const STACK_SETTINGS = { ...GATEWAY_SETTINGS, ...DEPLOY_SETTINGS };

export const DEFAULT_SETTINGS: FunduqSettings = readSettings(STACK_SETTINGS, 'context', () => undefined);

export interface FunduqStackProps extends StackProps {
  settings?: Partial<FunduqSettings>;
}

/**
 * funduq on AWS: the record (DynamoDB), the inbound gap (SQS FIFO and its dispatcher), the
 * outbound gap's clock (Step Functions), the doors (API Gateway and Lambda) and the stream
 * handler, composed from one construct per concern.
 */
export class FunduqStack extends Stack {
  readonly settings: FunduqSettings;
  readonly store: Store;
  readonly threadQueue: ThreadQueue;
  readonly askWaiter: AskWaiter;
  readonly dispatcher: Dispatcher;
  readonly deadLetters: DeadLetters;
  readonly repair: Repair;
  readonly sweep: Sweep;
  readonly doors: DoorsApi;
  readonly streamHandler: StreamHandler;
  readonly pushSigning: PushSigning;
  readonly link: ProviderLink;

  constructor(scope: Construct, id: string, props: FunduqStackProps = {}) {
    super(scope, id, {
      description: 'funduq: an agent gateway (AG-UI and A2A doors in front of agent providers)',
      ...props,
    });
    const settings = checkSettings(props.settings ?? {});
    this.settings = settings;
    const logRetention = settings.logRetentionDays as logs.RetentionDays;

    const adminToken = settings.adminTokenSecretName
      ? secretsmanager.Secret.fromSecretNameV2(this, 'AdminToken', settings.adminTokenSecretName)
      : new secretsmanager.Secret(this, 'AdminToken', {
          description: 'funduq admin token (Authorization: Bearer <token> on the admin routes)',
          generateSecretString: { passwordLength: 48, excludePunctuation: true },
        });

    const consoleReadToken = settings.consoleReadToken
      ? new secretsmanager.Secret(this, 'ConsoleReadToken', {
          description: "funduq console read-only token (signs in to /console's pages, never its acts)",
          generateSecretString: { passwordLength: 48, excludePunctuation: true },
        })
      : undefined;

    this.store = new Store(this, 'Store', { retainOnDelete: settings.retainData });
    const recordEnvironment = {
      [ENV.runsTable]: this.store.runs.tableName,
      [ENV.runEventsTable]: this.store.runEvents.tableName,
      // The gateway's settings reach the functions by the names the schema gives them, and are read there by it.
      ...toEnvironment(GATEWAY_SETTINGS, settings),
      ...toEnvironment(LEASE_SETTINGS, settings),
      ...(settings.jwtTenantClaim ? { [ENV.jwtTenantClaim]: settings.jwtTenantClaim } : {}),
      // Every function traces to the same collector (see the README's "Traces").
      ...toEnvironment({ otlpEndpoint: DEPLOY_SETTINGS.otlpEndpoint, otlpHeadersSecret: DEPLOY_SETTINGS.otlpHeadersSecret }, settings),
      ...(settings.otlpCloudWatch ? toEnvironment({ otlpCloudWatch: DEPLOY_SETTINGS.otlpCloudWatch }, settings) : {}),
    };

    this.threadQueue = new ThreadQueue(this, 'ThreadQueue', {
      dispatcherTimeout: DISPATCHER_TIMEOUT,
      deadLettersTimeout: DEAD_LETTERS_TIMEOUT,
      maxReceiveCount: settings.maxReceiveCount,
    });
    const queueEnvironment = { ...recordEnvironment, [ENV.threadQueueUrl]: this.threadQueue.queue.queueUrl };
    // The expirer is given no state machine ARN: it hands a re-arm back to its own execution.
    this.askWaiter = new AskWaiter(this, 'AskWaiter', {
      store: this.store,
      logRetention,
      environment: queueEnvironment,
    });
    const gatewayEnvironment = { ...queueEnvironment, ...this.askWaiter.environment };
    // Test-only (the AWS box's push receiver): the functions that vet and send pushes are told.
    const pushEnvironment: Record<string, string> = settings.pushToLoopbackForTests ? { [ENV.pushToLoopbackForTests]: 'true' } : {};

    this.dispatcher = new Dispatcher(this, 'Dispatcher', {
      store: this.store,
      threadQueue: this.threadQueue,
      askWaiter: this.askWaiter,
      maxConcurrency: settings.dispatcherConcurrency,
      reservedConcurrency: settings.dispatcherReservedConcurrency,
      agentFunctions: settings.agentFunctions,
      logRetention,
      environment: gatewayEnvironment,
    });
    this.deadLetters = new DeadLetters(this, 'DeadLetters', {
      store: this.store,
      threadQueue: this.threadQueue,
      logRetention,
      environment: queueEnvironment,
    });
    this.repair = new Repair(this, 'Repair', {
      store: this.store,
      threadQueue: this.threadQueue,
      askWaiter: this.askWaiter,
      logRetention,
      environment: gatewayEnvironment,
    });
    this.sweep = new Sweep(this, 'Sweep', {
      store: this.store,
      threadQueue: this.threadQueue,
      askWaiter: this.askWaiter,
      everyMinutes: settings.arrivalSweepMinutes,
      logRetention,
      environment: gatewayEnvironment,
    });
    this.doors = new DoorsApi(this, 'Doors', {
      store: this.store,
      threadQueue: this.threadQueue,
      dispatcher: this.dispatcher.function.function,
      askWaiter: this.askWaiter,
      ...(settings.agentFunctions ? { agentFunctions: settings.agentFunctions } : {}),
      relayAtDoor: settings.relayAtDoor,
      adminToken,
      ...(consoleReadToken ? { consoleReadToken } : {}),
      auth: this.apiAuth(settings),
      stageName: settings.stageName,
      logRetention,
      environment: { ...gatewayEnvironment, ...pushEnvironment, ...toEnvironment({ relayAtDoor: DEPLOY_SETTINGS.relayAtDoor }, settings) },
      domain:
        settings.domainName && settings.certificateArn
          ? {
              domainName: settings.domainName,
              certificate: acm.Certificate.fromCertificateArn(this, 'Certificate', settings.certificateArn),
            }
          : undefined,
    });
    this.streamHandler = new StreamHandler(this, 'StreamHandler', {
      store: this.store,
      logRetention,
      environment: { ...recordEnvironment, ...pushEnvironment },
    });

    this.pushSigning = new PushSigning(this, 'PushSigning', { doors: this.doors, signers: [this.streamHandler.function.function] });

    this.link = new ProviderLink(this, 'Link', { store: this.store, threadQueue: this.threadQueue, askWaiter: this.askWaiter, logRetention, environment: gatewayEnvironment });
    // The sweep seals the audit log with funduq's identity key.
    this.link.grantKey(this.sweep.function.function);
    // The doors cancel link runs and register providers, the dispatcher offers runs: both take part in the link.
    for (const fn of [this.dispatcher.function.function, this.doors.buffered.function, this.doors.streaming.function]) this.link.grantLink(fn);
    // Whoever settles a run lets go of the thread-queue message a link run held (the dispatcher's
    // event source may already; the repair's own construct grants it, for any settled run's message).
    for (const fn of [this.doors.buffered.function, this.doors.streaming.function, this.deadLetters.function.function]) {
      this.threadQueue.grantRelease(fn);
    }

    if (settings.otlpHeadersSecret) this.grantOtlpHeaders(settings);
    if (settings.otlpCloudWatch) this.grantCloudWatchTraces(settings);
    if (settings.alarmEmail) this.sendAlarmsTo(settings.alarmEmail);
    this.outputs(settings, adminToken);
    if (consoleReadToken) {
      new CfnOutput(this, 'ConsoleReadTokenSecret', { description: "The console's read-only token: aws secretsmanager get-secret-value --secret-id <this>", value: consoleReadToken.secretName });
    }
  }

  /** Every function that traces reads the secret its OTLP headers are kept in (the value only; by name, so any of the six characters Secrets Manager appends). */
  private grantOtlpHeaders(settings: FunduqSettings): void {
    if (!settings.otlpEndpoint) throw new SettingsError('funduq: otlpHeadersSecret names the headers of a collector: set otlpEndpoint too (-c otlpEndpoint=https://collector.example:4318)');
    const secret = secretsmanager.Secret.fromSecretNameV2(this, 'OtlpHeaders', settings.otlpHeadersSecret as string);
    this.grantEveryFunction(new iam.PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: [`${secret.secretArn}-??????`] }));
  }

  /** Every function that traces may send its spans to CloudWatch's OTLP endpoint, which authorizes an export as `xray:PutTraceSegments` (an action on no resource). */
  private grantCloudWatchTraces(settings: FunduqSettings): void {
    if (settings.otlpEndpoint || settings.otlpHeadersSecret) {
      throw new SettingsError('funduq: otlpCloudWatch sends traces to CloudWatch itself: leave out otlpEndpoint and otlpHeadersSecret, or send them to your collector without otlpCloudWatch');
    }
    this.grantEveryFunction(new iam.PolicyStatement({ actions: ['xray:PutTraceSegments'], resources: ['*'] }));
  }

  /** Every function traces: what its exports need, each function is granted. */
  private grantEveryFunction(statement: iam.PolicyStatement): void {
    for (const { function: fn } of this.node.findAll().filter((c): c is GatewayFunction => c instanceof GatewayFunction)) fn.addToRolePolicy(statement);
  }

  private apiAuth(settings: FunduqSettings): ApiAuth {
    if (settings.apiAuth !== 'jwt') return { mode: settings.apiAuth };
    return {
      mode: 'jwt',
      userPool: cognito.UserPool.fromUserPoolArn(this, 'CallerPool', settings.jwtUserPoolArn as string),
    };
  }

  private sendAlarmsTo(email: string): void {
    const topic = new sns.Topic(this, 'Alarms', { displayName: 'funduq alarms' });
    topic.addSubscription(new EmailSubscription(email));
    const action = new SnsAction(topic);
    for (const alarm of this.node.findAll().filter((c): c is cloudwatch.Alarm => c instanceof cloudwatch.Alarm)) {
      alarm.addAlarmAction(action);
    }
  }

  private outputs(settings: FunduqSettings, adminToken: secretsmanager.ISecret): void {
    const base = this.doors.url;
    new CfnOutput(this, 'AguiUrl', { description: 'AG-UI door: POST <url><agentId>', value: `${base}agui/` });
    new CfnOutput(this, 'A2aUrl', {
      description: "A2A door: an agent's URL is <url><agentId>/ (its card at <url><agentId>/.well-known/agent-card.json)",
      value: `${base}a2a/`,
    });
    new CfnOutput(this, 'AdminUrl', { description: 'Admin routes (bearer: the admin token secret)', value: `${base}admin/` });
    new CfnOutput(this, 'ConsoleUrl', { description: "The operator's console in a browser (sign in with the admin token)", value: `${base}console` });
    new CfnOutput(this, 'AdminTokenSecret', {
      description: 'The admin token: aws secretsmanager get-secret-value --secret-id <this>',
      value: adminToken.secretName,
    });
    new CfnOutput(this, 'PushSigningSecret', {
      description: 'The seed the push signing keys are derived from (a new value replaces every key)',
      value: this.pushSigning.seed.secretName,
    });
    new CfnOutput(this, 'LinkUrl', {
      description: "Providers of link agents dial out here (@funduq/provider connect); they pin funduq's public key from GET <AdminUrl>link",
      value: this.link.stage.url,
    });
    new CfnOutput(this, 'LinkKeySecret', {
      description: "The secret funduq's link key is derived from (a new value is a new key, which every provider must pin again)",
      value: this.link.keySecret.secretName,
    });
    new CfnOutput(this, 'RunsTableName', { value: this.store.runs.tableName });
    new CfnOutput(this, 'RunEventsTableName', { value: this.store.runEvents.tableName });
    new CfnOutput(this, 'ThreadQueueName', { value: this.threadQueue.queue.queueName });
    new CfnOutput(this, 'DeadLetterQueueName', { value: this.threadQueue.deadLetters.queueName });
    new CfnOutput(this, 'AskWaiterName', { value: this.askWaiter.stateMachine.stateMachineName });
    if (this.doors.apiKey) {
      new CfnOutput(this, 'ApiKeyId', {
        description: 'Callers send its value as x-api-key: aws apigateway get-api-key --include-value --api-key <this>',
        value: this.doors.apiKey.keyId,
      });
    }
    if (this.doors.domain) {
      new CfnOutput(this, 'DomainTarget', {
        description: `Point ${settings.domainName} (CNAME or alias) at this name`,
        value: this.doors.domain.domainNameAliasDomainName,
      });
    }
    if (settings.apiAuth === 'none') {
      const warning =
        'API AUTH IS OFF (apiAuth=none): anyone who finds these URLs can run your agents. Use it for a demo stage only.';
      new CfnOutput(this, 'Warning', { description: 'apiAuth=none', value: warning });
      Annotations.of(this).addWarningV2('funduq:apiAuthNone', warning);
    }
  }
}

/**
 * Reads the settings from CDK context (`cdk deploy -c threadQueueLimit=4` or `cdk.json`), where
 * values arrive as strings or JSON: only those given, checked by the settings schema.
 */
export function settingsFromContext(get: (key: string) => unknown): Partial<FunduqSettings> {
  return readSettings(STACK_SETTINGS, 'context', get, { defaults: false }) as Partial<FunduqSettings>;
}

/**
 * The settings given (typed, or from context) over the defaults, each checked by the schema as its
 * text would be: the same value fails the same way at `cdk synth` as in a function or at `npm start`.
 */
function checkSettings(given: Partial<FunduqSettings>): FunduqSettings {
  const settings = readSettings(STACK_SETTINGS, 'context', (key) => {
    const value = (given as Record<string, unknown>)[key];
    return Array.isArray(value) ? value.join(',') : value;
  });
  const problems: string[] = [];
  if (settings.apiAuth === 'jwt' && !settings.jwtUserPoolArn) problems.push('apiAuth=jwt needs jwtUserPoolArn');
  if (!Object.values(logs.RetentionDays).includes(settings.logRetentionDays)) {
    problems.push(`logRetentionDays must be one CloudWatch Logs offers (1, 3, 5, 7, 14, 30, 60, 90, …), got ${settings.logRetentionDays}`);
  }
  if (settings.dispatcherReservedConcurrency !== undefined && settings.dispatcherReservedConcurrency <= settings.dispatcherConcurrency) {
    problems.push(
      `dispatcherReservedConcurrency (-c dispatcherReservedConcurrency) must be more than dispatcherConcurrency (${settings.dispatcherConcurrency}), got ${settings.dispatcherReservedConcurrency}: interjections are dispatched beside the queue's runs`,
    );
  }
  if (Boolean(settings.domainName) !== Boolean(settings.certificateArn)) {
    problems.push('domainName and certificateArn go together');
  }
  if (problems.length > 0) throw new SettingsError(`funduq settings: ${problems.join('; ')}`);
  return settings;
}
