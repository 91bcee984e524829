import { pause, type LatencyModel } from './latency.js';
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readBody } from './body.js';
import type { Iam } from './iam.js';
import type { LambdaService } from './lambda.js';
import { ACCOUNT, REGION, type Deployment } from './template.js';

const PRELUDE_TYPE = 'application/vnd.awslambda.http-integration-response';
const DELIMITER = Buffer.alloc(8);

interface Method {
  resourcePath: string;
  segments: string[];
  httpMethod: string;
  apiKeyRequired: boolean;
  authorization: string;
  functionArn: string;
  streaming: boolean;
  timeoutMs: number;
}

/**
 * API Gateway (REST, regional) in front of the door functions, built from the template: the
 * resources and methods, API keys through their usage plans, the functions' resource policies,
 * the Lambda proxy event, and both integrations: buffered (the proxy result) and streaming (the
 * response stream's prelude, eight NUL bytes, then the body, sent on as it comes). A caller that
 * goes away ends the function's response stream.
 */
export class ApiGateway {
  readonly methods: Method[] = [];
  /** What API Gateway adds before a request reaches its function (`BoxOptions.latency`); none, at once. */
  latency: LatencyModel | undefined;
  readonly apiId: string;
  readonly stage: string;
  readonly apiKeys = new Map<string, string>();
  /** The host name the stack's public URL names; the box answers for it (see `BoxFetch`). */
  readonly publicHost: string;
  private server: Server | undefined;
  url = '';
  private readonly permissions: Array<{ functionArn: string; sourceArn: string }> = [];

  constructor(
    private readonly deployment: Deployment,
    private readonly lambda: LambdaService,
    private readonly iam: Iam,
  ) {
    const [[apiLogicalId]] = deployment.resources('AWS::ApiGateway::RestApi');
    this.apiId = deployment.ref(apiLogicalId);
    this.publicHost = `${this.apiId}.execute-api.${REGION}.amazonaws.com`;
    const [[, stage]] = deployment.resources('AWS::ApiGateway::Stage');
    this.stage = stage.Properties!.StageName;
    const resources = new Map(deployment.resources('AWS::ApiGateway::Resource'));
    const pathOf = (parent: unknown): string => {
      const ref = (parent as { Ref?: string }).Ref;
      if (!ref) return '';
      const resource = resources.get(ref)!;
      return `${pathOf(resource.Properties!.ParentId)}/${resource.Properties!.PathPart}`;
    };
    for (const [, method] of deployment.resources('AWS::ApiGateway::Method')) {
      const props = method.Properties!;
      const resourcePath = pathOf(props.ResourceId) || '/';
      const integration = deployment.resolve(props.Integration);
      this.methods.push({
        resourcePath,
        segments: resourcePath.split('/').filter(Boolean),
        httpMethod: props.HttpMethod,
        apiKeyRequired: props.ApiKeyRequired === true,
        authorization: props.AuthorizationType ?? 'NONE',
        functionArn: /functions\/(arn:aws:lambda:[^/]+)\//.exec(integration.Uri)![1],
        streaming: integration.ResponseTransferMode === 'STREAM',
        timeoutMs: integration.TimeoutInMillis ?? 29_000,
      });
    }
    const plans = new Map(deployment.resources('AWS::ApiGateway::UsagePlan'));
    for (const [, planKey] of deployment.resources('AWS::ApiGateway::UsagePlanKey')) {
      const plan = plans.get(planKey.Properties!.UsagePlanId.Ref)!;
      const onStage = (plan.Properties!.ApiStages as Array<{ Stage: unknown }>).some((s) => deployment.resolve(s.Stage) === this.stage);
      const keyId = deployment.resolve(planKey.Properties!.KeyId);
      if (onStage) this.apiKeys.set(`box-${randomBytes(12).toString('hex')}`, keyId);
    }
    for (const [, permission] of deployment.resources('AWS::Lambda::Permission')) {
      const props = deployment.resolve(permission.Properties);
      if (props.Principal === 'apigateway.amazonaws.com' && props.Action === 'lambda:InvokeFunction') {
        this.permissions.push({ functionArn: props.FunctionName, sourceArn: props.SourceArn });
      }
    }
  }

  /** A key callers may send as x-api-key (the value API Gateway generated for the stack's key). */
  get apiKey(): string | undefined {
    return [...this.apiKeys.keys()][0];
  }

