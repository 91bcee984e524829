import { createHash } from 'node:crypto';
import http from 'node:http';
import fc from 'fast-check';
import { expect } from 'vitest';
import { WebSocket } from 'ws';
import { localDynamoClient } from '../../lambdas/adapters/local/dynalite.js';
import type { SqliteStore } from '../../lambdas/adapters/local/sqlite/store.js';
import { MAX_CALLER_ID_LENGTH } from '../../lambdas/core/model.js';
import type { IdSource } from '../../lambdas/core/ports.js';
import type { LocalGateway, LocalSettings } from '../../lambdas/runtimes/local.js';
import { startTestGateway } from './gateway.js';
import { dynamoSlice, dynamoSnapshot, recordBreaks, sqliteSlice, sqliteSnapshot, type RecordSnapshot } from './record-invariants.js';
import { TEST_STORE } from './stores.js';

/**
 * The fuzz's seed: FUZZ_SEED replays a run (the same cases in the same order, one at a time, with
 * the same ids), else a new one. Every failure names it.
 */
export const FUZZ_SEED = process.env.FUZZ_SEED !== undefined ? Number(process.env.FUZZ_SEED) : Math.floor(Math.random() * 2 ** 31);

/**
 * A replay: each batch's cases are sent one after another with the record checked after each, so a
 * failure names its case. They are the cases a run sent side by side: a batch's cases never share a
 * thread or a run (every id that may be written is drawn fresh), so their order changes no outcome.
 */
const REPLAY = process.env.FUZZ_SEED !== undefined;

/** With FUZZ_SEED, fast-check's path of a failing batch (its report prints it): only that batch is sent. */
const FUZZ_PATH = process.env.FUZZ_PATH;

/**
 * How many of each test's cases a run sends: half of them on SQLite (over 10,000 requests; every
 * run draws new ones from a seed of its own, so the runs of a week cover far more), a twentieth on
 * DynamoDB (the doors are the same, and dynalite is slower). FUNDUQ_FUZZ_SCALE sets it (1: all).
 */
export const FUZZ_SCALE = process.env.FUNDUQ_FUZZ_SCALE !== undefined ? Number(process.env.FUNDUQ_FUZZ_SCALE) : TEST_STORE === 'dynamodb' ? 0.05 : 0.5;

/**
 * An id no other case has: a UUID drawn from the seed (a replay draws the same) without fast-check's
 * bias towards small values, which makes `fc.uuid()` repeat itself over thousands of cases.
 */
export const freshId = fc.noBias(fc.uuid());

/** One generated request. */
export interface Case {
  family: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
  /**
   * A WebSocket upgrade to `path` (the provider link) instead of an HTTP request; once linked, these
   * messages are sent, then a heartbeat whose answer says they were all handled.
   */
  link?: { messages: string[] };
}

/**
 * The gateway's ids (run and thread ids of A2A tasks, message ids, link connections), made from the
 * seed so that a replay makes the same ones, and noted, so that the check after a case reads the
 * threads and runs it opened with ids of the gateway's making.
 */
export class FuzzIds implements IdSource {
  private made = 0;
  private fresh: string[] = [];

  newId(): string {
    this.made += 1;
    const hex = createHash('sha256').update(`${FUZZ_SEED}/${this.made}`).digest('hex');
    const id = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
    this.fresh.push(id);
    return id;
  }

