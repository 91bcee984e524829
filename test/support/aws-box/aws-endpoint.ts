import { pause, type LatencyModel } from './latency.js';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readBody } from './body.js';
import type { Caller, Iam } from './iam.js';
import { TooManyRequests, type Environment, type LambdaService } from './lambda.js';
import type { Secret } from './secrets-manager.js';
import type { Deployment } from './template.js';

/** One AWS API request, as the box's services see it. */
export interface AwsCall {
  service: string;
  operation: string;
  /** The HTTP method (the REST-style APIs, `@connections`, name their operation by it). */
  method: string;
  body: unknown;
  raw: string;
  headers: Record<string, string | undefined>;
  path: string;
  caller: Caller;
  environment?: Environment;
}

export interface Reply {
  status: number;
  body: string;
  headers?: Record<string, string>;
}

export interface AwsService {
  /** The actions and resources IAM is asked about for this call. */
  authorize(call: AwsCall): Array<{ action: string; resource: string }>;
  handle(call: AwsCall): Promise<Reply>;
}

/** What the hook is told about each AWS call, before it is served. */
export interface ObservedCall {
  caller: string;
  /** The Lambda environment that made it (absent: the state machine). */
  environment?: string;
  /** Its number among the calls of the environment's current invocation (1, 2, …); 0 outside one. */
  n: number;
  /** Whether the environment was running an invocation when it called (false: work left after one returned). */
  duringInvocation: boolean;
  action: string;
  resource: string;
  at: number;
}

/**
 * What to do with a call: serve it, or end the calling function's environment there, as a crash
 * at that point would (the request is never answered); a promise holds the call until it settles.
 */
export type CallHook = (call: ObservedCall) => 'serve' | 'kill' | Promise<'serve' | 'kill'>;

export const STATES_ACCESS_KEY = 'ASIABOXSTATES0000001';

/**
 * The AWS API endpoint every function's SDK clients are pointed at (and the extension's
 * Secrets Manager calls go through): the caller is told from its credentials (one access key per
 * environment), each call is checked against the caller's policies, counted, offered to the hook,
 * then served by DynamoDB, SQS, Step Functions, Secrets Manager or Lambda.
 */
export class AwsEndpoint {
  readonly calls: ObservedCall[] = [];
  hook: CallHook = () => 'serve';
  private server: Server | undefined;
  url = '';
  extensionUrl = '';
  private extension: Server | undefined;
  readonly secrets = new Map<string, Secret>();

  /** Set once the template is loaded (queue URLs in it name this endpoint, so it listens first). */
  services: Record<string, AwsService> = {};
  iam!: Iam;
  lambda!: LambdaService;
  stateMachineCaller!: () => Caller;

  /** How long each call waits before it is served (`BoxOptions.latency`); none, at once. */
  latency: LatencyModel | undefined;

  constructor(private readonly now: () => number) {}

  async listen(): Promise<void> {
    this.server = createServer((request, response) => void this.serve(request, response));
    this.extension = createServer((request, response) => void this.serveExtension(request, response));
    await Promise.all([listen(this.server), listen(this.extension)]);
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    this.extensionUrl = `http://127.0.0.1:${(this.extension.address() as AddressInfo).port}`;
  }

  /** The template's secrets, generated as Secrets Manager would (GenerateSecretString). */
  createSecrets(deployment: Deployment): void {
    for (const [id, resource] of deployment.resources('AWS::SecretsManager::Secret')) {
      const generate = resource.Properties?.GenerateSecretString ?? {};
      const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
      const value = resource.Properties?.SecretString ?? [...randomBytes(generate.PasswordLength ?? 32)].map((b) => alphabet[b % alphabet.length]).join('');
      const arn = deployment.attribute(id, 'Arn');
      this.secrets.set(arn, { id, arn, name: deployment.physicalName(id), value });
    }
  }

