import type { Context } from 'aws-lambda';
import { systemClock } from '../adapters/system-clock.js';
import { LINK_PROOF_HEADER } from '../../packages/provider/src/wire.js';
import { createWiring, sqsThreadQueue, stepFunctionsAskTimer, type WiringOptions } from '../runtimes/aws.js';
import { awsLink, awsLinkDoor, linkFunctionClients } from '../runtimes/link/aws.js';
import { logger } from '../runtimes/powertools.js';
import { flushing, tracingOf } from '../runtimes/tracing.js';

/** What API Gateway hands a WebSocket route's function (the Lambda proxy integration). */
export interface WebSocketEvent {
  requestContext: { routeKey: string; connectionId: string; eventType?: string };
  headers?: Record<string, string | undefined>;
  body?: string | null;
  isBase64Encoded?: boolean;
}

/**
 * The provider link's WebSocket API, one function for its three routes. `$connect` checks the
 * handshake's proof in the upgrade request's headers (a refusal is the upgrade's status: API
 * Gateway passes no reason on, so it is logged here) and keeps the welcome for the provider's
 * `hello`, since nothing can be sent before `$connect` returns; `$default` is one message, handled
 * and returned (messages of one connection may be handled concurrently, in any order: the core's
 * frames are made for that); `$disconnect` is the link's end. No invocation outlasts its message.
 */
export function createLinkRoutes(options: Omit<WiringOptions, 'providers' | 'link'>) {
  const { env, clients } = options;
  const link = awsLink(env, clients, options.clock ?? systemClock, options.ids ?? { newId: () => crypto.randomUUID() });
  if (!link) throw new Error('the link function needs the link key secret (FUNDUQ_LINK_KEY_SECRET_ARN)');
  let ready: Promise<{ door: ReturnType<typeof awsLinkDoor>; taken: Awaited<ReturnType<typeof link>> }> | undefined;
  const setUp = () =>
    (ready ??= link().then((taken) => {
      const { gateway } = createWiring({ ...options, link: taken.deps }, { queue: sqsThreadQueue, timer: stepFunctionsAskTimer });
      return { door: awsLinkDoor(gateway, taken), taken };
    })).catch((error: unknown) => {
      ready = undefined;
      throw error;
    });
  return async (event: WebSocketEvent, context?: Context): Promise<{ statusCode: number }> => {
    if (context) logger.addContext(context);
    const { routeKey, connectionId } = event.requestContext;
    const { door, taken } = await setUp();
    switch (routeKey) {
      case '$connect': {
        const opened = await door.open(headerOf(event.headers, LINK_PROOF_HEADER), connectionId);
        if (!opened.ok) {
          logger.warn('a provider link was refused', { connectionId, code: opened.code, message: opened.message });
          return { statusCode: opened.status };
        }
        await taken.roster.keepWelcome(connectionId, opened.welcome);
        return { statusCode: 200 };
      }
      case '$disconnect':
        await door.closed(connectionId);
        return { statusCode: 200 };
      default: {
        const text = event.body == null ? '' : event.isBase64Encoded ? Buffer.from(event.body, 'base64').toString('utf8') : event.body;
        if (isHello(text)) {
          const welcome = await taken.roster.welcomeOf(connectionId);
          if (welcome !== undefined) await taken.transport.send(connectionId, welcome);
          return { statusCode: 200 };
        }
        await door.message(connectionId, text);
        return { statusCode: 200 };
      }
    }
  };
}

/** API Gateway keeps a header's case as sent. */
function headerOf(headers: WebSocketEvent['headers'], name: string): string | undefined {
  const found = Object.entries(headers ?? {}).find(([key]) => key.toLowerCase() === name);
  return found?.[1];
}

function isHello(text: string): boolean {
  if (text.length > 64) return false;
  try {
    return (JSON.parse(text) as { type?: unknown }).type === 'hello';
  } catch {
    return false;
  }
}

let handle: ReturnType<typeof createLinkRoutes> | undefined;

/**
 * It reads and writes the record (frames settle runs), posts to the link's connections, schedules
 * the link's timers, arms ask timers (a run that ends with asks), lets a settled run's thread-queue
 * message go, and reads the link key secret.
 */
const tracing = tracingOf(process.env);

export const handler = flushing(tracing, (event: WebSocketEvent, context: Context) =>
  (handle ??= createLinkRoutes({ env: process.env, clients: linkFunctionClients(process.env), tracing }))(event, context),
);