  /** The ids made since the last take. */
  take(): string[] {
    const taken = this.fresh;
    this.fresh = [];
    return taken;
  }
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
  if (c.link) return linkExchange(base, c, mayAccept);
  let response: Answer;
  let text: string;
  try {
    response = await request(base, c, mayAccept);
    const { type } = response;
    text = response.text;
    if (type.includes('event-stream')) {
      if (!mayAccept) return { ok: false, label: `accepted: a ${response.status} event stream` };
      if (/"code":\s*-32603/.test(text)) return { ok: false, label: `JSON-RPC internal error in a stream: ${text.slice(0, 300)}` };
      return { ok: response.status === 200, label: `accepted ${response.status} stream` };
    }
    // The usage export: one CloudEvent per line, read to its end.
    if (type.includes('ndjson') && response.status === 200) {
      const lines = text.split('\n').filter((line) => line !== '');
      const broken = lines.find((line) => !isCloudEvent(line));
      if (broken !== undefined) return { ok: false, label: `200 export with a line that is no CloudEvent: ${broken.slice(0, 200)}` };
      return { ok: mayAccept, label: `accepted: 200 export of ${lines.length === 0 ? 'no' : 'some'} events` };
    }
  } catch (error) {
    return { ok: false, label: `hang or broken answer: ${error instanceof Error ? error.message : String(error)}` };
  }
  if (response.status >= 500) return { ok: false, label: `${response.status} ${text.slice(0, 200)}` };
  if (response.status === 204 && text === '') return { ok: mayAccept, label: 'accepted: 204' };
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
  /** Checks of what a case (or a batch) touched, and of the whole record. */
  caseChecks = 0;
  fullChecks = 0;
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
      'record checks after cases': this.caseChecks,
      'whole-record checks': this.fullChecks,
      'invariant breaks': this.breaks.length,
    });
  }
}


/** Connections kept open between cases, as a client keeps them: a case costs its request, not a TCP handshake. */
const agent = new http.Agent({ keepAlive: true });

interface Answer {
  status: number;
  type: string;
  text: string;
}

/**
 * One exchange over node:http, the answer read to its end (an event stream only when `readStream`,
 * else left unread). The request is what fetch would send (its URL parsed, so dot segments are
 * resolved; a body's length declared), at a third of fetch's cost in this process, which serves
 * the gateway too.
 */
function request(base: string, c: Case, readStream: boolean): Promise<Answer> {
  const url = new URL(`${base}${c.path}`);
  const body = c.body === undefined ? undefined : Buffer.from(c.body);
  const length = body !== undefined ? { 'content-length': String(body.length) } : ['POST', 'PUT', 'PATCH'].includes(c.method) ? { 'content-length': '0' } : {};
  return new Promise((resolve, reject) => {
    const sent = http.request(url, { method: c.method, headers: { accept: '*/*', ...length, ...c.headers }, agent, signal: AbortSignal.timeout(TIMEOUT_MS) }, (answer) => {
      const status = answer.statusCode ?? 0;
      const type = String(answer.headers['content-type'] ?? '');
      if (type.includes('event-stream') && !readStream) {
        answer.destroy();
        resolve({ status, type, text: '' });
        return;
      }
      const chunks: Buffer[] = [];
      answer.on('data', (chunk: Buffer) => chunks.push(chunk));
      answer.on('end', () => resolve({ status, type, text: Buffer.concat(chunks).toString('utf8') }));
      answer.on('close', () => {
        if (!answer.complete) reject(new Error('the answer broke off'));
      });
    });
    // An error after the answer (the gateway closed a connection whose body it did not read) changes nothing.
    sent.on('error', reject);
    sent.end(body);
  });
}

function isCloudEvent(line: string): boolean {
  try {
    const event = JSON.parse(line) as { specversion?: unknown; id?: unknown };
    return event.specversion === '1.0' && typeof event.id === 'string';
  } catch {
    return false;
  }
}

/**
 * A WebSocket upgrade to the provider link. A refusal is answered on the upgrade itself: a 4xx
 * with `{error: {code}}`. With `mayAccept` a link may open: its messages are sent, and the
 * heartbeat's answer after them says each was handled (answered with an `error` frame, or taken);
 * the gateway may close the link with a code of its own (4000–4999) instead.
 */
