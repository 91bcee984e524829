import type { LatencyModel } from './latency.js';
import { createSocket, type Socket } from 'node:dgram';
import { HttpAgent } from '@ag-ui/client';
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory, type Client } from '@a2a-js/sdk/client';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { ApiGateway } from './api-gateway.js';
import { AwsEndpoint, STATES_ACCESS_KEY, type CallHook } from './aws-endpoint.js';
import { BoxClock } from './clock.js';
import { DynamoDbService } from './dynamodb.js';
import { EventSources } from './event-sources.js';
import { Iam } from './iam.js';
import { LambdaService, type ReturnHook } from './lambda.js';
import { Schedules } from './schedules.js';
import { CloudWatchTraces } from './cloudwatch-traces.js';
import { SecretsManagerService } from './secrets-manager.js';
import { SqsService } from './sqs.js';
import { StepFunctionsService } from './step-functions.js';
import { synthesize } from './synth.js';
import { WebSocketApi } from './websocket-api.js';
import { Deployment } from './template.js';
import { DynamoStore, createDynamoStore } from '../../../lambdas/adapters/aws/dynamodb/store/store.js';
import type { TableNames } from '../../../lambdas/adapters/aws/dynamodb/tables.js';
import type { Run, RunLease } from '../../../lambdas/core/model.js';
import { dynamoSnapshot, type RecordSnapshot } from '../record-invariants.js';
import { recordProjections } from '../../../lambdas/core/a2a/task-state.js';

/** Lambda keeps this much of an account's concurrency unreserved (PutFunctionConcurrency). */
const UNRESERVED_MINIMUM = 100;

/**
 * The context every box is synthesized with: the stack's defaults, and push targets allowed on
 * loopback (the tests' receivers listen there).
 */
export const BOX_CONTEXT = { pushToLoopbackForTests: 'true', consoleReadToken: 'true' };

export interface BoxOptions {
  /** CDK context for the synthesis (`cdk synth -c key=value`); `BOX_CONTEXT` by default. */
  context?: Record<string, string>;
  /** The account's Lambda concurrency quota (a new account's default is 10; an established one's 1,000). */
  accountConcurrency?: number;
  /** A region's response times (`REGION_LATENCY`): every AWS call, queue hand-off and API request waits its share. Absent, all at once. */
  latency?: LatencyModel;
}

/**
 * funduq as `cdk deploy` would deploy it, on this machine: the synthesized template and its bundled
 * assets, with API Gateway, Lambda (Node 22), DynamoDB (dynalite), SQS FIFO, Step Functions, EventBridge's
 * schedules and the secrets extension standing in for AWS, and every AWS call checked against the template's IAM.
 */
export class AwsBox {
  private constructor(
    readonly deployment: Deployment,
    readonly clock: BoxClock,
    readonly endpoint: AwsEndpoint,
    readonly iam: Iam,
    readonly dynamodb: DynamoDbService,
    readonly sqs: SqsService,
    readonly stepFunctions: StepFunctionsService,
    readonly lambda: LambdaService,
    readonly eventSources: EventSources,
    readonly schedules: Schedules,
    readonly api: ApiGateway,
    /** The provider link's WebSocket API. */
    readonly link: WebSocketApi,
    private readonly xray: Socket,
  ) {}

  /** CloudWatch's OTLP traces endpoint: what the functions exported there (`otlpCloudWatch`). */
  get cloudWatchTraces(): CloudWatchTraces {
    return this.endpoint.services.xray as CloudWatchTraces;
  }

  /** Synthesizes (or reuses the synthesis of) the stack and deploys it into a new box. */
  static async start(options: BoxOptions = {}): Promise<AwsBox> {
    const dir = await synthesize(options.context ?? BOX_CONTEXT);
    return AwsBox.deploy(dir, options);
  }

