/**
 * The scripted agent, on loopback in its own process: a stock AG-UI endpoint (what funduq's
 * agui-http provider and the direct reference read), and the reference A2A server of
 * @a2a-js/sdk (DefaultRequestHandler + InMemoryTaskStore + an AgentExecutor) for scenario 3.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { A2A_VERSION_HEADER, HTTP_EXTENSION_HEADER } from '@a2a-js/sdk';
import {
  AgentEvent,
  DefaultRequestHandler,
  InMemoryTaskStore,
  JsonRpcTransportHandler,
  defaultServerCallContextBuilder,
  type AgentExecutor,
  type ExecutionEventBus,
  type RequestContext,
} from '@a2a-js/sdk/server';
import { Extensions, TaskState, type AgentCard } from '@a2a-js/sdk';
import { AbstractAgent } from '@ag-ui/client';
import type { BaseEvent, RunAgentInput } from '@ag-ui/core';
import { Observable } from 'rxjs';
import { connect, type ProviderLink } from '../../packages/provider/src/index.js';
import { serveParent } from '../support/child.js';
import { script, type Script } from '../support/script.js';

const encoder = new TextEncoder();
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
/** Epoch ms with sub-ms precision: the harness subtracts two of these taken in different processes. */
const now = () => performance.timeOrigin + performance.now();

/**
 * Reads the script from the query (`events`, `intervalMs`, `deltaChars`: the agent as
 * registered), overridden by `forwardedProps.bench` (one run of it: funduq forwards those).
 */
function readScript(url: URL, override: Partial<Script> | undefined): Script {
  const number = (name: keyof Script, fallback: number) => {
    const given = override?.[name];
    if (typeof given === 'number') return given;
    const raw = url.searchParams.get(name);
    return raw === null ? fallback : Number(raw);
  };
  return { events: number('events', 100), intervalMs: number('intervalMs', 0), deltaChars: number('deltaChars', 6) };
}

/**
 * The run as SSE, one event per write, each stamped with the time it was handed to the socket
 * (`timestamp`, part of every AG-UI event). Paced runs keep an absolute schedule so timer
 * jitter does not accumulate.
 */
function agentStream(input: { threadId: string; runId: string }, plan: Script): ReadableStream<Uint8Array> {
  const events = script(input, plan);
  const startedAt = performance.now();
  let i = 0;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (i >= events.length) {
        controller.close();
        return;
      }
      if (plan.intervalMs > 0) {
        const wait = startedAt + i * plan.intervalMs - performance.now();
        if (wait > 0) await sleep(wait);
      }
      // AG-UI's `timestamp` is whole ms; the precise send time rides in `rawEvent`, which every
      // reader passes through untouched.
      const sentAt = now();
      const event = { ...events[i], timestamp: Math.floor(sentAt), rawEvent: { sentAt } };
      controller.enqueue(encoder.encode(`data: ${JSON.stringify(event)}\n\n`));
      i += 1;
    },
  });
}

function referenceCard(base: string, chunks: number): AgentCard {
  return {
    name: 'bench reference',
    description: `the @a2a-js/sdk reference server: ${chunks} artifact chunks per task`,
    supportedInterfaces: [{ url: `${base}/a2a-ref/${chunks}`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' }],
    provider: undefined,
    version: '1.0.0',
    capabilities: { streaming: true, pushNotifications: false, extensions: [] },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [],
    signatures: [],
  };
}

/** Emits the task, WORKING, `chunks` artifact chunks of one artifact, and COMPLETED, as fast as it can. */
class ChunkingExecutor implements AgentExecutor {
  constructor(private readonly chunks: number) {}

  cancelTask = async (): Promise<void> => {};

  async execute(context: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const { taskId, contextId } = context;
    const status = (state: TaskState) => ({ state, message: undefined, timestamp: new Date().toISOString() });
    if (!context.task) {
      bus.publish(
        AgentEvent.task({ id: taskId, contextId, status: status(TaskState.TASK_STATE_SUBMITTED), artifacts: [], history: [context.userMessage], metadata: undefined }),
      );
    }
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: status(TaskState.TASK_STATE_WORKING), metadata: undefined }));
    for (let i = 0; i < this.chunks; i++) {
      bus.publish(
        AgentEvent.artifactUpdate({
          taskId,
          contextId,
          artifact: {
            artifactId: 'answer',
            name: 'answer',
            description: '',
            parts: [{ content: { $case: 'text', value: `tok${i % 1000} ` }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
            metadata: undefined,
            extensions: [],
          },
          append: i > 0,
          lastChunk: i === this.chunks - 1,
          metadata: undefined,
        }),
      );
    }
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: status(TaskState.TASK_STATE_COMPLETED), metadata: undefined }));
  }
}

