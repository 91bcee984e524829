import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RunAgentInput } from '@ag-ui/core';
import { serve, type HttpBindings } from '@hono/node-server';
import { Hono, type Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import { afterEach, describe, expect, it } from 'vitest';
import { RunFailure } from '../../lambdas/core/errors.js';
import type { Agent } from '../../lambdas/core/model.js';
import { systemClock } from '../../lambdas/adapters/system-clock.js';
import { limitedRun } from '../../lambdas/core/relay.js';
import { AgUiHttpProvider } from '../../lambdas/providers/agui-http.js';

type Event = { type: string } & Record<string, unknown>;

const SECRET = 'sk-do-not-leak-0123456789';

const INPUT: RunAgentInput = {
  threadId: 'thread-1',
  runId: 'run-1',
  messages: [{ id: 'u1', role: 'user', content: 'hello' }],
  tools: [],
  context: [],
};

const SCRIPT: Event[] = [
  { type: 'RUN_STARTED', threadId: 'thread-1', runId: 'run-1' },
  { type: 'TEXT_MESSAGE_START', messageId: 'm1', role: 'assistant' },
  { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: 'hel' },
  { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: 'lo' },
  { type: 'TEXT_MESSAGE_END', messageId: 'm1' },
  { type: 'RUN_FINISHED', threadId: 'thread-1', runId: 'run-1' },
];

interface Deferred<T = void> {
  promise: Promise<T>;
  resolve(value: T): void;
}

function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((settle) => {
    resolve = settle;
  });
  return { promise, resolve };
}

const servers: Server[] = [];

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** A real AG-UI agent on loopback, answering POST / with `handler`. */
async function startAgent(handler: (c: Context) => Response | Promise<Response>): Promise<string> {
  const app = new Hono().post('/', handler);
  const listening = deferred<AddressInfo>();
  const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, listening.resolve) as Server;
  servers.push(server);
  const { port } = await listening.promise;
  return `http://127.0.0.1:${port}/`;
}

/** A port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  const listening = deferred<AddressInfo>();
  const server = serve({ fetch: () => new Response(), hostname: '127.0.0.1', port: 0 }, listening.resolve) as Server;
  const { port } = await listening.promise;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function agentAt(url: string, limits: Partial<Pick<Agent, 'timeoutSeconds' | 'idleTimeoutSeconds'>> = {}): Agent {
  return {
    id: 'remote',
    description: 'a stock AG-UI agent',
    provider: { kind: 'agui-http', url, headers: { authorization: `Bearer ${SECRET}`, 'x-tenant': 'acme' } },
    takesInterjections: false,
    timeoutSeconds: 10,
    idleTimeoutSeconds: 5,
    ...limits,
  };
}

function provider(): AgUiHttpProvider {
  return new AgUiHttpProvider();
}

async function collect(events: AsyncIterable<unknown>): Promise<Event[]> {
  const collected: Event[] = [];
  for await (const event of events) collected.push(event as Event);
  return collected;
}

/** Runs to the end and returns the failure, with the events relayed before it. */
async function failureOf(events: AsyncIterable<unknown>): Promise<{ failure: RunFailure; relayed: Event[] }> {
  const relayed: Event[] = [];
  try {
    for await (const event of events) relayed.push(event as Event);
  } catch (error) {
    expect(error).toBeInstanceOf(RunFailure);
    return { failure: error as RunFailure, relayed };
  }
  throw new Error(`the run ended without a failure after ${relayed.length} events`);
}

/** The provider as the core runs it: under the relay's time limits, the same for every provider kind. */
function run(agent: Agent, signal: AbortSignal = new AbortController().signal): AsyncIterable<unknown> {
  return limitedRun(provider(), INPUT, { agent, signal, clock: systemClock });
}

