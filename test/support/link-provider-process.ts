/**
 * A provider as its own process: the echo agent in-process, linked to the gateway named in its
 * environment, and nothing else (it opens no port). Prints "linked" once funduq took its agents.
 */
import { connect } from '../../packages/provider/src/index.js';
import { echoAgent } from './link.js';

const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};

const link = await connect({
  url: env('LINK_URL'),
  providerId: env('PROVIDER_ID'),
  privateKey: env('PROVIDER_KEY'),
  funduqPublicKey: env('FUNDUQ_KEY'),
  agents: { echo: { agent: echoAgent(), description: 'echoes what it is told', skills: [{ id: 'echo', name: 'echo', description: 'says it back', tags: ['test'] }] } },
});
console.log('linked');
process.on('SIGTERM', () => void link.close().then(() => process.exit(0)));
