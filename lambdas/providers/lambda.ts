import { InvokeWithResponseStreamCommand, LambdaClient, type InvokeWithResponseStreamResponseEvent } from '@aws-sdk/client-lambda';
import type { RunAgentInput } from '@ag-ui/core';
import { z } from 'zod';
import { RunFailure } from '../core/errors.js';
import type { Agent } from '../core/model.js';
import type { Provider, ProviderContext } from '../core/ports.js';
import { providerKind } from './definition.js';
import { FUNCTION_NAME, QUALIFIER } from './function-name.js';
import { sseEvents } from './sse-events.js';

/**
 * The content type of a response stream whose handler wrapped it with `awslambda.HttpResponseStream.from`:
 * a JSON prelude (status code and headers), eight NUL bytes, then the body.
 */
const HTTP_INTEGRATION_RESPONSE = 'application/vnd.awslambda.http-integration-response';
const PRELUDE_END = new Uint8Array(8);
/** The most a prelude may take before the body must have begun. */
const MOST_PRELUDE_BYTES = 64 * 1024;

export interface LambdaProviderSpec {
  kind: 'lambda';
  functionName: string;
  qualifier?: string;
}

/**
 * The `lambda` kind: an agent deployed as an AWS Lambda function of the same account, invoked with
 * response streaming (`InvokeWithResponseStream`). Its event is the `RunAgentInput`; it answers
 * AG-UI events as SSE, with `awslambda.streamifyResponse` (optionally wrapped by `HttpResponseStream`
 * to give a status code and a content type). The stack lets the dispatcher invoke only the
 * functions its `agentFunctions` setting names.
 */
export const lambdaKind = providerKind({
  kind: 'lambda',
  fields: {
    functionName: z.string().regex(FUNCTION_NAME, 'must be a Lambda function name or ARN, without a qualifier'),
    qualifier: z.string().regex(QUALIFIER, 'must be a version number, $LATEST or an alias name').optional(),
  },
  spec: ({ functionName, qualifier }) => ({ kind: 'lambda', functionName, ...(qualifier ? { qualifier } : {}) }),
  // Function names and qualifiers are not credentials.
  adminView: (spec) => ({ functionName: spec.functionName, ...(spec.qualifier !== undefined ? { qualifier: spec.qualifier } : {}) }),
  create: (runtime) => new LambdaProvider(runtime.lambda),
});

export class LambdaProvider implements Provider {
  private client: LambdaClient | undefined;

  /** Without a client, one for the runtime's own region and credentials is made on first use. */
  constructor(client?: LambdaClient) {
    this.client = client;
  }

  async *run(input: RunAgentInput, { agent, signal, heartbeat }: ProviderContext): AsyncIterable<unknown> {
    const { functionName, qualifier } = specOf(agent);
    const where = `function ${functionName}${qualifier ? `:${qualifier}` : ''}`;
    if (signal.aborted) return;
    this.client ??= new LambdaClient({});
    let response;
    try {
      response = await this.client.send(
        new InvokeWithResponseStreamCommand({
          FunctionName: functionName,
          ...(qualifier ? { Qualifier: qualifier } : {}),
          Payload: new TextEncoder().encode(JSON.stringify(input)),
        }),
        { abortSignal: signal },
      );
    } catch (error) {
      if (signal.aborted) return;
      throw new RunFailure('provider_unreachable', `could not invoke ${where}: ${describe(error)}`);
    }
    if (!response.EventStream) throw new RunFailure('provider_not_agui', `${where} answered without a response stream`);
    const body = new ResponseBody(response.EventStream, where, signal, heartbeat);
    try {
      const chunks = response.ResponseStreamContentType === HTTP_INTEGRATION_RESPONSE ? body.afterPrelude() : body.chunks();
      if (response.ResponseStreamContentType && response.ResponseStreamContentType !== HTTP_INTEGRATION_RESPONSE) {
        checkContentType(response.ResponseStreamContentType, where);
      }
      for await (const event of sseEvents(chunks, where)) {
        if (signal.aborted) return;
        yield event;
      }
      body.throwIfFailed();
    } catch (error) {
      // A stop (a cancel, a time limit) is the core's: not the agent's failure.
      if (signal.aborted) return;
      throw error;
    }
  }
}

/**
 * A response stream's payload. `InvokeComplete` ends it; its `ErrorCode` is a function error
 * (an unhandled exception, a timeout), which the run fails with as a gateway would: 502.
 */
class ResponseBody {
  private failure: RunFailure | undefined;

  constructor(
    private readonly events: AsyncIterable<InvokeWithResponseStreamResponseEvent>,
    private readonly where: string,
    private readonly signal: AbortSignal,
    private readonly heartbeat: () => void,
  ) {}

