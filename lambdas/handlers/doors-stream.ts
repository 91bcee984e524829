import { streamHandle } from 'hono/aws-lambda';
import { doorsApp } from './wiring.js';

/** The streaming routes (API Gateway `ResponseTransferMode.STREAM`): AG-UI runs and tails, A2A. */
export const handler = streamHandle(doorsApp({ env: process.env }));