  close(): void {
    this.server?.closeAllConnections();
    this.server?.close();
    this.extension?.closeAllConnections();
    this.extension?.close();
  }

  private identify(headers: IncomingMessage['headers']): { caller: Caller; environment?: Environment } | undefined {
    const credential = /Credential=([^/]+)\//.exec(String(headers.authorization ?? ''))?.[1];
    if (!credential) return undefined;
    if (credential === STATES_ACCESS_KEY) return { caller: this.stateMachineCaller() };
    const environment = this.lambda.environmentOf(credential);
    return environment ? { caller: environment.caller, environment } : undefined;
  }

  /** Counts, checks and offers a call to the hook; false when the caller's environment ended there. */
  private async admit(who: { caller: Caller; environment?: Environment }, checks: Array<{ action: string; resource: string }>): Promise<{ denied?: string; killed?: boolean }> {
    const { environment } = who;
    if (environment) environment.requests += 1;
    for (const { action, resource } of checks) {
      const observed: ObservedCall = {
        caller: who.caller.name,
        environment: environment?.id,
        n: environment?.current ? environment.requests : 0,
        duringInvocation: environment ? environment.current !== undefined : true,
        action,
        resource,
        at: this.now(),
      };
      this.calls.push(observed);
      if (environment && (await this.hook(observed)) === 'kill') {
        void environment.kill(`killed by the box at its AWS call ${observed.n} (${action})`);
        return { killed: true };
      }
    }
    for (const { action, resource } of checks) {
      const denied = this.iam.check(who.caller, action, resource);
      if (denied) return { denied };
    }
    return {};
  }

  private async serve(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const raw = (await readBody(request)).toString('utf8');
    const who = this.identify(request.headers);
    if (!who || who.environment?.state === 'dead') {
      response.destroy();
      return;
    }
    const scope = /Credential=[^/]+\/\d{8}\/[^/]+\/([^/]+)\//.exec(String(request.headers.authorization))?.[1] ?? '';
    const target = String(request.headers['x-amz-target'] ?? '');
    const call: AwsCall = {
      service: scope,
      operation: target.split('.')[1] ?? '',
      body: raw ? safeJson(raw) : {},
      raw,
      headers: request.headers as Record<string, string | undefined>,
      path: request.url ?? '/',
      method: request.method ?? 'GET',
      ...who,
    };
    // A region's response time, when the box models one (the call is served after it, as a region's would be).
    await pause(this.latency?.call(scope, call.operation));
    if (scope === 'lambda') return this.serveLambda(call, response);
    const service = this.services[scope];
    if (!service) return send(response, { status: 400, body: JSON.stringify({ __type: 'UnknownService', message: `the box serves no ${scope}` }) });
    const admitted = await this.admit(who, service.authorize(call));
    if (admitted.killed) return void response.destroy();
    if (admitted.denied) {
      const type = scope === 'sqs' ? 'com.amazonaws.sqs#AccessDenied' : 'AccessDeniedException';
      return send(response, {
        status: 400,
        body: JSON.stringify({ __type: type, message: admitted.denied, Message: admitted.denied }),
        headers: { 'content-type': 'application/x-amz-json-1.0', ...(scope === 'sqs' ? { 'x-amzn-query-error': 'AccessDenied;Sender' } : {}) },
      });
    }
    try {
      send(response, await service.handle(call));
    } catch (error) {
      send(response, { status: 500, body: JSON.stringify({ __type: 'InternalFailure', message: (error as Error).message }) });
    }
  }