function linkExchange(base: string, c: Case, mayAccept: boolean): Promise<{ ok: boolean; label: string }> {
  return new Promise((resolve) => {
    let socket: WebSocket;
    const errors: string[] = [];
    let done = false;
    const finish = (ok: boolean, label: string) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (socket.readyState === WebSocket.OPEN) socket.close(1000);
      else if (socket.readyState === WebSocket.CONNECTING) socket.terminate();
      resolve({ ok, label });
    };
    const timer = setTimeout(() => finish(false, `hang: the link said nothing for ${TIMEOUT_MS} ms`), TIMEOUT_MS);
    try {
      socket = new WebSocket(`${base.replace(/^http/, 'ws')}${c.path}`, { headers: c.headers });
    } catch (error) {
      clearTimeout(timer);
      resolve({ ok: false, label: `the case cannot be sent: ${error instanceof Error ? error.message : String(error)}` });
      return;
    }
    socket.on('unexpected-response', (_request, response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => (text += chunk.toString()));
      response.on('end', () => {
        const status = response.statusCode ?? 0;
        let code: unknown;
        try {
          code = (JSON.parse(text) as { error?: { code?: unknown } }).error?.code;
        } catch {
          // Named below.
        }
        if (status >= 500 || typeof code !== 'string') finish(false, `${status} refusal of a link without a code: ${text.slice(0, 200)}`);
        else finish(status >= 400, `${status} ${code}`);
      });
    });
    socket.on('message', (data) => {
      let frame: { type?: unknown; code?: unknown };
      try {
        frame = JSON.parse(String(data)) as typeof frame;
      } catch {
        finish(false, `a link message that is not JSON: ${String(data).slice(0, 200)}`);
        return;
      }
      if (frame.type === 'welcome') {
        if (!mayAccept) {
          finish(false, 'accepted: a link opened');
          return;
        }
        for (const message of c.link!.messages) socket.send(message);
        socket.send(JSON.stringify({ v: 1, type: 'heartbeat' }));
      } else if (frame.type === 'error') errors.push(String(frame.code));
      else if (frame.type === 'heartbeat') finish(true, `accepted: link, ${errors.length === 0 ? 'no error frame' : [...new Set(errors)].sort().join(', ')}`);
    });
    // 1009: a message over the link's most (RFC 6455 §7.4.1); 4000–4999: the gateway's own reasons.
    socket.on('close', (code) => finish(code === 1009 || (code >= 4000 && code < 5000), `link closed by the gateway with ${code}`));
    socket.on('error', (error) => {
      if (!String(error.message).includes('Unexpected server response')) finish(false, `hang or broken answer: ${error.message}`);
    });
  });
}

/**
 * What the gateway logs when something failed that no answer shows (a dispatch, a link's frame,
 * a timer): a line of `report` (lambdas/runtimes/local.ts) or the link's own.
 */
const FAILURE_LINE = / failed: |the store stopped/;

/** Ids a case names, in its path and in the id fields of its body: what it may have written. */
function namedIds(c: Case): string[] {
  const ids = new Set<string>();
  for (const segment of new URL(c.path, 'http://x').pathname.split('/')) {
    const decoded = decodeURIComponentSafe(segment);
    ids.add(decoded);
    // A2A's HTTP+JSON custom methods: `tasks/{id}:cancel`.
    if (decoded.includes(':')) ids.add(decoded.slice(0, decoded.lastIndexOf(':')));
  }
  for (const [, literal] of (c.body ?? '').slice(0, 400_000).matchAll(ID_FIELD)) {
    try {
      const id: unknown = JSON.parse(literal);
      if (typeof id === 'string') ids.add(id);
    } catch {
      // Not a JSON string after all (the body is not JSON): nothing it names.
    }
    if (ids.size > 64) break;
  }
  // Only what a store can key: 1 to 256 characters (MAX_CALLER_ID_LENGTH).
  return [...ids].filter((id) => id.length > 0 && id.length <= MAX_CALLER_ID_LENGTH);
}

const ID_FIELD = /"(?:threadId|runId|contextId|taskId|parentRunId|id)"\s*:\s*("(?:[^"\\]|\\.){1,1100}")/g;

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/**
 * A gateway under fuzz: its ids made from the seed, its failure lines noted, and the tenant whose
 * threads its cases name. `send` sends a case and notes its answer; `check` reads what the cases
 * since the last check touched and holds it to the record's invariants.
 */
export class FuzzedGateway {
  readonly tally = new Tally();
  /** Ids the cases since the last check named. */
  private readonly named = new Map<Case, string[]>();
  private sinceFull = 0;
  /** A client of dynalite's for the checks of one property, on the DynamoDB store. */
  private dynamo: ReturnType<typeof localDynamoClient> | undefined;

