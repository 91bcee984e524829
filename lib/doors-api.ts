import { Duration, Stack } from 'aws-cdk-lib';
import * as apigw from 'aws-cdk-lib/aws-apigateway';
import type * as acm from 'aws-cdk-lib/aws-certificatemanager';
import type * as cognito from 'aws-cdk-lib/aws-cognito';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as logs from 'aws-cdk-lib/aws-logs';
import type * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import { ENV } from '../lambdas/runtimes/environment.js';
import type { AskWaiter } from './ask-waiter.js';
import { grantAgentInvoke } from './dispatcher.js';
import { GatewayFunction } from './gateway-function.js';
import type { Store } from './store.js';
import type { ThreadQueue } from './thread-queue.js';

/**
 * How API Gateway authenticates callers before a door sees them.
 * `none` is for a demo stage only: anyone who finds the URL can run the agents.
 */
export type ApiAuth = { mode: 'none' } | { mode: 'apiKey' } | { mode: 'jwt'; userPool: cognito.IUserPool };

export interface CustomDomain {
  domainName: string;
  certificate: acm.ICertificate;
}

export interface DoorsApiProps {
  store: Store;
  threadQueue: ThreadQueue;
  /** Interjections are handed to it by an asynchronous invoke, beside the thread's message group. */
  dispatcher: lambda.IFunction;
  askWaiter: AskWaiter;
  /** The functions agents of the `lambda` kind run on: the streaming doors relay runs on idle threads, and may invoke them. */
  agentFunctions?: readonly string[];
  /** The streaming doors relay runs on idle threads themselves (`relayAtDoor`). */
  relayAtDoor: boolean;
  adminToken: secretsmanager.ISecret;
  /** The console's read-only token, when the stack makes one. */
  consoleReadToken?: secretsmanager.ISecret;
  auth: ApiAuth;
  stageName: string;
  logRetention: logs.RetentionDays;
  environment: Record<string, string>;
  domain?: CustomDomain;
}

/** A streaming response may last 15 minutes; the SSE framing ends cleanly before that. No door's invocation lasts longer. */
export const STREAM_TIMEOUT = Duration.minutes(15);
/** API Gateway's default cap for a buffered integration. */
const BUFFERED_TIMEOUT = Duration.seconds(29);

type Transfer = 'stream' | 'buffered';
type Access = 'authenticated' | 'public';

/**
 * The doors on API Gateway (REST): every route is served by the same Hono app, from one of two
 * functions. Routes that answer with a stream (AG-UI runs and event tails, A2A JSON-RPC, where
 * SendStreamingMessage shares the path with the rest, and the A2A REST binding, where
 * `message:stream` and `:subscribe` share the greedy path) use response streaming, which also
 * lifts the 29 s cap off a blocking SendMessage. The rest is buffered.
 */
export class DoorsApi extends Construct {
  readonly api: apigw.RestApi;
  readonly streaming: GatewayFunction;
  readonly buffered: GatewayFunction;
  readonly apiKey?: apigw.IApiKey;
  readonly domain?: apigw.DomainName;
  /** The base URL callers use, ending in `/`: the custom domain when there is one, else the stage's URL. */
  readonly url: string;
  private readonly streamingIntegration: apigw.LambdaIntegration;
  private readonly bufferedIntegration: apigw.LambdaIntegration;
  private readonly authenticated: apigw.MethodOptions;

