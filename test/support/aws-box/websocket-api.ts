import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import type { AwsCall, AwsService, Reply } from './aws-endpoint.js';
import type { Iam } from './iam.js';
import type { LambdaService } from './lambda.js';
import { ACCOUNT, REGION, type Deployment } from './template.js';

/** API Gateway's limit on one WebSocket message (frames of up to 32 KB make it up). */
const MESSAGE_BYTES = 128 * 1024;

interface Route {
  routeKey: string;
  functionArn: string;
}

/**
 * API Gateway's WebSocket API, from the template: its stage on a `ws` server of its own, each
 * upgrade request handed to `$connect`'s function with its headers (a non-2xx answer refuses the
 * upgrade with that status and nothing else, as API Gateway passes no body on), each message to
 * `$default`'s as it comes (not waiting for the previous one: API Gateway invokes concurrently),
 * a close to `$disconnect`'s; and the `@connections` API (POST = PostToConnection, DELETE =
 * DeleteConnection, GET) served on the box's AWS endpoint, with IAM checked as for every call.
 * The functions reach it through their callback URL, which the box points at its endpoint.
 */
export class WebSocketApi implements AwsService {
  readonly apiId: string;
  readonly stage: string;
  private readonly routes = new Map<string, Route>();
  private readonly permissions: Array<{ functionArn: string; sourceArn: string }> = [];
  private readonly connections = new Map<string, { socket: WebSocket; connectedAt: number }>();
  private readonly server = new WebSocketServer({ noServer: true, maxPayload: MESSAGE_BYTES });
  private http: Server | undefined;
  /** Where providers connect: `ws://127.0.0.1:<port>/<stage>`. */
  url = '';