  async *chunks(): AsyncGenerator<Uint8Array> {
    try {
      for await (const event of abortable(this.events, this.signal)) {
        if (event.PayloadChunk?.Payload) {
          this.heartbeat();
          yield event.PayloadChunk.Payload;
        }
        const complete = event.InvokeComplete;
        if (complete?.ErrorCode) {
          const details = complete.ErrorDetails ? `: ${complete.ErrorDetails.slice(0, 1024)}` : '';
          this.failure = new RunFailure('provider_http_502', `${this.where} failed (${complete.ErrorCode})${details}`);
          return;
        }
      }
    } catch (error) {
      if (this.signal.aborted) return;
      throw new RunFailure('provider_disconnected', `${this.where} broke off its response stream: ${describe(error)}`);
    }
  }

  /** The body after an `HttpResponseStream` prelude, once the prelude said 2xx and an event stream. */
  async *afterPrelude(): AsyncGenerator<Uint8Array> {
    let head: Uint8Array = new Uint8Array(0);
    const chunks = this.chunks();
    for await (const chunk of chunks) {
      head = concat(head, chunk);
      const end = indexOf(head, PRELUDE_END);
      if (end < 0) {
        if (head.length > MOST_PRELUDE_BYTES) throw new RunFailure('provider_not_agui', `${this.where} sent no response prelude`);
        continue;
      }
      this.checkPrelude(new TextDecoder().decode(head.subarray(0, end)));
      const rest = head.subarray(end + PRELUDE_END.length);
      if (rest.length > 0) yield rest;
      yield* chunks;
      return;
    }
    this.throwIfFailed();
    throw new RunFailure('provider_not_agui', `${this.where} ended its response stream inside its prelude`);
  }

  throwIfFailed(): void {
    if (this.failure) throw this.failure;
  }

  private checkPrelude(text: string): void {
    let prelude: { statusCode?: unknown; headers?: Record<string, unknown> };
    try {
      prelude = JSON.parse(text) as typeof prelude;
    } catch {
      throw new RunFailure('provider_not_agui', `${this.where} sent a response prelude that is not JSON`);
    }
    const status = typeof prelude.statusCode === 'number' ? prelude.statusCode : 200;
    if (status < 200 || status > 299) throw new RunFailure(`provider_http_${status}`, `${this.where} answered HTTP ${status}`);
    const headers = Object.fromEntries(Object.entries(prelude.headers ?? {}).map(([name, value]) => [name.toLowerCase(), String(value)]));
    checkContentType(headers['content-type'] ?? '', this.where);
  }
}

/** The source's items until the signal aborts: a response stream the SDK keeps open is let go of at once. */
async function* abortable<T>(source: AsyncIterable<T>, signal: AbortSignal): AsyncGenerator<T> {
  const iterator = source[Symbol.asyncIterator]();
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(new DOMException('the run was stopped', 'AbortError'));
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  aborted.catch(() => undefined);
  try {
    for (;;) {
      const next = await Promise.race([iterator.next(), aborted]);
      if (next.done) return;
      yield next.value;
    }
  } finally {
    signal.removeEventListener('abort', onAbort!);
    void Promise.resolve(iterator.return?.()).catch(() => undefined);
  }
}

function checkContentType(contentType: string, where: string): void {
  // A stream written without a type is application/octet-stream: the handler's bytes as they are.
  if (contentType === '' || /^application\/octet-stream\b/i.test(contentType)) return;
  if (!/^text\/event-stream\b/i.test(contentType.trim())) {
    throw new RunFailure('provider_not_agui', `${where} answered ${contentType}, not text/event-stream`);
  }
}

function specOf(agent: Agent): LambdaProviderSpec {
  const { functionName, qualifier } = agent.provider as Partial<LambdaProviderSpec>;
  if (typeof functionName !== 'string' || functionName === '') {
    throw new RunFailure('provider_not_configured', `agent ${agent.id} names no function`);
  }
  return { kind: 'lambda', functionName, ...(typeof qualifier === 'string' ? { qualifier } : {}) };
}

/** The AWS error's code and message: `ResourceNotFoundException: Function not found: …`, `AccessDeniedException: …`. */
function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  return error.name && error.name !== 'Error' && !error.message.startsWith(error.name) ? `${error.name}: ${error.message}` : error.message;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const joined = new Uint8Array(a.length + b.length);
  joined.set(a);
  joined.set(b, a.length);
  return joined;
}

function indexOf(haystack: Uint8Array, needle: Uint8Array): number {
  outer: for (let i = 0; i + needle.length <= haystack.length; i++) {
    for (let j = 0; j < needle.length; j++) if (haystack[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}