  /** Lambda's Invoke (RequestResponse, Event, DryRun). */
  private async serveLambda(call: AwsCall, response: ServerResponse): Promise<void> {
    const url = new URL(call.path, 'http://box');
    const match = /^\/2015-03-31\/functions\/([^/]+)\/invocations$/.exec(url.pathname);
    if (!match) return send(response, lambdaError(400, 'InvalidRequestContentException', `the box's Lambda does not serve ${url.pathname}`));
    const lambda = this.lambda;
    let fn;
    try {
      fn = lambda.fn(decodeURIComponent(match[1]));
    } catch (error) {
      return send(response, lambdaError(404, 'ResourceNotFoundException', (error as Error).message));
    }
    const qualifier = url.searchParams.get('Qualifier');
    const admitted = await this.admit(call, [{ action: 'lambda:InvokeFunction', resource: qualifier ? `${fn.arn}:${qualifier}` : fn.arn }]);
    if (admitted.killed) return void response.destroy();
    if (admitted.denied) return send(response, lambdaError(403, 'AccessDeniedException', admitted.denied));
    const type = call.headers['x-amz-invocation-type'] ?? 'RequestResponse';
    const event = call.raw ? JSON.parse(call.raw) : {};
    if (type === 'DryRun') return send(response, { status: 204, body: '' });
    if (type === 'Event') {
      lambda.invokeAsync(fn.handler, event);
      return send(response, { status: 202, body: '' });
    }
    try {
      const outcome = await lambda.invoke(fn.handler, event);
      send(response, {
        status: 200,
        body: outcome.payload,
        headers: { 'content-type': 'application/json', 'x-amz-executed-version': '$LATEST', ...(outcome.ok ? {} : { 'x-amz-function-error': 'Unhandled' }) },
      });
    } catch (error) {
      if (error instanceof TooManyRequests) return send(response, lambdaError(429, 'TooManyRequestsException', error.message));
      send(response, lambdaError(500, 'ServiceException', (error as Error).message));
    }
  }

  /** The AWS Parameters and Secrets extension's HTTP API, as the layer serves it in the function's sandbox. */
  private async serveExtension(request: IncomingMessage, response: ServerResponse): Promise<void> {
    await readBody(request);
    const url = new URL(request.url ?? '/', 'http://localhost');
    const token = String(request.headers['x-aws-parameters-secrets-token'] ?? '');
    const environment = this.lambda.environmentBySession(token);
    if (!environment) return send(response, { status: 401, body: 'a valid X-Aws-Parameters-Secrets-Token header is required' });
    if (url.pathname !== '/secretsmanager/get') return send(response, { status: 404, body: 'not found' });
    const secretId = url.searchParams.get('secretId') ?? '';
    const secret = [...this.secrets.values()].find((s) => s.arn === secretId || s.name === secretId);
    const admitted = await this.admit({ caller: environment.caller, environment }, [{ action: 'secretsmanager:GetSecretValue', resource: secret?.arn ?? secretId }]);
    if (admitted.killed) return void response.destroy();
    if (admitted.denied) return send(response, { status: 400, body: JSON.stringify({ __type: 'AccessDeniedException', message: admitted.denied }) });
    if (!secret) return send(response, { status: 400, body: JSON.stringify({ __type: 'ResourceNotFoundException', message: "Secrets Manager can't find the specified secret." }) });
    send(response, {
      status: 200,
      body: JSON.stringify({ ARN: secret.arn, Name: secret.name, SecretString: secret.value, VersionId: 'v1', VersionStages: ['AWSCURRENT'], CreatedDate: new Date(this.now()).toISOString() }),
      headers: { 'content-type': 'application/json' },
    });
  }
}

function listen(server: Server): Promise<void> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
}


function safeJson(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return {};
  }
}

function send(response: ServerResponse, reply: Reply): void {
  if (response.destroyed) return;
  response.writeHead(reply.status, { 'content-type': 'application/x-amz-json-1.0', 'x-amzn-requestid': randomBytes(8).toString('hex'), ...reply.headers });
  response.end(reply.body);
}

function lambdaError(status: number, type: string, message: string): Reply {
  return { status, body: JSON.stringify({ Type: 'User', message }), headers: { 'content-type': 'application/json', 'x-amzn-errortype': type } };
}
