// The box's Lambda runtime for Node.js 22: what the managed runtime's bootstrap does for a
// function, against the Runtime API the box serves for this environment
// (https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html). Written after the behaviour of
// aws-lambda-nodejs-runtime-interface-client: a streamed response is one chunked POST whose
// headers go out with the first write, `HttpResponseStream.from` writes its prelude (JSON, then
// eight NUL bytes) just before that write, and errors travel as trailers.
// Plain JavaScript: it runs on the Node 22 binary, outside the test runner.
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { followBoxClock, moveBoxClock } from './wall-clock.mjs';

const api = process.env.AWS_LAMBDA_RUNTIME_API;
const [hostname, port] = api.split(':');
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
// Taken before the function's code loads: tracing libraries patch `http.request` for its own calls.
const httpRequest = http.request;
const STREAMING = Symbol.for('aws.lambda.runtime.handler.streaming');
const PRELUDE_TYPE = 'application/vnd.awslambda.http-integration-response';

// The platform's wall clock: the box may move it forward (its timers and the functions' Date agree).
followBoxClock();
process.channel?.unref();

// Each Lambda sandbox has a loopback of its own, where its extensions listen; the box's sandboxes
// share the machine's, so the extension's port in this sandbox is mapped to where the box serves it.
const extension = process.env._BOX_EXTENSION_URL;
if (extension) {
  const sandboxPort = process.env.PARAMETERS_SECRETS_EXTENSION_HTTP_PORT ?? '2773';
  const realFetch = globalThis.fetch;
  globalThis.fetch = (input, init) => {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    if ((url.hostname === 'localhost' || url.hostname === '127.0.0.1') && url.port === sandboxPort) {
      return realFetch(`${extension}${url.pathname}${url.search}`, init);
    }
    return realFetch(input, init);
  };
}
for (const name of Object.keys(process.env)) if (name.startsWith('_BOX_')) delete process.env[name];

globalThis.awslambda = {
  streamifyResponse(handler, options) {
    handler[STREAMING] = 'response';
    if (options?.highWaterMark) handler[Symbol.for('aws.lambda.runtime.handler.streaming.highWaterMark')] = options.highWaterMark;
    return handler;
  },
  HttpResponseStream: {
    from(stream, prelude) {
      stream.setContentType(PRELUDE_TYPE);
      const json = JSON.stringify(prelude);
      stream._onBeforeFirstWrite = (write) => {
        write(json);
        write(new Uint8Array(8));
      };
      return stream;
    },
  },
};

