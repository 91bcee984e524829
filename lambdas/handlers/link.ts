import type { Context } from 'aws-lambda';
import { createLinkRoutes, linkFunctionClients, type WebSocketEvent } from '../runtimes/aws-link.js';

let handle: ReturnType<typeof createLinkRoutes> | undefined;

/**
 * It reads and writes the record (frames settle runs), posts to the link's connections, schedules
 * the link's timers, arms ask timers (a run that ends with asks), lets a settled run's thread-queue
 * message go, and reads the link key secret.
 */
export const handler = (event: WebSocketEvent, context: Context) => (handle ??= createLinkRoutes({ env: process.env, clients: linkFunctionClients(process.env) }))(event, context);