/** What the SDK's express `jsonRpcHandler` does, on Hono: one JSON-RPC POST, SSE for streams. */
function referenceA2A(base: () => string) {
  const handlers = new Map<number, JsonRpcTransportHandler>();
  const handlerFor = (chunks: number) => {
    let handler = handlers.get(chunks);
    if (!handler) {
      const requestHandler = new DefaultRequestHandler(referenceCard(base(), chunks), new InMemoryTaskStore(), new ChunkingExecutor(chunks));
      handlers.set(chunks, (handler = new JsonRpcTransportHandler(requestHandler)));
    }
    return handler;
  };
  const app = new Hono();
  app.get('/:chunks/.well-known/agent-card.json', (c) => c.json(referenceCard(base(), Number(c.req.param('chunks')))));
  app.post('/:chunks', async (c) => {
    const body = await c.req.json();
    const headers: Record<string, string> = {};
    c.req.raw.headers.forEach((value, key) => (headers[key] = value));
    const context = defaultServerCallContextBuilder({
      extensions: Extensions.parseServiceParameter(c.req.header(HTTP_EXTENSION_HEADER)),
      user: undefined,
      headers,
      requestedVersion: c.req.header(A2A_VERSION_HEADER) || undefined,
    });
    const result = await handlerFor(Number(c.req.param('chunks'))).handle(body, context);
    if (typeof (result as AsyncGenerator)[Symbol.asyncIterator] !== 'function') return c.json(result);
    const stream = result as AsyncGenerator<unknown>;
    return new Response(
      new ReadableStream<Uint8Array>({
        async pull(controller) {
          const next = await stream.next();
          if (next.done) controller.close();
          else controller.enqueue(encoder.encode(`data: ${JSON.stringify(next.value)}\n\n`));
        },
        async cancel() {
          await stream.return(undefined);
        },
      }),
      { headers: { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive' } },
    );
  });
  return app;
}

/**
 * A recorded A2A stream served from memory: the SSE `data` payloads of one SendStreamingMessage
 * answer, replayed for every request with the request's JSON-RPC id. What it costs a stock
 * client to read exactly those bytes, with no server work behind them.
 */
function cannedA2A(base: () => string) {
  let frames: { parts: string[] } = { parts: [] };
  const app = new Hono();
  app.get('/.well-known/agent-card.json', (c) =>
    c.json({ ...referenceCard(base(), 0), name: 'canned', supportedInterfaces: [{ url: `${base()}/a2a-canned`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' }] }),
  );
  app.post('/', async (c) => {
    const { id } = (await c.req.json()) as { id: unknown };
    // One SSE event per write, as a streaming server sends them.
    const events = frames.parts.join(JSON.stringify(id)).split('\n\n').filter((event) => event.length > 0);
    let i = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (i >= events.length) controller.close();
        else controller.enqueue(encoder.encode(`${events[i++]}\n\n`));
      },
    });
    return new Response(body, { headers: { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' } });
  });
  return {
    app,
    /** `sse`: a whole SSE body recorded with the JSON-RPC id `recordedId`. */
    load({ sse, recordedId }: { sse: string; recordedId: string }) {
      frames = { parts: sse.split(JSON.stringify(recordedId)) };
      return frames.parts.length - 1;
    },
  };
}

/**
 * The same script as an agent in this process, served over a provider link (`@funduq/provider`):
 * no URL, no port; its events stamped as the SSE endpoint stamps them.
 */
class LinkedScript extends AbstractAgent {
  constructor(private readonly plan: Script) {
    super({ description: `bench: ${plan.events} events every ${plan.intervalMs} ms, over a link` });
  }

  run(input: RunAgentInput): Observable<BaseEvent> {
    const events = script(input, this.plan);
    const plan = this.plan;
    return new Observable<BaseEvent>((subscriber) => {
      let stopped = false;
      void (async () => {
        const startedAt = performance.now();
        for (let i = 0; i < events.length && !stopped; i++) {
          if (plan.intervalMs > 0) {
            const wait = startedAt + i * plan.intervalMs - performance.now();
            if (wait > 0) await sleep(wait);
          }
          const sentAt = now();
          subscriber.next({ ...events[i], timestamp: Math.floor(sentAt), rawEvent: { sentAt } } as BaseEvent);
        }
        subscriber.complete();
      })();
      return () => {
        stopped = true;
      };
    });
  }

  override clone(): LinkedScript {
    return new LinkedScript(this.plan);
  }
}

const links: ProviderLink[] = [];

let origin = '';
const canned = cannedA2A(() => origin);
const app = new Hono();
app.post('/agui', async (c) => {
  const input = (await c.req.json()) as { threadId: string; runId: string; forwardedProps?: { bench?: Partial<Script> } };
  return new Response(agentStream(input, readScript(new URL(c.req.url), input.forwardedProps?.bench)), {
    headers: { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' },
  });
});
app.route('/a2a-ref', referenceA2A(() => origin));
app.route('/a2a-canned', canned.app);

const server = await new Promise<Server>((resolve) => {
  const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s as Server));
});
server.keepAliveTimeout = 60_000;
origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

serveParent(
  {
    url: () => origin,
    rss: () => process.memoryUsage().rss,
    cpu: () => process.cpuUsage(),
    loadCannedA2A: (recording: { sse: string; recordedId: string }) => canned.load(recording),
    /** Links this process to a gateway as a provider serving `agents` (id → script). */
    async link(params: { url: string; providerId: string; privateKey: string; funduqPublicKey: string; agents: Record<string, Script> }) {
      const agents = Object.fromEntries(Object.entries(params.agents).map(([id, plan]) => [id, new LinkedScript(plan)]));
      links.push(await connect({ ...params, agents }));
      return true;
    },
  },
  async () => {
    for (const link of links.splice(0)) await link.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  },
);