function request(method, path, { headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ hostname, port, path, method, headers, agent }, (res) => {
      const chunks = [];
      res.on('data', (chunk) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

function errorBody(error) {
  const err = error instanceof Error ? error : new Error(String(error));
  return { errorType: err.name ?? 'Error', errorMessage: err.message, trace: String(err.stack ?? '').split('\n') };
}

async function postError(path, error) {
  const body = errorBody(error);
  await request('POST', path, {
    headers: { 'Content-Type': 'application/json', 'Lambda-Runtime-Function-Error-Type': body.errorType },
    body: JSON.stringify(body),
  });
}

function responseStream(id) {
  let written = false;
  let done;
  const finished = new Promise((resolve, reject) => (done = { resolve, reject }));
  const req = httpRequest({
    hostname,
    port,
    agent,
    method: 'POST',
    path: `/2018-06-01/runtime/invocation/${encodeURIComponent(id)}/response`,
    headers: {
      'Lambda-Runtime-Function-Response-Mode': 'streaming',
      Trailer: ['Lambda-Runtime-Function-Error-Type', 'Lambda-Runtime-Function-Error-Body'],
      'Content-Type': 'application/octet-stream',
      'Transfer-Encoding': 'chunked',
    },
  }, (res) => {
    res.resume();
    res.on('end', () => done.resolve());
    res.on('aborted', () => done.reject(new Error('the response was aborted')));
  });
  req.on('error', (error) => {
    done.reject(error);
    req.destroy(error);
  });
  req.setContentType = (type) => {
    if (written) throw new Error('Cannot set content-type, too late.');
    req.setHeader('Content-Type', type);
  };
  const write = req.write.bind(req);
  req.write = function (chunk, encoding, callback) {
    if (typeof chunk !== 'string' && !Buffer.isBuffer(chunk) && !(chunk instanceof Uint8Array)) chunk = JSON.stringify(chunk);
    if (!written && typeof this._onBeforeFirstWrite === 'function') this._onBeforeFirstWrite((part) => write(part));
    written = true;
    return write(chunk, encoding, callback);
  };
  const fail = (error) => {
    const body = errorBody(error);
    req.addTrailers({
      'Lambda-Runtime-Function-Error-Type': body.errorType,
      'Lambda-Runtime-Function-Error-Body': Buffer.from(JSON.stringify(body)).toString('base64'),
    });
    req.end();
  };
  finished.catch(() => {});
  return { stream: req, finished, fail };
}

let current;
process.on('uncaughtException', (error) => exitWith(error, 129));
process.on('unhandledRejection', (error) => exitWith(error, 128));
function exitWith(error, code) {
  console.error('Uncaught', error);
  const path = current ? `/2018-06-01/runtime/invocation/${encodeURIComponent(current)}/error` : '/2018-06-01/runtime/init/error';
  postError(path, error).finally(() => process.exit(code));
}

function contextOf(headers) {
  // The deadline is on the platform's wall clock, which the box may move forward while the
  // invocation runs; the time left is elapsed time, as Lambda's timeout is (and the box's).
  const left = Number(headers['lambda-runtime-deadline-ms']) - Date.now();
  const since = performance.now();
  return {
    awsRequestId: headers['lambda-runtime-aws-request-id'],
    invokedFunctionArn: headers['lambda-runtime-invoked-function-arn'],
    functionName: process.env.AWS_LAMBDA_FUNCTION_NAME,
    functionVersion: process.env.AWS_LAMBDA_FUNCTION_VERSION,
    memoryLimitInMB: process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE,
    logGroupName: process.env.AWS_LAMBDA_LOG_GROUP_NAME,
    logStreamName: process.env.AWS_LAMBDA_LOG_STREAM_NAME,
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => left - (performance.now() - since),
  };
}

let handler;
try {
  const [file, name] = process.env._HANDLER.split('.');
  const started = performance.now();
  const module = await import(pathToFileURL(`${process.env.LAMBDA_TASK_ROOT}/${file}.mjs`).href);
  process.send?.({ init: { importMs: performance.now() - started } });
  handler = module[name];
  if (typeof handler !== 'function') throw new Error(`${process.env._HANDLER} is undefined or not exported`);
} catch (error) {
  await postError('/2018-06-01/runtime/init/error', error);
  process.exit(1);
}

for (;;) {
  const next = await request('GET', '/2018-06-01/runtime/invocation/next');
  const id = next.headers['lambda-runtime-aws-request-id'];
  moveBoxClock(Number(next.headers['box-clock-offset']));
  current = id;
  process.env._X_AMZN_TRACE_ID = next.headers['lambda-runtime-trace-id'] ?? '';
  const event = JSON.parse(next.body);
  const context = contextOf(next.headers);
  if (handler[STREAMING] === 'response') {
    const { stream, finished, fail } = responseStream(id);
    try {
      await handler(event, stream, context);
      await finished;
      if (!stream.writableFinished) fail(new Error('Response stream is not finished.'));
    } catch (error) {
      fail(error);
      await finished.catch(() => {});
    }
  } else {
    try {
      const result = await handler(event, context);
      await request('POST', `/2018-06-01/runtime/invocation/${encodeURIComponent(id)}/response`, {
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(result === undefined ? null : result),
      });
    } catch (error) {
      console.error('Invoke Error', error);
      await postError(`/2018-06-01/runtime/invocation/${encodeURIComponent(id)}/error`, error);
    }
  }
  current = undefined;
}