  constructor(
    deployment: Deployment,
    private readonly lambda: LambdaService,
    private readonly iam: Iam,
  ) {
    const [[apiLogicalId]] = deployment.resources('AWS::ApiGatewayV2::Api');
    this.apiId = deployment.ref(apiLogicalId);
    const [[, stage]] = deployment.resources('AWS::ApiGatewayV2::Stage');
    this.stage = stage.Properties!.StageName;
    const integrations = new Map(deployment.resources('AWS::ApiGatewayV2::Integration'));
    for (const [, route] of deployment.resources('AWS::ApiGatewayV2::Route')) {
      // Target: { Fn::Join: ['', ['integrations/', { Ref: <integration> }]] }.
      const target = (route.Properties!.Target['Fn::Join'][1] as Array<{ Ref?: string }>).find((part) => part.Ref)!.Ref!;
      const integration = deployment.resolve(integrations.get(target)!.Properties);
      this.routes.set(route.Properties!.RouteKey, { routeKey: route.Properties!.RouteKey, functionArn: /functions\/(arn:aws:lambda:[^/]+)\//.exec(integration.IntegrationUri)![1] });
    }
    for (const [, permission] of deployment.resources('AWS::Lambda::Permission')) {
      const props = deployment.resolve(permission.Properties);
      if (props.Principal === 'apigateway.amazonaws.com') this.permissions.push({ functionArn: props.FunctionName, sourceArn: props.SourceArn });
    }
  }

  /** The public callback URL (`https://{api}.execute-api.{region}.amazonaws.com/{stage}`) as the box serves it. */
  callbackUrl(awsEndpoint: string): { public: string; box: string } {
    return { public: `https://${this.apiId}.execute-api.${REGION}.amazonaws.com/${this.stage}`, box: `${awsEndpoint}/${this.stage}` };
  }

  async listen(): Promise<void> {
    this.http = createServer((_request, response) => response.writeHead(426).end());
    this.http.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => void this.upgrade(request, socket, head).catch(() => socket.destroy()));
    await new Promise<void>((resolve) => this.http!.listen(0, '127.0.0.1', resolve));
    this.url = `ws://127.0.0.1:${(this.http.address() as AddressInfo).port}/${this.stage}`;
  }

  close(): void {
    for (const { socket } of this.connections.values()) socket.terminate();
    this.server.close();
    this.http?.closeAllConnections();
    this.http?.close();
  }

  /** Cuts a connection as the network would: the provider sees it drop, `$disconnect` is invoked. */
  cut(connectionId: string): void {
    this.connections.get(connectionId)?.socket.terminate();
  }

  get connected(): string[] {
    return [...this.connections.keys()];
  }

  authorize(call: AwsCall): Array<{ action: string; resource: string }> {
    const { connectionId } = this.target(call);
    return [{ action: 'execute-api:ManageConnections', resource: `arn:aws:execute-api:${REGION}:${ACCOUNT}:${this.apiId}/${this.stage}/${call.method}/@connections/${connectionId}` }];
  }

  async handle(call: AwsCall): Promise<Reply> {
    const { connectionId } = this.target(call);
    const connection = this.connections.get(connectionId);
    if (!connection || connection.socket.readyState !== WebSocket.OPEN) return gone();
    switch (call.method) {
      case 'POST': {
        const data = Buffer.from(call.raw, 'utf8');
        if (data.length > MESSAGE_BYTES) return { status: 413, body: JSON.stringify({ message: 'Request Entity Too Large' }), headers: { 'x-amzn-errortype': 'PayloadTooLargeException' } };
        await new Promise<void>((resolve) => connection.socket.send(data, { binary: false }, () => resolve()));
        return { status: 200, body: '' };
      }
      case 'DELETE':
        connection.socket.close(1000);
        return { status: 204, body: '' };
      case 'GET':
        return { status: 200, body: JSON.stringify({ connectedAt: new Date(connection.connectedAt).toISOString(), identity: { sourceIp: '127.0.0.1' } }), headers: { 'content-type': 'application/json' } };
      default:
        return { status: 404, body: JSON.stringify({ message: 'Not Found' }) };
    }
  }

  private target(call: AwsCall): { connectionId: string } {
    const match = /\/@connections\/([^/?]+)/.exec(call.path);
    return { connectionId: match ? decodeURIComponent(match[1]) : '' };
  }

  private async upgrade(request: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    if (new URL(request.url ?? '/', 'http://box').pathname !== `/${this.stage}`) return refuse(socket, 403);
    // API Gateway's connection ids: 16 characters of base64, ending in `=`.
    const connectionId = `${randomBytes(11).toString('base64').slice(0, 15)}=`;
    const headers: Record<string, string> = {};
    const multiValueHeaders: Record<string, string[]> = {};
    for (let i = 0; i < request.rawHeaders.length; i += 2) {
      headers[request.rawHeaders[i]] = request.rawHeaders[i + 1];
      (multiValueHeaders[request.rawHeaders[i]] ??= []).push(request.rawHeaders[i + 1]);
    }
    const answer = await this.invoke('$connect', connectionId, { headers, multiValueHeaders });
    if (answer < 200 || answer > 299) return refuse(socket, answer);
    if (socket.destroyed) return void this.invoke('$disconnect', connectionId, {});
    this.server.handleUpgrade(request, socket, head, (ws) => {
      this.connections.set(connectionId, { socket: ws, connectedAt: Date.now() });
      ws.on('message', (data, isBinary) => {
        void this.invoke('$default', connectionId, { body: isBinary ? Buffer.from(data as Buffer).toString('base64') : data.toString(), isBase64Encoded: isBinary });
      });
      ws.on('close', () => {
        this.connections.delete(connectionId);
        void this.invoke('$disconnect', connectionId, {});
      });
      ws.on('error', () => ws.terminate());
    });
  }

  /** The route's function with the proxy event; its `statusCode`, or 500 when it failed or may not be invoked. */
  private async invoke(routeKey: string, connectionId: string, extra: Record<string, unknown>): Promise<number> {
    const route = this.routes.get(routeKey) ?? this.routes.get('$default');
    if (!route) return 500;
    const sourceArn = `arn:aws:execute-api:${REGION}:${ACCOUNT}:${this.apiId}/${this.stage}/${routeKey}`;
    if (!this.permissions.some((p) => p.functionArn === route.functionArn && glob(p.sourceArn, sourceArn))) {
      this.iam.denials.push({ caller: 'apigateway.amazonaws.com', action: 'lambda:InvokeFunction', resource: route.functionArn });
      return 500;
    }
    const event = {
      requestContext: {
        routeKey,
        eventType: routeKey === '$connect' ? 'CONNECT' : routeKey === '$disconnect' ? 'DISCONNECT' : 'MESSAGE',
        connectionId,
        apiId: this.apiId,
        stage: this.stage,
        domainName: `${this.apiId}.execute-api.${REGION}.amazonaws.com`,
        requestId: randomUUID(),
        requestTimeEpoch: Date.now(),
        connectedAt: this.connections.get(connectionId)?.connectedAt ?? Date.now(),
        identity: { sourceIp: '127.0.0.1' },
      },
      isBase64Encoded: false,
      ...extra,
    };
    try {
      const outcome = await this.lambda.invoke(this.lambda.fn(route.functionArn).handler, event);
      if (!outcome.ok) return 502;
      return Number((JSON.parse(outcome.payload) as { statusCode?: number } | null)?.statusCode ?? 200);
    } catch {
      return 429;
    }
  }
}

function refuse(socket: Duplex, status: number): void {
  socket.end(`HTTP/1.1 ${status} ${status === 401 ? 'Unauthorized' : status === 403 ? 'Forbidden' : 'Error'}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
}

function gone(): Reply {
  return { status: 410, body: JSON.stringify({ message: 'Gone' }), headers: { 'content-type': 'application/json', 'x-amzn-errortype': 'GoneException' } };
}

function glob(pattern: string, value: string): boolean {
  return new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`).test(value);
}