  private constructor(
    readonly gateway: LocalGateway,
    private readonly ids: FuzzIds,
    private readonly failureLines: string[],
    readonly tenant: string,
  ) {}

  /** The test gateway (see `startTestGateway`) for a fuzz whose callers are of `tenant`. */
  static async start(tenant: string, settings: Partial<LocalSettings> = {}): Promise<FuzzedGateway> {
    const ids = new FuzzIds();
    const failureLines: string[] = [];
    const log = (line: string) => {
      if (FAILURE_LINE.test(line)) failureLines.push(line);
    };
    return new FuzzedGateway(await startTestGateway({ ...settings, ids, log }), ids, failureLines, tenant);
  }

  get url(): string {
    return this.gateway.url;
  }

  close(): Promise<void> {
    return this.gateway.close();
  }

  /** Sends a case and notes its answer; an answer it may not get throws, naming the case and the seed. */
  async send(c: Case, mayAccept = false): Promise<{ ok: boolean; label: string }> {
    const answer = await exchange(this.gateway.url, c, mayAccept);
    this.tally.note(c, answer.ok, answer.label);
    this.named.set(c, namedIds(c));
    if (!answer.ok) {
      // What the gateway logged of it (the error behind a 500) belongs to this case, not to the next check.
      const logged = this.failureLines.splice(0);
      throw new Error(`${describe(c)}\n→ ${answer.label}${logged.length > 0 ? `\nthe gateway logged: ${logged.join('\n')}` : ''}\n${replayHint()}`);
    }
    return answer;
  }

  /**
   * The record at rest (the queue idle) after the cases sent since the last check: the threads and
   * runs they named or the gateway made for them, and their tenant's places, hold the record's
   * invariants (see `recordBreaks`), and the gateway logged no failure meanwhile. A break names the
   * cases whose ids it names (else all of them: a replay checks after each case).
   */
  async check(): Promise<void> {
    const cases = [...this.named.keys()];
    const made = this.ids.take();
    const ids = [...new Set([...this.named.values()].flat().concat(made))];
    this.named.clear();
    await this.gateway.queue.idle();
    this.sinceFull += cases.length;
    const logged = this.failureLines.splice(0);
    if (logged.length > 0) {
      this.tally.failures.push(...logged);
      throw new Error(`the gateway logged a failure after ${cases.length === 1 ? 'this case' : `one of these ${cases.length} cases`}:\n${cases.map(describe).join('\n')}\n${logged.join('\n')}\n${replayHint()}`);
    }
    this.tally.caseChecks += 1;
    const breaks = recordBreaks(await this.read({ tenant: this.tenant, ids }));
    if (breaks.length > 0) this.broke(breaks, cases, made);
  }

  /** The whole record holds the invariants; with `every`, only once that many cases were sent since the last whole check. */
  async checkAll(every = 0): Promise<void> {
    if (this.sinceFull < every) return;
    this.sinceFull = 0;
    this.tally.fullChecks += 1;
    const breaks = await breaksOf(this.gateway);
    if (breaks.length > 0) this.broke(breaks, [], []);
  }

  private broke(breaks: string[], cases: Case[], made: string[]): never {
    this.tally.breaks.push(...breaks);
    const blamed = cases.filter((c) => breaks.some((line) => namedIds(c).some((id) => id.length > 3 && line.includes(id))));
    const after = blamed.length > 0 ? blamed : cases;
    const what = after.length === 0 ? 'the whole record' : `after ${after.length === 1 ? 'this case' : `one of these ${after.length} cases`}:\n${after.map(describe).join('\n')}`;
    throw new Error(`the record broke its promises (${what}${made.length > 0 ? `\nids the gateway made meanwhile: ${made.join(', ')}` : ''})\n${breaks.join('\n')}\n${replayHint()}`);
  }

  private async read(slice: { tenant: string; ids: string[] }): Promise<RecordSnapshot> {
    const { gateway } = this;
    if (gateway.record.store === 'sqlite') return sqliteSlice(gateway.store as unknown as SqliteStore, slice);
    const client = this.dynamo ?? (this.dynamo = localDynamoClient(gateway.record.endpoint));
    return dynamoSlice(client, gateway.record.tables, slice);
  }

