#!/usr/bin/env node
/**
 * `funduq-provider`: agents that speak AG-UI over HTTP, on the provider's own network, served on a
 * link to funduq (an `HttpAgent` of `@ag-ui/client` each, behind `connect`), so nothing of theirs is
 * reachable from outside; and `funduq-provider keygen`, the provider's key pair. On AWS this also
 * changes how long a run may last: an agent funduq reaches by URL is held by a dispatcher function
 * (cut at ~14.5 minutes, before Lambda's 15), a link run by no function.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { HttpAgent, type AbstractAgent } from '@ag-ui/client';
import { connect, LinkRefused, type ConnectOptions, type OfferedRun } from './connect.js';
import { generateKeyPair, normalizePublicKey, privateKeyOf } from './ed25519.js';
import { LinkProofSchema } from './wire.js';

const USAGE = `Usage:
  funduq-provider --url <link> --provider-id <id> --key-file <file> --funduq-key <key> --agent <name>=<url> [options]
  funduq-provider keygen [--out <file>]

Serves AG-UI HTTP agents on a link to funduq: the provider dials out, nothing listens on its side.

  --url <link>                  the gateway's link: ws://127.0.0.1:8787/link (npm start prints it; on AWS the stack output LinkUrl)
  --provider-id <id>            the id an admin registered this provider under (PUT /admin/providers/{id})
  --key-file <file>             this provider's Ed25519 private key (PEM, or the base64url of its 32-byte seed)
  --funduq-key <key>            funduq's public key, pinned (npm start prints it; GET /admin/link answers it)
  --agent <name>=<url>          an agent callers address as <name>, an AG-UI HTTP endpoint; repeat for more
  --header <name>:<header>=<v>  a header sent with each run of agent <name> (Authorization, say); repeat for more
  --max-concurrent-runs <n>     the runs this process takes at once; an offer beyond them is declined
  -h, --help                    this text

keygen writes a new private key to --out (provider.key by default; mode 600, never over an existing
file) and prints its public key, for PUT /admin/providers/{id}.
`;

/** A command line that cannot be run: what is wrong and what to do, in one line (exit code 2). */
class Usage extends Error {}

const fail = (what: string): never => {
  throw new Usage(what);
};

const OPTIONS = {
  url: { type: 'string' },
  'provider-id': { type: 'string' },
  'key-file': { type: 'string' },
  'funduq-key': { type: 'string' },
  agent: { type: 'string', multiple: true },
  header: { type: 'string', multiple: true },
  'max-concurrent-runs': { type: 'string' },
  out: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Command = { kind: 'help' } | { kind: 'keygen'; out: string } | { kind: 'bridge'; options: Omit<ConnectOptions, 'onError'> };

/**
 * `--name value` as `--name=value` for every option that takes a value: a key in base64url may
 * begin with `-`, which Node's parser would otherwise refuse as ambiguous (one key in 64).
 */
function joined(args: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const name = args[i].startsWith('--') ? args[i].slice(2) : undefined;
    const option = name !== undefined ? (OPTIONS as Record<string, { type: string }>)[name] : undefined;
    if (option?.type === 'string' && i + 1 < args.length) out.push(`${args[i]}=${args[++i]}`);
    else out.push(args[i]);
  }
  return out;
}

function parsed(args: string[]) {
  try {
    return parseArgs({ args: joined(args), options: OPTIONS, allowPositionals: true });
  } catch (error) {
    // Node's own words, up to their first full stop: "Unknown option '--x'", "Option '--url <value>' argument missing".
    const said = (error as Error).message.split(/\.(\s|$)/)[0];
    return fail(`${said.charAt(0).toLowerCase()}${said.slice(1)}: see funduq-provider --help`);
  }
}