  static async deploy(dir: string, options: BoxOptions = {}): Promise<AwsBox> {
    const clock = new BoxClock();
    const endpoint = new AwsEndpoint(() => clock.now());
    endpoint.latency = options.latency;
    await endpoint.listen();
    const deployment = await Deployment.load(dir, { aws: endpoint.url });
    checkDeployable(deployment, options.accountConcurrency ?? 1000);
    const iam = new Iam(deployment);
    endpoint.createSecrets(deployment);
    const xray = createSocket('udp4');
    await new Promise<void>((resolve) => xray.bind(0, '127.0.0.1', resolve));
    const dynamodb = await DynamoDbService.start(deployment, clock);
    const sqs = new SqsService(deployment, clock);
    const stepFunctions = new StepFunctionsService(deployment, clock);
    const lambda = new LambdaService(deployment, clock, endpoint.url, endpoint.extensionUrl, `127.0.0.1:${xray.address().port}`, options.accountConcurrency ?? 1000);
    const link = new WebSocketApi(deployment, lambda, iam);
    const callback = link.callbackUrl(endpoint.url);
    lambda.rewrites.set(callback.public, callback.box);
    Object.assign(endpoint, {
      services: { dynamodb, sqs, states: stepFunctions, secretsmanager: new SecretsManagerService(endpoint.secrets, () => clock.now()), 'execute-api': link, xray: new CloudWatchTraces() },
      iam,
      lambda,
      stateMachineCaller: () => stepFunctions.caller,
    });
    await stepFunctions.start(endpoint.url, STATES_ACCESS_KEY);
    const eventSources = new EventSources(deployment, lambda, sqs, dynamodb, iam, clock);
    eventSources.latency = options.latency;
    eventSources.start();
    const schedules = new Schedules(deployment, lambda, clock);
    schedules.start();
    const api = new ApiGateway(deployment, lambda, iam);
    api.latency = options.latency;
    await api.listen();
    await link.listen();
    return new AwsBox(deployment, clock, endpoint, iam, dynamodb, sqs, stepFunctions, lambda, eventSources, schedules, api, link, xray);
  }

  /** The stage's base URL, without a trailing slash: `${url}/agui/demo`. */
  get url(): string {
    return this.api.url;
  }

  get apiKey(): string {
    const key = this.api.apiKey;
    if (!key) throw new Error('the stack has no API key (apiAuth is not apiKey)');
    return key;
  }

  /** A secret's value, by its name, its ARN or its construct's id (`ConsoleReadToken`); the admin token's when none is given. */
  secret(nameOrArn?: string): string {
    const secrets = [...this.endpoint.secrets.values()];
    const found = secrets.find((s) => (nameOrArn === undefined ? s.id.startsWith('AdminToken') : s.arn === nameOrArn || s.name === nameOrArn || s.id.startsWith(nameOrArn)));
    if (!found) throw new Error(`no secret ${nameOrArn}`);
    return found.value;
  }

  /** Decides, before each AWS call is served, whether the calling environment ends there. */
  set hook(hook: CallHook) {
    this.endpoint.hook = hook;
  }

  /** Decides, as each invocation returns, whether its environment ends there instead (after its last AWS call). */
  set atReturn(hook: ReturnHook) {
    this.lambda.atReturn = hook;
  }

  /**
   * `fetch` as a caller on the internet would see the API: the stack's public host name (the URLs
   * of agent cards) answered by the box, and the API key sent unless the request carries one.
   */
  readonly fetch: typeof fetch = (input, init) => {
    const request = new Request(input, init);
    const url = new URL(request.url);
    const target = url.host === this.api.publicHost ? new URL(`${url.pathname}${url.search}`, this.url.replace(/\/[^/]+$/, '/')) : url;
    const headers = new Headers(request.headers);
    if (!headers.has('x-api-key') && this.api.apiKey) headers.set('x-api-key', this.api.apiKey);
    return fetch(target, { method: request.method, headers, body: request.body, signal: request.signal, duplex: 'half' } as RequestInit);
  };

  /** The stock AG-UI client for one thread of an agent, with the API key. */
  agui(threadId: string, agentId = 'demo'): HttpAgent {
    return new HttpAgent({ url: `${this.url}/agui/${agentId}`, threadId, headers: { 'x-api-key': this.apiKey } });
  }