describe('AgUiHttpProvider', { timeout: 5_000 }, () => {
  it('posts the RunAgentInput as JSON with the agent headers and asks for an event stream', async () => {
    const received = deferred<{ headers: Headers; body: unknown }>();
    const url = await startAgent(async (c) => {
      received.resolve({ headers: c.req.raw.headers, body: await c.req.json() });
      return streamSSE(c, async (stream) => {
        for (const event of SCRIPT) await stream.writeSSE({ data: JSON.stringify(event) });
      });
    });

    await collect(run(agentAt(`${url}?key=value`)));

    const { headers, body } = await received.promise;
    expect(headers.get('accept')).toBe('text/event-stream');
    expect(headers.get('content-type')).toBe('application/json');
    expect(headers.get('authorization')).toBe(`Bearer ${SECRET}`);
    expect(headers.get('x-tenant')).toBe('acme');
    expect(body).toEqual(INPUT);
  });

  it('relays the events in order, each as it arrives', async () => {
    const firstRead = deferred();
    let sentLast = false;
    const url = await startAgent((c) =>
      streamSSE(c, async (stream) => {
        await stream.writeSSE({ data: JSON.stringify(SCRIPT[0]) });
        // The agent holds the rest of its run until the gateway has relayed the first event.
        await firstRead.promise;
        for (const event of SCRIPT.slice(1, -1)) await stream.writeSSE({ data: JSON.stringify(event) });
        sentLast = true;
        await stream.writeSSE({ data: JSON.stringify(SCRIPT.at(-1)) });
      }),
    );

    const events = run(agentAt(url))[Symbol.asyncIterator]();
    const first = await events.next();
    expect(first.value).toEqual(SCRIPT[0]);
    expect(sentLast).toBe(false);
    firstRead.resolve();

    const rest: unknown[] = [];
    for (let next = await events.next(); !next.done; next = await events.next()) rest.push(next.value);
    expect(rest).toEqual(SCRIPT.slice(1));
  });

  it('keeps relaying a slow agent whose every pause is shorter than the idle limit', async () => {
    const url = await startAgent((c) =>
      streamSSE(c, async (stream) => {
        for (const event of SCRIPT) {
          await stream.writeSSE({ data: JSON.stringify(event) });
          await stream.sleep(80);
        }
      }),
    );

    // Six pauses of 80 ms: the run outlasts the 0.2 s idle limit, no single silence does.
    const events = await collect(run(agentAt(url, { idleTimeoutSeconds: 0.2 })));

    expect(events).toEqual(SCRIPT);
  });

  it('relays event types it does not know, untouched', async () => {
    const custom = { type: 'SOMETHING_NEWER', payload: { nested: [1, 2] } };
    const url = await startAgent((c) =>
      streamSSE(c, async (stream) => {
        for (const event of [SCRIPT[0], custom, SCRIPT.at(-1)]) await stream.writeSSE({ data: JSON.stringify(event) });
      }),
    );

    expect(await collect(run(agentAt(url)))).toEqual([SCRIPT[0], custom, SCRIPT.at(-1)]);
  });

  it('fails with provider_sent_malformed_event on data that is not JSON, after relaying what came before', async () => {
    const url = await startAgent((c) =>
      streamSSE(c, async (stream) => {
        await stream.writeSSE({ data: JSON.stringify(SCRIPT[0]) });
        await stream.writeSSE({ data: '{"type": "TEXT_MESSAGE_START", ' });
      }),
    );

    const { failure, relayed } = await failureOf(run(agentAt(url)));

    expect(failure.code).toBe('provider_sent_malformed_event');
    expect(relayed).toEqual([SCRIPT[0]]);
  });

  it.each([
    ['a JSON array', '[1, 2]'],
    ['a JSON string', '"RUN_STARTED"'],
    ['an object without a type', '{"threadId": "thread-1"}'],
    ['an object whose type is not a string', '{"type": 7}'],
  ])('fails with provider_sent_malformed_event on %s', async (_, data) => {
    const url = await startAgent((c) => streamSSE(c, (stream) => stream.writeSSE({ data })));

    const { failure } = await failureOf(run(agentAt(url)));

    expect(failure.code).toBe('provider_sent_malformed_event');
  });

  it('returns without a failure when the stream ends before RUN_FINISHED, leaving the end to the core', async () => {
    const url = await startAgent((c) =>
      streamSSE(c, async (stream) => {
        for (const event of SCRIPT.slice(0, 3)) await stream.writeSSE({ data: JSON.stringify(event) });
        // A last event cut off before its closing blank line is not an event.
        await stream.write('data: {"type":"TEXT_MESSAGE_END","messageId":"m1"}');
      }),
    );

    expect(await collect(run(agentAt(url)))).toEqual(SCRIPT.slice(0, 3));
  });

  it('fails with provider_not_agui when the agent answers JSON instead of an event stream', async () => {
    const url = await startAgent((c) => c.json({ messages: [] }));

    const { failure } = await failureOf(run(agentAt(url)));

    expect(failure.code).toBe('provider_not_agui');
    expect(failure.message).toContain('application/json');
  });

  it('fails with provider_http_<status>, quoting at most 1 KB of the body', async () => {
    const url = await startAgent((c) => c.text(`upstream exploded ${'x'.repeat(10_000)}`, 500));

    const { failure } = await failureOf(run(agentAt(url)));

    expect(failure.code).toBe('provider_http_500');
    expect(failure.message).toContain('upstream exploded');
    expect(failure.message.length).toBeLessThan(1024 + 200);
  });

  it('fails with provider_http_307 when the agent redirects, and follows no Location', async () => {
    let followed = false;
    const target = await startAgent(() => {
      followed = true;
      return new Response('', { status: 200 });
    });
    const url = await startAgent((c) => c.redirect(target, 307));

    const { failure } = await failureOf(run(agentAt(url)));

    expect(failure.code).toBe('provider_http_307');
    expect(followed).toBe(false);
  });

  it('fails with provider_idle when the agent never answers', async () => {
    const url = await startAgent(() => new Promise<Response>(() => undefined));

    const startedAt = performance.now();
    const { failure } = await failureOf(run(agentAt(url, { idleTimeoutSeconds: 0.2 })));

    expect(failure.code).toBe('provider_idle');
    expect(performance.now() - startedAt).toBeLessThan(2_000);
  });

  it('fails with provider_idle when the agent falls silent mid-stream', async () => {
    const url = await startAgent((c) =>
      streamSSE(c, async (stream) => {
        await stream.writeSSE({ data: JSON.stringify(SCRIPT[0]) });
        await new Promise<void>((resolve) => stream.onAbort(resolve));
      }),
    );

    const { failure, relayed } = await failureOf(run(agentAt(url, { idleTimeoutSeconds: 0.2 })));

    expect(failure.code).toBe('provider_idle');
    expect(relayed).toEqual([SCRIPT[0]]);
  });

  it('fails with provider_timeout when a busy run outlasts timeoutSeconds', async () => {
    const closed = deferred();
    const url = await startAgent((c) =>
      streamSSE(c, async (stream) => {
        stream.onAbort(() => closed.resolve());
        await stream.writeSSE({ data: JSON.stringify(SCRIPT[0]) });
        // Never idle: a comment every 20 ms, for as long as the gateway listens.
        while (!stream.aborted) {
          await stream.write(': still working\n\n');
          await stream.sleep(20);
        }
      }),
    );

    const startedAt = performance.now();
    const { failure } = await failureOf(run(agentAt(url, { timeoutSeconds: 0.3, idleTimeoutSeconds: 0.2 })));

    expect(failure.code).toBe('provider_timeout');
    expect(performance.now() - startedAt).toBeLessThan(2_000);
    await closed.promise;
  });

  it('fails with provider_unreachable when the connection is refused', async () => {
    const port = await closedPort();

    const { failure } = await failureOf(run(agentAt(`http://127.0.0.1:${port}/?token=${SECRET}`)));

    expect(failure.code).toBe('provider_unreachable');
    expect(failure.message).toContain('ECONNREFUSED');
  });

  it('fails with provider_unreachable when the host name does not resolve', async () => {
    // .invalid never resolves (RFC 6761 §6.4).
    const { failure } = await failureOf(run(agentAt('http://funduq-agent.invalid/')));

    expect(failure.code).toBe('provider_unreachable');
    expect(failure.message).toContain('ENOTFOUND');
  });

  it('fails with provider_disconnected when the connection drops mid-stream', async () => {
    const firstRead = deferred();
    const url = await startAgent((c) =>
      streamSSE(c, async (stream) => {
        await stream.writeSSE({ data: JSON.stringify(SCRIPT[0]) });
        await firstRead.promise;
        (c.env as HttpBindings).outgoing.destroy();
      }),
    );

    const events = run(agentAt(url))[Symbol.asyncIterator]();
    expect((await events.next()).value).toEqual(SCRIPT[0]);
    firstRead.resolve();

    await expect(events.next()).rejects.toMatchObject({ code: 'provider_disconnected' });
  });

  it('returns quietly when cancelled mid-stream, and the agent sees its request closed', async () => {
    const closed = deferred();
    const url = await startAgent((c) =>
      streamSSE(c, async (stream) => {
        stream.onAbort(() => closed.resolve());
        await stream.writeSSE({ data: JSON.stringify(SCRIPT[0]) });
        await closed.promise;
      }),
    );
    const cancel = new AbortController();

    const events = run(agentAt(url), cancel.signal)[Symbol.asyncIterator]();
    expect((await events.next()).value).toEqual(SCRIPT[0]);
    const waiting = events.next();
    cancel.abort();

    expect(await waiting).toEqual({ done: true, value: undefined });
    await closed.promise;
  });

  it('never quotes the agent headers or the URL query in a failure', async () => {
    const port = await closedPort();
    const unreachable = await failureOf(run(agentAt(`http://127.0.0.1:${port}/?token=${SECRET}`)));
    const url = await startAgent((c) => c.text('nope', 503));
    const refused = await failureOf(run(agentAt(`${url}?token=${SECRET}`)));
    const silent = await startAgent(() => new Promise<Response>(() => undefined));
    const idle = await failureOf(run(agentAt(`${silent}?token=${SECRET}`, { idleTimeoutSeconds: 0.1 })));

    for (const { failure } of [unreachable, refused, idle]) {
      expect(failure.message).not.toContain(SECRET);
      expect(failure.message).not.toContain('acme');
    }
    expect(refused.failure.code).toBe('provider_http_503');
  });
});
