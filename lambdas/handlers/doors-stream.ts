import { streamHandle } from 'hono/aws-lambda';
import { doorsApp, doorsClients } from '../runtimes/aws-doors.js';

/** The streaming routes (API Gateway `ResponseTransferMode.STREAM`): AG-UI runs and tails, A2A. */
export const handler = streamHandle(doorsApp({ env: process.env, clients: doorsClients(process.env) }));
