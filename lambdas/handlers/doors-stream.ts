import type { Context } from 'aws-lambda';
import { streamHandle } from 'hono/aws-lambda';
import { doorsApp, doorsClients } from '../runtimes/aws-doors.js';
import { DoorRelays, relaysAtDoor } from '../runtimes/door-relay.js';
import { flushing, tracingOf } from '../runtimes/tracing.js';

/** The Lambda runtime's own global (Node.js response streaming); it marks a handler as streaming and returns it. */
declare const awslambda: { streamifyResponse<H>(handler: H): H };

const tracing = tracingOf(process.env);
const relays = relaysAtDoor(process.env) ? new DoorRelays() : undefined;
const answer = streamHandle(doorsApp({ env: process.env, clients: doorsClients(process.env), tracing, ...(relays ? { doorRelay: relays } : {}) })) as unknown as (event: unknown, stream: unknown, context: Context) => Promise<void>;

/**
 * The streaming routes (API Gateway `ResponseTransferMode.STREAM`): AG-UI runs and tails, A2A.
 * A run admitted on an idle thread is relayed here, and the invocation returns once it has
 * settled, whenever its caller's stream ended. The invocation flushes its spans after that, once
 * the response stream has ended, which is when a request's server span ends.
 */
export const handler = awslambda.streamifyResponse(
  flushing(tracing, async (event: unknown, stream: unknown, context: Context) => {
    relays?.begin(context);
    try {
      await answer(event, stream, context);
    } finally {
      await relays?.settled();
    }
  }),
);
