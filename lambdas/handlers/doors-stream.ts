import { streamHandle } from 'hono/aws-lambda';
import { doorsApp, doorsClients } from '../runtimes/aws-doors.js';
import { flushing, tracingOf } from '../runtimes/tracing.js';

/** The Lambda runtime's own global (Node.js response streaming); it marks a handler as streaming and returns it. */
declare const awslambda: { streamifyResponse<H>(handler: H): H };

const tracing = tracingOf(process.env);
const answer = streamHandle(doorsApp({ env: process.env, clients: doorsClients(process.env), tracing })) as (...args: unknown[]) => Promise<void>;

/**
 * The streaming routes (API Gateway `ResponseTransferMode.STREAM`): AG-UI runs and tails, A2A.
 * The invocation flushes its spans once the response stream has ended, which is when a request's
 * server span ends.
 */
export const handler = awslambda.streamifyResponse(flushing(tracing, answer));
