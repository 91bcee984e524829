import { Annotations, CfnOutput, Stack, type StackProps } from 'aws-cdk-lib';
import * as acm from 'aws-cdk-lib/aws-certificatemanager';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import { SnsAction } from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as cognito from 'aws-cdk-lib/aws-cognito';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as sns from 'aws-cdk-lib/aws-sns';
import { EmailSubscription } from 'aws-cdk-lib/aws-sns-subscriptions';
import type { Construct } from 'constructs';
import { ENV } from '../lambdas/handlers/environment.js';
import { AskWaiter } from './ask-waiter.js';
import { Dispatcher, DISPATCHER_TIMEOUT } from './dispatcher.js';
import { DoorsApi, type ApiAuth } from './doors-api.js';
import { Store } from './store.js';
import { StreamHandler } from './stream-handler.js';
import { ThreadQueue } from './thread-queue.js';

export type ApiAuthMode = ApiAuth['mode'];

/** The deploy-time settings, each with a default (see `DEFAULT_SETTINGS`). */
export interface FunduqSettings {
  /** Runs that may wait `queued` per thread; the next is refused with 429. */
  threadQueueLimit: number;
  /** Runs a tenant may start per minute (429 `tenant_rate_limited`); unset: no limit. */
  tenantRunsPerMinute?: number;
  /** Runs a tenant may have queued or running at once (429 `tenant_concurrency_limited`); unset: no limit. */
  tenantConcurrentRuns?: number;
  /** With `apiAuth: jwt`, the claim that names the caller's tenant; unset, each subject is its own tenant. */
  jwtTenantClaim?: string;
  /**
   * Name of an existing Secrets Manager secret holding the admin token. When absent the stack
   * creates one with a generated value; either way the token never appears in the template.
   */
  adminTokenSecretName?: string;
  /** `apiKey` (a usage plan and one generated key), `jwt` (a Cognito user pool) or `none` (demo only). */
  apiAuth: ApiAuthMode;
  /** The Cognito user pool whose tokens the `jwt` mode accepts. */
  jwtUserPoolArn?: string;
  stageName: string;
  /** Retention of every function's and the state machine's logs. */
  logRetentionDays: logs.RetentionDays;
  /** At most this many runs are dispatched at once (reserved concurrency of the dispatcher). */
  dispatcherConcurrency: number;
  /** Receives of a thread-queue message before it goes to the dead-letter queue. */
  maxReceiveCount: number;
  /** Keep the tables when the stack is deleted. */
  retainData: boolean;
  /** Serve the API on this domain name too, with the ACM certificate `certificateArn` (same region). */
  domainName?: string;
  certificateArn?: string;
  /** Send every alarm to this address (an SNS topic with an email subscription). */
  alarmEmail?: string;
}