  /** The stock A2A client for an agent, from its card, on the binding asked for. */
  a2a(binding: 'JSONRPC' | 'HTTP+JSON', agentId = 'demo'): Promise<Client> {
    const fetchImpl = this.fetch;
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        preferredTransports: [binding],
        transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
      }),
    );
    return factory.createFromUrl(`${this.url}/a2a/${agentId}/`);
  }

  /** A caller's request to the API (the key is added). */
  request(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
    return this.fetch(`${this.url}${path}`, {
      method,
      headers: { 'content-type': 'application/json', ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  }

  /** The admin routes, with the token the stack keeps in Secrets Manager. */
  async admin(method: string, path: string, body?: unknown): Promise<Response> {
    return this.fetch(`${this.url}/admin/${path}`, {
      method,
      headers: { authorization: `Bearer ${this.secret()}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  }

  /**
   * What the box holds now, one line each: every environment and the invocations not returned,
   * the queues' messages (in flight or waiting) and the last AWS calls. For a test whose wait ran
   * out, to say where things stood.
   */
  holding(): string[] {
    const now = this.clock.now();
    const messages = [...this.sqs.queues.values()].flatMap((queue) =>
      queue.messages.map((m) => `${queue.name}: ${m.body.slice(0, 120)} (received ${m.receiveCount}×, ${m.invisibleUntil > now ? 'in flight' : 'waiting'})`),
    );
    const calls = this.endpoint.calls.slice(-12).map((c) => `${c.environment ?? c.caller} ${c.action}${c.duringInvocation ? '' : ' (after its invocation)'}`);
    return [...this.lambda.holding(), ...messages, 'last AWS calls:', ...calls];
  }

  /** A run as the runs table holds it now (the DynamoDB adapter's consistent read, past IAM), or undefined. */
  run(runId: string): Promise<Run | undefined> {
    return createDynamoStore({ client: this.dynamodb.client, tables: this.tables(), projections: recordProjections }).runs.get(runId);
  }

  /** A run's lease as the runs table holds it now (a dispatcher's, or the door's that relays it), or undefined. */
  lease(runId: string): Promise<RunLease | undefined> {
    return createDynamoStore({ client: this.dynamodb.client, tables: this.tables(), projections: recordProjections }).leases.get(runId);
  }

  /** The record as the tables hold it now, for `recordBreaks`. */
  async record(): Promise<RecordSnapshot> {
    return dynamoSnapshot(this.dynamodb.client, this.tables());
  }

  /** The deployed tables' names: the runs table is keyed by `pk`, the events table by `seq`. */
  private tables(): TableNames {
    const tables = [...this.dynamodb.tables.values()];
    const named = (key: string) => tables.find((table) => table.keys.includes(key))!.name;
    return { runs: named('pk'), runEvents: named('seq') };
  }

  async close(): Promise<void> {
    this.eventSources.close();
    this.schedules.close();
    this.api.close();
    this.link.close();
    await this.lambda.close();
    this.stepFunctions.close();
    this.endpoint.close();
    this.clock.close();
    this.xray.close();
    await this.dynamodb.close();
  }
}

/** What CloudFormation or Lambda would refuse at deploy, with their messages. */
function checkDeployable(deployment: Deployment, accountConcurrency: number): void {
  const reserved = deployment
    .resources('AWS::Lambda::Function')
    .reduce((sum, [, fn]) => sum + Number(fn.Properties?.ReservedConcurrentExecutions ?? 0), 0);
  if (reserved > 0 && accountConcurrency - reserved < UNRESERVED_MINIMUM) {
    throw new Error(
      `Resource handler returned message: "Specified ReservedConcurrentExecutions for function decreases account's UnreservedConcurrentExecution below its minimum value of [${UNRESERVED_MINIMUM}]." (the account's concurrency is ${accountConcurrency}, the stack reserves ${reserved})`,
    );
  }
  for (const [id, mapping] of deployment.resources('AWS::Lambda::EventSourceMapping')) {
    const props = deployment.resolve(mapping.Properties);
    if (!String(props.EventSourceArn).startsWith('arn:aws:sqs:')) continue;
    const [, queue] = deployment.resources('AWS::SQS::Queue').find(([queueId]) => deployment.attribute(queueId, 'Arn') === props.EventSourceArn)!;
    const [, fn] = deployment.resources('AWS::Lambda::Function').find(([fnId]) => deployment.physicalName(fnId) === props.FunctionName)!;
    const visibility = Number(queue.Properties?.VisibilityTimeout ?? 30);
    const timeout = Number(fn.Properties?.Timeout ?? 3);
    if (visibility < timeout) throw new Error(`${id}: Queue visibility timeout: ${visibility} seconds is less than Function timeout: ${timeout} seconds`);
  }
}

/**
 * One box for the test file: started before its tests (synthesizing on the first use of a set of
 * sources), closed after them. Each test fails if a function made an AWS call its policies do not
 * allow, naming the function, the action and the resource.
 */
export function useAwsBox(options: BoxOptions = {}): { readonly box: AwsBox } {
  let box: AwsBox | undefined;
  beforeAll(async () => {
    box = await AwsBox.start(options);
  }, 300_000);
  afterAll(async () => {
    // FUNDUQ_BOX_LOGS=1 prints what the functions logged, for a look at a failing run.
    if (process.env.FUNDUQ_BOX_LOGS && box) for (const [fn, lines] of box.lambda.logs) console.log(`--- ${fn}\n${lines.join('\n')}`);
    await box?.close();
  });
  afterEach(() => {
    const denials = box?.iam.denials.splice(0) ?? [];
    if (denials.length > 0) {
      throw new Error(`AWS calls the template's IAM does not allow:\n${denials.map((d) => `  ${d.caller}: ${d.action} on ${d.resource}`).join('\n')}`);
    }
  });
  return {
    get box(): AwsBox {
      if (!box) throw new Error('useAwsBox(): the box is not started');
      return box;
    },
  };
}