  async listen(): Promise<void> {
    this.server = createServer((request, response) => void this.serve(request, response));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/${this.stage}`;
  }

  close(): void {
    this.server?.closeAllConnections();
    this.server?.close();
  }

  /** The method API Gateway would pick: literal segments before path variables before a greedy variable. */
  route(httpMethod: string, segments: string[]): { method: Method; parameters: Record<string, string> } | undefined {
    const candidates = this.methods.filter((m) => m.httpMethod === httpMethod || m.httpMethod === 'ANY');
    const scored = candidates
      .map((method) => ({ method, parameters: match(method.segments, segments) }))
      .filter((c): c is { method: Method; parameters: Record<string, string> } => c.parameters !== undefined)
      .sort((a, b) => specificity(b.method.segments).localeCompare(specificity(a.method.segments)) || (a.method.httpMethod === 'ANY' ? 1 : -1));
    return scored[0];
  }

  private async serve(request: IncomingMessage, response: ServerResponse): Promise<void> {
    await pause(this.latency?.apiGatewayMs);
    const url = new URL(request.url ?? '/', 'http://box');
    const body = await readBody(request);
    const segments = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
    if (segments[0] !== this.stage) return json(response, 403, { message: 'Forbidden' });
    // The path as the caller sent it, less the stage.
    const path = url.pathname.slice(this.stage.length + 1) || '/';
    const routed = this.route(request.method ?? 'GET', segments.slice(1));
    if (!routed) return json(response, 403, { message: 'Missing Authentication Token' });
    const { method, parameters } = routed;
    const apiKey = header(request, 'x-api-key');
    const apiKeyId = apiKey ? this.apiKeys.get(apiKey) : undefined;
    if (method.apiKeyRequired && !apiKeyId) return json(response, 403, { message: 'Forbidden' });
    if (method.authorization === 'COGNITO_USER_POOLS') return json(response, 401, { message: 'Unauthorized' });
    const sourceArn = `arn:aws:execute-api:${REGION}:${ACCOUNT}:${this.apiId}/${this.stage}/${request.method}${method.resourcePath}`;
    if (!this.permissions.some((p) => p.functionArn === method.functionArn && globMatch(p.sourceArn, sourceArn))) {
      this.iam.denials.push({ caller: 'apigateway.amazonaws.com', action: 'lambda:InvokeFunction', resource: method.functionArn });
      return json(response, 500, { message: 'Internal server error' });
    }
    const event = this.event(request, url, path, body, method, parameters, apiKey, apiKeyId);
    const fn = this.lambda.fn(method.functionArn).handler;
    if (method.streaming) return this.stream(fn, event, response);
    return this.buffered(fn, event, method.timeoutMs, response);
  }

  private async buffered(fn: string, event: unknown, timeoutMs: number, response: ServerResponse): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
    try {
      const outcome = await Promise.race([this.lambda.invoke(fn, event), timedOut]);
      if (outcome === 'timeout') return json(response, 504, { message: 'Endpoint request timed out' });
      if (!outcome.ok) return json(response, 502, { message: 'Internal server error' });
      const result = JSON.parse(outcome.payload) as { statusCode: number; headers?: Record<string, string>; multiValueHeaders?: Record<string, string[]>; body?: string; isBase64Encoded?: boolean };
      const headers: Record<string, string | string[]> = { ...(result.headers ?? {}), ...(result.multiValueHeaders ?? {}) };
      response.writeHead(result.statusCode, { ...headers, 'x-amzn-requestid': randomUUID() });
      response.end(result.body === undefined ? '' : Buffer.from(result.body, result.isBase64Encoded ? 'base64' : 'utf8'));
    } catch {
      json(response, 429, { message: 'Too Many Requests' });
    } finally {
      clearTimeout(timer);
    }
  }

  private async stream(fn: string, event: unknown, response: ServerResponse): Promise<void> {
    let invocation;
    try {
      invocation = await this.lambda.invokeStreaming(fn, event);
    } catch {
      return json(response, 429, { message: 'Too Many Requests' });
    }
    response.on('close', () => {
      if (!response.writableFinished) invocation.abort();
    });
    const started = await invocation.started;
    if ('error' in started) return json(response, 502, { message: 'Internal server error' });
    let pending: Buffer = Buffer.alloc(0);
    let headed = started.contentType !== PRELUDE_TYPE;
    if (headed) response.writeHead(200, { 'content-type': started.contentType });
    for await (const chunk of started.body) {
      if (response.destroyed) break;
      if (headed) {
        response.write(chunk);
        continue;
      }
      pending = Buffer.concat([pending, chunk]);
      const end = pending.indexOf(DELIMITER);
      if (end < 0) continue;
      const prelude = JSON.parse(pending.subarray(0, end).toString('utf8')) as { statusCode?: number; headers?: Record<string, string>; multiValueHeaders?: Record<string, string[]>; cookies?: string[] };
      response.writeHead(prelude.statusCode ?? 200, {
        ...(prelude.headers ?? {}),
        ...(prelude.multiValueHeaders ?? {}),
        ...(prelude.cookies?.length ? { 'set-cookie': prelude.cookies } : {}),
        'x-amzn-requestid': randomUUID(),
      });
      headed = true;
      const rest = pending.subarray(end + DELIMITER.length);
      if (rest.length > 0) response.write(rest);
    }
    const outcome = await invocation.finished;
    if (!headed) return json(response, outcome.ok ? 200 : 502, outcome.ok ? {} : { message: 'Internal server error' });
    // A stream the function failed mid-way is cut, not ended: the caller sees it broken.
    if (!outcome.ok) response.destroy();
    else response.end();
  }

  private event(
    request: IncomingMessage,
    url: URL,
    path: string,
    body: Buffer,
    method: Method,
    pathParameters: Record<string, string>,
    apiKey: string | undefined,
    apiKeyId: string | undefined,
  ): Record<string, unknown> {
    const headers: Record<string, string> = {};
    const multiValueHeaders: Record<string, string[]> = {};
    for (let i = 0; i < request.rawHeaders.length; i += 2) {
      const [name, value] = [request.rawHeaders[i], request.rawHeaders[i + 1]];
      headers[name] = value;
      (multiValueHeaders[name] ??= []).push(value);
    }
    const query: Record<string, string> = {};
    const multiQuery: Record<string, string[]> = {};
    for (const [name, value] of url.searchParams) {
      query[name] = value;
      (multiQuery[name] ??= []).push(value);
    }
    return {
      resource: method.resourcePath,
      path,
      httpMethod: request.method,
      headers,
      multiValueHeaders,
      queryStringParameters: url.searchParams.size ? query : null,
      multiValueQueryStringParameters: url.searchParams.size ? multiQuery : null,
      pathParameters: Object.keys(pathParameters).length ? pathParameters : null,
      stageVariables: null,
      requestContext: {
        accountId: ACCOUNT,
        apiId: this.apiId,
        resourcePath: method.resourcePath,
        httpMethod: request.method,
        path: `/${this.stage}${path}`,
        stage: this.stage,
        domainName: this.publicHost,
        domainPrefix: this.apiId,
        protocol: 'HTTP/1.1',
        requestId: randomUUID(),
        requestTimeEpoch: Date.now(),
        identity: { sourceIp: '127.0.0.1', userAgent: headers['user-agent'] ?? headers['User-Agent'] ?? null, apiKey: apiKey ?? null, apiKeyId: apiKeyId ?? null },
      },
      body: body.length > 0 ? body.toString('utf8') : null,
      isBase64Encoded: false,
    };
  }
}

function match(pattern: string[], segments: string[]): Record<string, string> | undefined {
  const parameters: Record<string, string> = {};
  for (let i = 0; i < pattern.length; i += 1) {
    const part = pattern[i];
    const greedy = /^\{(.+)\+\}$/.exec(part);
    if (greedy) {
      if (i >= segments.length) return undefined;
      parameters[greedy[1]] = segments.slice(i).join('/');
      return parameters;
    }
    if (i >= segments.length) return undefined;
    const variable = /^\{(.+)\}$/.exec(part);
    if (variable) parameters[variable[1]] = segments[i];
    else if (part !== segments[i]) return undefined;
  }
  return pattern.length === segments.length ? parameters : undefined;
}

/** Literal < variable < greedy, segment by segment: a higher string is a more specific resource. */
function specificity(segments: string[]): string {
  return segments.map((s) => (/^\{.+\+\}$/.test(s) ? '1' : /^\{.+\}$/.test(s) ? '2' : '3')).join('');
}

function globMatch(pattern: string, value: string): boolean {
  return new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`).test(value);
}

function header(request: IncomingMessage, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}


function json(response: ServerResponse, status: number, body: unknown): void {
  if (response.headersSent || response.destroyed) return void response.destroy();
  response.writeHead(status, { 'content-type': 'application/json', 'x-amzn-errortype': status === 403 ? 'ForbiddenException' : 'InternalServerErrorException' });
  response.end(JSON.stringify(body));
}
