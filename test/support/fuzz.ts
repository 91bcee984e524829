import fc from 'fast-check';
import { localDynamoClient } from '../../lambdas/adapters/local/dynalite.js';
import type { SqliteRunStore } from '../../lambdas/adapters/local/sqlite-run-store.js';
import type { LocalGateway } from '../../lambdas/runtimes/local.js';
import { recordBreaks, dynamoSnapshot, sqliteSnapshot } from './record-invariants.js';
import { TEST_STORE } from './stores.js';

/**
 * The fuzz's seed: FUZZ_SEED replays a run (the same cases in the same order), else a new one.
 * Every failure names it.
 */
export const FUZZ_SEED = process.env.FUZZ_SEED !== undefined ? Number(process.env.FUZZ_SEED) : Math.floor(Math.random() * 2 ** 31);

/** The DynamoDB project runs a tenth of the cases: the doors are the same, and dynalite is slower than SQLite. */
export const FUZZ_SCALE = TEST_STORE === 'dynamodb' ? 0.1 : 1;

/** One generated request. */
export interface Case {
  family: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
}

const TIMEOUT_MS = 10_000;

/** Push targets the gateway must refuse: private, loopback and metadata addresses, also inside IPv6 (issue 14), plain http, other schemes. */
export const REFUSED_PUSH_TARGETS = [
  'http://127.0.0.1:9/hook',
  'http://10.0.0.1/hook',
  'not a url',
  'ftp://example.com/x',
  'file:///etc/passwd',
  'http://[::1]/x',
  'http://169.254.169.254/latest',
  'http://93.184.216.34/hook',
  'https://10.0.0.1/hook',
  'https://[::169.254.169.254]/latest',
  'https://[::127.0.0.1]/hook',
  'https://[::ffff:127.0.0.1]/hook',
  'https://[::ffff:0:7f00:1]/hook',
  'https://[2002:7f00:1::1]/hook',
  'https://[2002:a9fe:a9fe::]/latest',
  'https://[64:ff9b::10.0.0.1]/hook',
  'https://[0:0:0:0:0:FFFF:A9FE:A9FE]/latest',
  'https://localhost/hook',
  'https://0x7f000001/hook',
  'https://2130706433/hook',
  'https://127.1/hook',
];

/**
 * Sends one case; the answer's label (`400 invalid_input`, `JSON-RPC -32602`, `accepted 200`, …)
 * and whether it is an answer the case may get. A refusal must carry a code; with `mayAccept`, a
 * 2xx (JSON, or an event stream read to its end) is fine too. Never a 5xx, a JSON-RPC internal
 * error (-32603), a body without a code, or a hang.
 */
export async function exchange(base: string, c: Case, mayAccept = false): Promise<{ ok: boolean; label: string }> {
  let response: Response;
  let text: string;
  try {
    response = await fetch(`${base}${c.path}`, { method: c.method, headers: c.headers, body: c.body, signal: AbortSignal.timeout(TIMEOUT_MS) });
    if ((response.headers.get('content-type') ?? '').includes('event-stream')) {
      if (!mayAccept) {
        await response.body?.cancel();
        return { ok: false, label: `accepted: a ${response.status} event stream` };
      }
      text = await response.text();
      if (/"code":\s*-32603/.test(text)) return { ok: false, label: `JSON-RPC internal error in a stream: ${text.slice(0, 300)}` };
      return { ok: response.status === 200, label: `accepted ${response.status} stream` };
    }
    text = await response.text();
  } catch (error) {
    return { ok: false, label: `hang or broken answer: ${error instanceof Error ? error.message : String(error)}` };
  }
  if (response.status >= 500) return { ok: false, label: `${response.status} ${text.slice(0, 200)}` };
  let body: { error?: { code?: unknown; status?: unknown; details?: { reason?: unknown }[] }; result?: unknown; jsonrpc?: unknown; code?: unknown; message?: unknown };
  try {
    body = JSON.parse(text);
  } catch {
    return { ok: false, label: `${response.status} with a body that is not JSON: ${text.slice(0, 100)}` };
  }
  const error = body?.error;
  if (body?.jsonrpc === '2.0') {
    if (typeof error?.code !== 'number') return { ok: mayAccept, label: `accepted: JSON-RPC result ${mayAccept ? '' : JSON.stringify(body).slice(0, 200)}` };
    if (error.code === -32603) return { ok: false, label: `JSON-RPC internal error ${JSON.stringify(error)}` };
    return { ok: response.status === 200 || response.status === 429, label: `JSON-RPC ${error.code}` };
  }
  if (response.status < 400) return { ok: mayAccept, label: `accepted: ${response.status} ${mayAccept ? '' : text.slice(0, 200)}` };
  if (typeof error?.code === 'string') return { ok: true, label: `${response.status} ${error.code}` };
  // A2A 0.3's HTTP+JSON error body: a JSON-RPC error's code and message, bare.
  if (typeof body?.code === 'number' && typeof body.message === 'string') return { ok: true, label: `${response.status} 0.3 ${body.code}` };
  const reason = error?.details?.find((detail) => typeof detail?.reason === 'string')?.reason;
  if (typeof error?.code === 'number' && typeof error.status === 'string') {
    return { ok: true, label: `${response.status} ${String(reason ?? error.status)}` };
  }
  return { ok: false, label: `${response.status} without a code: ${text.slice(0, 200)}` };
}