export const DEFAULT_SETTINGS: FunduqSettings = {
  threadQueueLimit: 8,
  apiAuth: 'apiKey',
  stageName: 'v1',
  logRetentionDays: logs.RetentionDays.ONE_MONTH,
  dispatcherConcurrency: 10,
  maxReceiveCount: 3,
  retainData: true,
};

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
  readonly doors: DoorsApi;
  readonly streamHandler: StreamHandler;

  constructor(scope: Construct, id: string, props: FunduqStackProps = {}) {
    super(scope, id, {
      description: 'funduq: an agent gateway (AG-UI and A2A doors in front of agent providers)',
      ...props,
    });
    const settings = checkSettings({ ...DEFAULT_SETTINGS, ...withoutUndefined(props.settings ?? {}) });
    this.settings = settings;
    const logRetention = settings.logRetentionDays;

    const adminToken = settings.adminTokenSecretName
      ? secretsmanager.Secret.fromSecretNameV2(this, 'AdminToken', settings.adminTokenSecretName)
      : new secretsmanager.Secret(this, 'AdminToken', {
          description: 'funduq admin token (Authorization: Bearer <token> on the admin routes)',
          generateSecretString: { passwordLength: 48, excludePunctuation: true },
        });

    this.store = new Store(this, 'Store', { retainOnDelete: settings.retainData });
    const recordEnvironment = {
      [ENV.runsTable]: this.store.runs.tableName,
      [ENV.runEventsTable]: this.store.runEvents.tableName,
      [ENV.threadQueueLimit]: String(settings.threadQueueLimit),
      ...(settings.tenantRunsPerMinute ? { [ENV.tenantRunsPerMinute]: String(settings.tenantRunsPerMinute) } : {}),
      ...(settings.tenantConcurrentRuns ? { [ENV.tenantConcurrentRuns]: String(settings.tenantConcurrentRuns) } : {}),
      ...(settings.jwtTenantClaim ? { [ENV.jwtTenantClaim]: settings.jwtTenantClaim } : {}),
    };

    this.threadQueue = new ThreadQueue(this, 'ThreadQueue', {
      dispatcherTimeout: DISPATCHER_TIMEOUT,
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

    this.dispatcher = new Dispatcher(this, 'Dispatcher', {
      store: this.store,
      threadQueue: this.threadQueue,
      askWaiter: this.askWaiter,
      reservedConcurrency: settings.dispatcherConcurrency,
      logRetention,
      environment: gatewayEnvironment,
    });
    this.doors = new DoorsApi(this, 'Doors', {
      store: this.store,
      threadQueue: this.threadQueue,
      dispatcher: this.dispatcher.function.function,
      askWaiter: this.askWaiter,
      adminToken,
      auth: this.apiAuth(settings),
      stageName: settings.stageName,
      logRetention,
      environment: gatewayEnvironment,
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
      environment: recordEnvironment,
    });

    if (settings.alarmEmail) this.sendAlarmsTo(settings.alarmEmail);
    this.outputs(settings, adminToken);
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
      description: 'A2A door: <url><agentId> (agent card at <url><agentId>/.well-known/agent-card.json)',
      value: `${base}a2a/`,
    });
    new CfnOutput(this, 'AdminUrl', { description: 'Admin routes (bearer: the admin token secret)', value: `${base}admin/` });
    new CfnOutput(this, 'AdminTokenSecret', {
      description: 'The admin token: aws secretsmanager get-secret-value --secret-id <this>',
      value: adminToken.secretName,
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
 * values arrive as strings or JSON. Unset keys keep their defaults.
 */
export function settingsFromContext(get: (key: string) => unknown): Partial<FunduqSettings> {
  const text = (key: string) => {
    const value = get(key);
    return value === undefined || value === null || value === '' ? undefined : String(value);
  };
  const integer = (key: string) => {
    const value = text(key);
    if (value === undefined) return undefined;
    if (!/^\d+$/.test(value)) throw new Error(`context "${key}" must be a whole number, got "${value}"`);
    return Number(value);
  };
  const flag = (key: string) => {
    const value = text(key);
    if (value === undefined) return undefined;
    if (value !== 'true' && value !== 'false') throw new Error(`context "${key}" must be true or false, got "${value}"`);
    return value === 'true';
  };
  return withoutUndefined({
    threadQueueLimit: integer('threadQueueLimit'),
    tenantRunsPerMinute: integer('tenantRunsPerMinute'),
    tenantConcurrentRuns: integer('tenantConcurrentRuns'),
    jwtTenantClaim: text('jwtTenantClaim'),
    adminTokenSecretName: text('adminTokenSecretName'),
    apiAuth: text('apiAuth') as ApiAuthMode | undefined,
    jwtUserPoolArn: text('jwtUserPoolArn'),
    stageName: text('stageName'),
    logRetentionDays: integer('logRetentionDays'),
    dispatcherConcurrency: integer('dispatcherConcurrency'),
    maxReceiveCount: integer('maxReceiveCount'),
    retainData: flag('retainData'),
    domainName: text('domainName'),
    certificateArn: text('certificateArn'),
    alarmEmail: text('alarmEmail'),
  });
}

function checkSettings(settings: FunduqSettings): FunduqSettings {
  const problems: string[] = [];
  if (!Number.isInteger(settings.threadQueueLimit) || settings.threadQueueLimit < 1) {
    problems.push(`threadQueueLimit must be a whole number from 1, got ${settings.threadQueueLimit}`);
  }
  if (!['none', 'apiKey', 'jwt'].includes(settings.apiAuth)) {
    problems.push(`apiAuth must be none, apiKey or jwt, got "${settings.apiAuth}"`);
  }
  if (settings.apiAuth === 'jwt' && !settings.jwtUserPoolArn) problems.push('apiAuth=jwt needs jwtUserPoolArn');
  if (!/^[A-Za-z0-9_-]{1,128}$/.test(settings.stageName)) {
    problems.push(`stageName may hold letters, digits, - and _ only, got "${settings.stageName}"`);
  }
  if (!Object.values(logs.RetentionDays).includes(settings.logRetentionDays)) {
    problems.push(`logRetentionDays must be one CloudWatch Logs offers (1, 3, 5, 7, 14, 30, 60, 90, …), got ${settings.logRetentionDays}`);
  }
  if (!Number.isInteger(settings.maxReceiveCount) || settings.maxReceiveCount < 1 || settings.maxReceiveCount > 1000) {
    problems.push(`maxReceiveCount must be a whole number from 1 to 1000, got ${settings.maxReceiveCount}`);
  }
  if (Boolean(settings.domainName) !== Boolean(settings.certificateArn)) {
    problems.push('domainName and certificateArn go together');
  }
  if (problems.length > 0) throw new Error(`funduq settings: ${problems.join('; ')}`);
  return settings;
}

function withoutUndefined<T extends object>(object: T): Partial<T> {
  return Object.fromEntries(Object.entries(object).filter(([, value]) => value !== undefined)) as Partial<T>;
}