/** The command a command line asks for, every argument checked before anything is opened. */
function commandOf(args: string[]): Command {
  const { values, positionals } = parsed(args);
  if (values.help) return { kind: 'help' };
  const [verb, ...rest] = positionals;
  if (rest.length > 0 || (verb !== undefined && verb !== 'keygen')) fail(`unexpected argument "${rest[0] ?? verb}": see funduq-provider --help`);
  if (verb === 'keygen') {
    const given = Object.keys(values).filter((name) => name !== 'out');
    if (given.length > 0) fail(`keygen takes --out only, not --${given[0]}: see funduq-provider --help`);
    return { kind: 'keygen', out: values.out ?? 'provider.key' };
  }
  if (values.out !== undefined) fail('--out is keygen\'s: funduq-provider keygen --out <file>');

  const url = values.url ?? fail("missing --url: the gateway's link, ws://127.0.0.1:8787/link (npm start prints it; on AWS the stack output LinkUrl)");
  if (!/^wss?:$/.test(URL.canParse(url) ? new URL(url).protocol : '')) fail(`--url ${url} is not a WebSocket URL: give the gateway's link, ws://host:port/link or wss://…/link`);
  const providerId = values['provider-id'] ?? fail('missing --provider-id: the id an admin registered this provider under (PUT /admin/providers/{id})');
  if (!LinkProofSchema.shape.providerId.safeParse(providerId).success) fail(`--provider-id "${providerId}" is not a provider id: 1 to 128 letters, digits, "_", "." or "-"`);
  const keyFile = values['key-file'] ?? fail('missing --key-file: the file of this provider\'s private key (make one with funduq-provider keygen --out provider.key)');
  const funduqKey = values['funduq-key'] ?? fail("missing --funduq-key: funduq's public key (npm start prints it; GET /admin/link answers it)");
  if (!normalizePublicKey(funduqKey)) fail("--funduq-key is not an Ed25519 public key: give funduq's, as npm start prints it (GET /admin/link answers it)");

  const agents = new Map<string, { url: string; headers: Record<string, string> }>();
  for (const given of values.agent ?? []) {
    const at = given.indexOf('=');
    const [name, agentUrl] = at < 0 ? [given, ''] : [given.slice(0, at), given.slice(at + 1)];
    if (name === '' || name.includes(':') || !/^https?:$/.test(URL.canParse(agentUrl) ? new URL(agentUrl).protocol : '')) {
      fail(`--agent ${given} is not <name>=<url>: name the agent and its AG-UI endpoint, as in --agent research=http://127.0.0.1:8000/agent`);
    }
    if (agents.has(name)) fail(`--agent ${name} is given twice: one URL an agent`);
    agents.set(name, { url: agentUrl, headers: {} });
  }
  if (agents.size === 0) fail('missing --agent: at least one, as in --agent research=http://127.0.0.1:8000/agent');
  for (const given of values.header ?? []) {
    const match = /^([^:]+):([!#$%&'*+.^_`|~0-9A-Za-z-]+)=(.*)$/.exec(given);
    if (!match) fail(`--header ${given} is not <agent>:<header>=<value>: as in --header research:Authorization=Bearer …`);
    const [, name, header, value] = match!;
    const agent = agents.get(name) ?? fail(`--header ${given} names no agent given with --agent: the part before ":" is the agent's name`);
    agent.headers[header] = value;
  }

  let maxConcurrentRuns: number | undefined;
  const most = values['max-concurrent-runs'];
  if (most !== undefined) {
    maxConcurrentRuns = Number(most);
    if (!/^\d+$/.test(most) || maxConcurrentRuns < 1) fail(`--max-concurrent-runs ${most} is not a whole number of runs, 1 or more`);
  }

  let privateKey: string;
  try {
    privateKey = readFileSync(keyFile, 'utf8').trim();
  } catch (error) {
    return fail(`cannot read the key file ${keyFile} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}): make one with funduq-provider keygen --out ${keyFile}`);
  }
  try {
    privateKeyOf(privateKey);
  } catch {
    fail(`the key file ${keyFile} holds no Ed25519 private key (PEM, or the base64url of its 32-byte seed): make one with funduq-provider keygen --out ${keyFile}`);
  }

  return {
    kind: 'bridge',
    options: {
      url,
      providerId,
      privateKey,
      funduqPublicKey: funduqKey,
      agents: Object.fromEntries([...agents].map(([name, { url: agentUrl, headers }]) => [name, { agent: new HttpAgent({ url: agentUrl, headers }), prepare: sendContext }])),
      ...(maxConcurrentRuns !== undefined ? { maxConcurrentRuns } : {}),
    },
  };
}

/**
 * A run's context goes to its HTTP agent as headers (its names are header names: `traceparent`,
 * `tracestate`), as funduq sends an `agui-http` agent's; a header given with `--header` wins.
 */
function sendContext(agent: AbstractAgent, run: OfferedRun): void {
  if (agent instanceof HttpAgent) agent.headers = { ...run.context, ...agent.headers };
}

/** Writes a new private key (PEM, readable by its owner only) and says its public half. */
function keygen(out: string): void {
  const pair = generateKeyPair();
  const pem = privateKeyOf(pair.privateKey).export({ format: 'pem', type: 'pkcs8' }).toString();
  try {
    writeFileSync(out, pem, { mode: 0o600, flag: 'wx' });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    fail(code === 'EEXIST' ? `${out} exists: a key is never written over; give another --out, or delete it first` : `cannot write ${out} (${code ?? (error as Error).message}): give another --out`);
  }
  process.stderr.write(`funduq-provider: wrote the private key to ${out} (mode 600); its public key, for PUT /admin/providers/{id}:\n`);
  process.stdout.write(`${pair.publicKey}\n`);
}

const say = (line: string) => process.stderr.write(`funduq-provider: ${line}\n`);

async function bridge(options: Omit<ConnectOptions, 'onError'>): Promise<void> {
  let link;
  try {
    link = await connect({ ...options, onError: (error) => say(error.message) });
  } catch (error) {
    // A LinkRefused says its code first; a network error what the network said.
    say(error instanceof LinkRefused ? error.message : `could not open the link at ${options.url}: ${(error as Error).message}`);
    process.exit(1);
  }
  if (link.registered.length === 0) {
    say(`funduq took none of the agents: the provider's registration (PUT /admin/providers/${options.providerId}) names those it may serve`);
    await link.close();
    process.exit(1);
  }
  const opened = link;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void opened.close().then(() => process.exit(0)));
  // Settles with close(), or rejects when a reconnect is refused (the provider was deleted, its key replaced).
  opened.closed.catch((error: Error) => {
    say(error.message);
    process.exit(1);
  });
  process.stdout.write(`serving ${opened.registered.join(', ')} on ${options.url} as provider ${options.providerId}\n`);
}

try {
  const command = commandOf(process.argv.slice(2));
  if (command.kind === 'help') process.stdout.write(USAGE);
  else if (command.kind === 'keygen') keygen(command.out);
  else await bridge(command.options);
} catch (error) {
  if (!(error instanceof Usage)) throw error;
  say(error.message);
  process.exit(2);
}