  /**
   * Runs `numRuns` cases (times FUZZ_SCALE) of `arbitrary`, seeded with FUZZ_SEED, `batch` at a
   * time side by side (one by one in a replay), checking the record after each batch (each case in
   * a replay) and the whole record every `wholeEvery` cases and at the end. An answer the case may
   * not get, or a broken record, fails the run, naming the seed that replays it.
   */
  fuzz(arbitrary: fc.Arbitrary<Case>, numRuns: number, options: { mayAccept?: boolean; batch?: number; wholeEvery?: number } = {}): Promise<void> {
    return this.scenarios(arbitrary, numRuns, async (c) => void (await this.send(c, options.mayAccept)), options);
  }

  /**
   * As `fuzz`, for scenarios drawn from `arbitrary`, each sending its cases through `send`: side by
   * side, each must keep to ids of its own.
   */
  async scenarios<T>(arbitrary: fc.Arbitrary<T>, numRuns: number, scenario: (drawn: T) => Promise<void>, options: { batch?: number; wholeEvery?: number } = {}): Promise<void> {
    const batch = options.batch ?? 1;
    // Not scaled: a whole read of dynalite's tables is a scan, the cost of many cases.
    const wholeEvery = options.wholeEvery ?? 2_000;
    const property = fc.asyncProperty(fc.array(arbitrary, { minLength: batch, maxLength: batch }), async (drawn) => {
      if (REPLAY || batch === 1) {
        for (const one of drawn) {
          await scenario(one);
          await this.check();
        }
      } else {
        const ran = await Promise.allSettled(drawn.map(scenario));
        const failed = ran.find((result) => result.status === 'rejected');
        if (failed) throw failed.reason;
        await this.check();
      }
      await this.checkAll(wholeEvery);
    });
    await this.assert(property, Math.max(1, Math.ceil((numRuns * FUZZ_SCALE) / batch)));
    await this.checkAll();
  }

  /**
   * Each test draws from a seed of its own, made from FUZZ_SEED and its name: with one seed for all,
   * two tests would draw the same values in the same order, and the ids of one would be another's.
   */
  private async assert<T>(property: fc.IAsyncProperty<T>, numRuns: number): Promise<void> {
    const seed = createHash('sha256').update(`${FUZZ_SEED}/${expect.getState().currentTestName ?? ''}`).digest().readUInt32BE(0) >>> 1;
    try {
      // With a path, fast-check starts at that run: one run is the failing batch alone.
      await fc.assert(property, { seed, endOnFailure: true, ...(REPLAY && FUZZ_PATH ? { path: FUZZ_PATH, numRuns: 1 } : { numRuns }) });
    } finally {
      this.dynamo?.destroy();
      this.dynamo = undefined;
    }
  }
}

function replayHint(): string {
  return `(replay: FUZZ_SEED=${FUZZ_SEED}, the seed the test's own is made from; add FUZZ_PATH=<the path fast-check reports> and -t '<this test>' to send only the failing batch)`;
}

/** Every broken promise of the gateway's record, read whole at rest (the queue idle, no run in flight). */
export async function breaksOf(gateway: LocalGateway): Promise<string[]> {
  await gateway.queue.idle();
  if (gateway.record.store === 'sqlite') return recordBreaks(sqliteSnapshot(gateway.store as unknown as SqliteStore));
  const client = localDynamoClient(gateway.record.endpoint);
  try {
    return recordBreaks(await dynamoSnapshot(client, gateway.record.tables));
  } finally {
    client.destroy();
  }
}

function describe(c: Case): string {
  const body = c.body === undefined ? '' : c.body.length > 300 ? `${c.body.slice(0, 300)}… (${c.body.length} chars)` : c.body;
  const messages = c.link ? ` then on the link: ${c.link.messages.map((m) => (m.length > 200 ? `${m.slice(0, 200)}…` : m)).join(' | ')}` : '';
  return `${c.link ? 'UPGRADE' : c.method} ${c.path} ${JSON.stringify(c.headers)} ${body}${messages}`;
}
