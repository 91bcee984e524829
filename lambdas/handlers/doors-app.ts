import { createApp } from '../doors/app.js';
import { createWiring, logger, principalResolver, type WiringOptions } from './wiring.js';

/**
 * A response stream may last 15 minutes (Lambda and API Gateway); the SSE framing ends it
 * cleanly before that, and the caller resumes with Last-Event-ID.
 */
export const SSE_MAX_DURATION_MS = 13 * 60_000 + 30_000;
/** API Gateway drops a stream idle for 5 minutes; the design asks for a comment every 15 s at most. */
export const SSE_HEARTBEAT_MS = 10_000;

/** The doors as one Hono app over the AWS adapters, for both door functions. */
export function doorsApp(options: WiringOptions) {
  const { gateway } = createWiring(options);
  return createApp({
    gateway,
    principal: principalResolver(options.env),
    sse: { heartbeatMs: SSE_HEARTBEAT_MS, maxDurationMs: SSE_MAX_DURATION_MS },
    onError: (error) => logger.error('a door failed to answer', { error: error as Error }),
  });
}