  constructor(scope: Construct, id: string, props: DoorsApiProps) {
    super(scope, id);
    const environment = {
      ...props.environment,
      [ENV.apiAuth]: props.auth.mode,
      [ENV.dispatcherFunction]: props.dispatcher.functionName,
      [ENV.adminTokenSecretArn]: props.adminToken.secretArn,
      ...(props.consoleReadToken ? { [ENV.consoleReadTokenSecretArn]: props.consoleReadToken.secretArn } : {}),
    };
    // The admin token is read through the extension, which caches it, rather than an SDK client per door.
    const paramsAndSecrets = lambda.ParamsAndSecretsLayerVersion.fromVersion(lambda.ParamsAndSecretsVersions.V1_0_103, {
      cacheEnabled: true,
      logLevel: lambda.ParamsAndSecretsLogLevel.WARN,
    });
    this.streaming = new GatewayFunction(this, 'Streaming', {
      handler: 'doors-stream',
      description: 'funduq doors: AG-UI and A2A routes that answer with a stream',
      timeout: STREAM_TIMEOUT,
      logRetention: props.logRetention,
      environment,
      paramsAndSecrets,
    });
    this.buffered = new GatewayFunction(this, 'Buffered', {
      handler: 'doors',
      description: 'funduq doors: threads, agents, admin, agent cards, health',
      timeout: BUFFERED_TIMEOUT.plus(Duration.seconds(1)),
      logRetention: props.logRetention,
      environment,
      paramsAndSecrets,
    });
    // The streaming doors relay the runs they admit on idle threads: they invoke agents and, when a
    // run settles with asks, arm its ask timer, as the dispatcher does.
    if (props.relayAtDoor) {
      grantAgentInvoke(this.streaming.function, props.agentFunctions);
      props.askWaiter.grantArm(this.streaming.function);
    }
    for (const door of [this.streaming.function, this.buffered.function]) {
      props.store.grantRecord(door);
      props.threadQueue.grantSend(door);
      props.dispatcher.grantInvoke(door);
      props.askWaiter.grantDisarm(door);
      // The extension calls GetSecretValue with the function's role, and nothing else.
      door.addToRolePolicy(
        new iam.PolicyStatement({
          actions: ['secretsmanager:GetSecretValue'],
          resources: [props.adminToken, ...(props.consoleReadToken ? [props.consoleReadToken] : [])].map((secret) => secret.secretFullArn ?? `${secret.secretArn}-??????`),
        }),
      );
    }

    this.api = new apigw.RestApi(this, 'Api', {
      restApiName: 'funduq',
      description: 'funduq: AG-UI and A2A doors in front of agent providers',
      // A regional endpoint keeps a stream open while idle for up to 5 minutes; an
      // edge-optimized one drops it after 30 s (API Gateway response streaming considerations).
      endpointConfiguration: { types: [apigw.EndpointType.REGIONAL] },
      // The account-wide CloudWatch role is an account setting, not this stack's to own.
      cloudWatchRole: false,
      deployOptions: {
        stageName: props.stageName,
        metricsEnabled: true,
      },
    });
    this.streamingIntegration = new apigw.LambdaIntegration(this.streaming.function, {
      responseTransferMode: apigw.ResponseTransferMode.STREAM,
      timeout: STREAM_TIMEOUT,
      // One resource-policy statement per function rather than two per method (the policy is capped at 20 KB).
      scopePermissionToMethod: false,
    });
    this.bufferedIntegration = new apigw.LambdaIntegration(this.buffered.function, {
      timeout: BUFFERED_TIMEOUT,
      scopePermissionToMethod: false,
    });
    this.authenticated = this.authentication(props.auth);

    this.route('POST', '/agui/{agentId}', 'stream');
    this.route('GET', '/agui/{agentId}/runs/{runId}/events', 'stream');
    this.route('POST', '/a2a/{agentId}', 'stream');
    this.route('ANY', '/a2a/{agentId}/rest/{proxy+}', 'stream');
    // The agent card is how a caller learns which credential to bring; health is for probes.
    this.route('GET', '/a2a/{agentId}/.well-known/agent-card.json', 'buffered', 'public');
    this.route('GET', '/healthz', 'buffered', 'public');
    this.route('GET', '/readyz', 'buffered', 'public');
    // Everything else (threads, agents, admin, cancel, …) is buffered. Each branch that holds a
    // streaming route gets its own greedy fallback, so no path depends on how API Gateway
    // backtracks from a literal segment to an ancestor's {proxy+}.
    this.route('ANY', '/{proxy+}', 'buffered');
    this.route('ANY', '/agui/{agentId}/{proxy+}', 'buffered');
    this.route('ANY', '/agui/{agentId}/runs/{runId}/{proxy+}', 'buffered');
    this.route('ANY', '/a2a/{agentId}/{proxy+}', 'buffered');
    // The console signs its operators in itself (a browser brings no API key or JWT): public to API
    // Gateway, refused by the doors without a session. A run page follows its run as a stream.
    this.route('ANY', '/console', 'buffered', 'public');
    this.route('ANY', '/console/{proxy+}', 'buffered', 'public');
    this.route('GET', '/console/tenants/{tenant}/runs/{runId}/stream', 'stream', 'public');
    this.route('ANY', '/console/tenants/{tenant}/runs/{runId}/{proxy+}', 'buffered', 'public');
    // The usage export can be months of records: a buffered Lambda response holds 6 MB, a stream
    // far more. Its resource and each one above it answer every other method and path buffered.
    this.route('GET', '/admin/usage/export', 'stream');
    for (const path of ['/admin/{proxy+}', '/admin/usage', '/admin/usage/{proxy+}', '/admin/usage/export']) this.route('ANY', path, 'buffered');

    if (props.auth.mode === 'apiKey') {
      const plan = this.api.addUsagePlan('UsagePlan', {
        name: 'funduq',
        description: 'funduq callers: the key in the x-api-key header',
        apiStages: [{ api: this.api, stage: this.api.deploymentStage }],
      });
      // The key's value is generated by API Gateway and never appears in the template.
      this.apiKey = this.api.addApiKey('ApiKey', { description: 'funduq caller key' });
      plan.addApiKey(this.apiKey);
    }

    // Built from the API's id and the stage's name as given, not from `api.url`: that refers to the
    // stage, which depends on the deployment, which depends on the methods, which depend on these
    // functions — a function's environment referring to it would be a circular dependency.
    const stack = Stack.of(this);
    this.url = props.domain
      ? `https://${props.domain.domainName}/`
      : `https://${this.api.restApiId}.execute-api.${stack.region}.${stack.urlSuffix}/${props.stageName}/`;
    for (const door of [this.streaming.function, this.buffered.function]) door.addEnvironment(ENV.publicUrl, this.url);

    if (props.domain) {
      this.domain = this.api.addDomainName('Domain', {
        domainName: props.domain.domainName,
        certificate: props.domain.certificate,
        endpointType: apigw.EndpointType.REGIONAL,
        securityPolicy: apigw.SecurityPolicy.TLS_1_2,
      });
    }
  }

  private authentication(auth: ApiAuth): apigw.MethodOptions {
    switch (auth.mode) {
      case 'none':
        return {};
      case 'apiKey':
        return { apiKeyRequired: true };
      case 'jwt':
        return {
          authorizationType: apigw.AuthorizationType.COGNITO,
          authorizer: new apigw.CognitoUserPoolsAuthorizer(this, 'Authorizer', { cognitoUserPools: [auth.userPool] }),
        };
    }
  }

  private route(method: string, path: string, transfer: Transfer, access: Access = 'authenticated'): apigw.Method {
    const integration = transfer === 'stream' ? this.streamingIntegration : this.bufferedIntegration;
    return this.api.root
      .resourceForPath(path)
      .addMethod(method, integration, access === 'public' ? {} : this.authenticated);
  }
}