/** What a fuzz run met: cases by family, answers by label, the record's broken promises. */
export class Tally {
  cases = 0;
  checks = 0;
  readonly byFamily = new Map<string, number>();
  readonly byAnswer = new Map<string, number>();
  readonly failures: string[] = [];
  readonly breaks: string[] = [];

  note(c: Case, ok: boolean, label: string): void {
    this.cases += 1;
    this.byFamily.set(c.family, (this.byFamily.get(c.family) ?? 0) + 1);
    const answer = ok ? label.trim() : label.split(':')[0];
    this.byAnswer.set(answer, (this.byAnswer.get(answer) ?? 0) + 1);
    if (!ok) this.failures.push(`${c.method} ${c.path} → ${label}`);
  }

  count(pattern: RegExp): number {
    return [...this.byAnswer].filter(([answer]) => pattern.test(answer)).reduce((sum, [, n]) => sum + n, 0);
  }

  /** The figures, for a run asked for (`FUNDUQ_TEST_FIGURES=1`, or a replay by FUZZ_SEED): a passing suite prints nothing. */
  print(title: string): void {
    if (!process.env.FUNDUQ_TEST_FIGURES && process.env.FUZZ_SEED === undefined) return;
    console.log(`\n${title}: ${this.cases} generated requests over HTTP (FUZZ_SEED=${FUZZ_SEED}, store ${TEST_STORE})`);
    console.table(Object.fromEntries([...this.byFamily].map(([family, n]) => [family, { cases: n }])));
    console.table(Object.fromEntries([...this.byAnswer].sort().map(([answer, n]) => [answer, { answers: n }])));
    console.table({
      'cases tried': this.cases,
      accepted: this.count(/^accepted/),
      '4xx': this.count(/^4\d\d /),
      'JSON-RPC errors': this.count(/^JSON-RPC -/),
      '500s': this.count(/^5\d\d/),
      'JSON-RPC -32603': this.count(/internal error/),
      hangs: this.count(/^hang/),
      'record checks': this.checks,
      'invariant breaks': this.breaks.length,
    });
  }
}

/** Every broken promise of the gateway's record, read at rest (the queue idle, no run in flight). */
export async function breaksOf(gateway: LocalGateway): Promise<string[]> {
  await gateway.queue.idle();
  if (gateway.record.store === 'sqlite') return recordBreaks(sqliteSnapshot(gateway.store as unknown as SqliteRunStore));
  const client = localDynamoClient(gateway.record.endpoint);
  try {
    return recordBreaks(await dynamoSnapshot(client, gateway.record.tables));
  } finally {
    client.destroy();
  }
}

/**
 * Runs `numRuns` cases (times FUZZ_SCALE) of `arbitrary`, `batch` at a time, seeded with
 * FUZZ_SEED; after each `checkEvery` cases and at the end the record's invariants are checked.
 * A failing answer or a broken record fails the run, naming the seed that replays it.
 */
export async function fuzz(
  gateway: LocalGateway,
  tally: Tally,
  arbitrary: fc.Arbitrary<Case>,
  numRuns: number,
  options: { mayAccept?: boolean; batch?: number; checkEvery?: number } = {},
): Promise<void> {
  const batch = options.batch ?? 1;
  const checkEvery = options.checkEvery ?? 200;
  let sinceCheck = 0;
  const checkRecord = async (after: Case[]) => {
    tally.checks += 1;
    const breaks = await breaksOf(gateway);
    if (breaks.length > 0) {
      tally.breaks.push(...breaks);
      throw new Error(`the record broke its promises (replay: FUZZ_SEED=${FUZZ_SEED}):\n${breaks.join('\n')}\nafter: ${after.map(describe).join('\n')}`);
    }
  };
  const property = fc.asyncProperty(fc.array(arbitrary, { minLength: batch, maxLength: batch }), async (cases) => {
    const answers = await Promise.all(cases.map((c) => exchange(gateway.url, c, options.mayAccept)));
    answers.forEach(({ ok, label }, i) => tally.note(cases[i], ok, label));
    const failed = answers.findIndex(({ ok }) => !ok);
    if (failed >= 0) throw new Error(`${describe(cases[failed])}\n→ ${answers[failed].label}\n(replay: FUZZ_SEED=${FUZZ_SEED})`);
    sinceCheck += cases.length;
    if (sinceCheck >= checkEvery) {
      sinceCheck = 0;
      await checkRecord(cases);
    }
  });
  await fc.assert(property, { numRuns: Math.max(1, Math.ceil((numRuns * FUZZ_SCALE) / batch)), seed: FUZZ_SEED, endOnFailure: true });
  await checkRecord([]);
}

function describe(c: Case): string {
  return `${c.method} ${c.path} ${JSON.stringify(c.headers)} ${c.body === undefined ? '' : c.body.length > 300 ? `${c.body.slice(0, 300)}… (${c.body.length} chars)` : c.body}`;
}
