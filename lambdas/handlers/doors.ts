import { handle } from 'hono/aws-lambda';
import { doorsApp, doorsClients } from '../runtimes/aws-doors.js';
import { flushing, tracingOf } from '../runtimes/tracing.js';

const tracing = tracingOf(process.env);
const answer = handle(doorsApp({ env: process.env, clients: doorsClients(process.env), tracing }));

/** The buffered routes: threads, agents, admin, agent cards, health. */
export const handler = flushing(tracing, answer);
