import { handle } from 'hono/aws-lambda';
import { doorsApp, doorsClients } from '../runtimes/aws-doors.js';

/** The buffered routes: threads, agents, admin, agent cards, health. */
export const handler = handle(doorsApp({ env: process.env, clients: doorsClients(process.env) }));
