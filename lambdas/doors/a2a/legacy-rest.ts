import { restStatusFor, UnsupportedOperationError } from '@a2a-js/sdk/errors';
import { LegacyRestTransportHandler, toLegacyHTTPError } from '@a2a-js/sdk/compat/v0_3/server';
import { Hono, type Context } from 'hono';
import { TryLaterError } from './errors.js';
import { legacyStream } from './legacy.js';
import { messageSendParams, sendResultOut, streamResultOut, taskOut, taskPushConfigIn, taskPushConfigOut } from './legacy-rest-codec.js';
import { bindingCall, type Binding, type Call as RestCall, type Env, type RestOptions } from './rest.js';
import { streamResponse } from './wire.js';

type Call = RestCall & { transport: LegacyRestTransportHandler };
/** 0.3's JSON-schema shapes, as the SDK's 0.3 request handler takes them (its types are not exported). */
type SendParams = Parameters<LegacyRestTransportHandler['sendMessage']>[0];
type PushConfig = Parameters<LegacyRestTransportHandler['setTaskPushNotificationConfig']>[0];

/** 0.3 bodies are plain JSON (1.0 adds `application/a2a+json`). */
const JSON_TYPE = 'application/json';
const REST_0_3: Binding = { types: [JSON_TYPE], legacy: true, error: legacyError, contentType: JSON_TYPE };

/**
 * A2A 0.3's HTTP+JSON binding under `/a2a/{agentId}/rest/v1` (0.3 names its routes `/v1/…`), route
 * for route as the SDK's 0.3 Express adapter has it: the SDK's 0.3 request handler over funduq's,
 * with the 0.3 wire's protobuf JSON (`legacy-rest-codec.ts`) and its bare `{ code, message }` error
 * bodies; 429 with Retry-After for back-pressure. 0.3 has no ListTasks over HTTP+JSON.
 */
export function legacyRestRoutes(options: RestOptions) {
  const { sse } = options;
  const routes = new Hono<Env>();
  const legacy = (work: (call: Call) => Promise<Response>) =>
    bindingCall(options, REST_0_3, (call) => work({ ...call, transport: new LegacyRestTransportHandler(call.handler) }));
  const json = (value: unknown, status = 200) =>
    new Response(status === 204 ? null : JSON.stringify(value), { status, headers: status === 204 ? {} : { 'Content-Type': JSON_TYPE } });
  const stream = async ({ stop }: Call, events: AsyncGenerator<unknown>) => {
    const iterator = legacyStream(events, false)[Symbol.asyncIterator]();
    const first = await iterator.next();
    return streamResponse(first, iterator, stop, streamResultOut, (error) => legacyError(error).body, sse);
  };
  const taskId = (c: Context<Env>, suffix = '') => (c.req.param('task') ?? '').slice(0, suffix ? -suffix.length : undefined);

  // The card a 0.3 client reads is the public one: this agent has no extended card.
  routes.get('/card', legacy(async () => {
    throw new UnsupportedOperationError('this agent has no extended agent card');
  }));
  routes.post('/:verb{message:send}', legacy(async ({ transport, context, body }) =>
    json(sendResultOut(await transport.sendMessage(messageSendParams(body) as unknown as SendParams, context))),
  ));
  routes.post('/:verb{message:stream}', legacy(async (call) =>
    stream(call, await call.transport.sendMessageStream(messageSendParams(call.body) as unknown as SendParams, call.context)),
  ));
  routes.on(['GET', 'POST'], '/tasks/:task{.+:subscribe}', legacy(async (call) =>
    stream(call, await call.transport.resubscribe(taskId(call.c, ':subscribe'), call.context)),
  ));
  routes.post('/tasks/:task{.+:cancel}', legacy(async ({ transport, context, c }) =>
    json(taskOut(await transport.cancelTask(taskId(c, ':cancel'), context))),
  ));
  routes.post('/tasks/:task{[^/]+}/pushNotificationConfigs', legacy(async ({ transport, context, body, c }) => {
    const config = await transport.setTaskPushNotificationConfig(taskPushConfigIn(body, taskId(c)) as unknown as PushConfig, context);
    return json(taskPushConfigOut(config), 201);
  }));
  routes.get('/tasks/:task{[^/]+}/pushNotificationConfigs', legacy(async ({ transport, context, c }) => {
    const configs = await transport.listTaskPushNotificationConfigs(taskId(c), context);
    return json({ configs: configs.map(taskPushConfigOut), nextPageToken: '' });
  }));
  routes.get('/tasks/:task{[^/]+}/pushNotificationConfigs/:config{.+}', legacy(async ({ transport, context, c }) =>
    json(taskPushConfigOut(await transport.getTaskPushNotificationConfig(taskId(c), c.req.param('config') ?? '', context))),
  ));
  routes.delete('/tasks/:task{[^/]+}/pushNotificationConfigs/:config{.+}', legacy(async ({ transport, context, c }) => {
    await transport.deleteTaskPushNotificationConfig(taskId(c), c.req.param('config') ?? '', context);
    return json(undefined, 204);
  }));
  routes.get('/tasks/:task{[^/]+}', legacy(async ({ transport, context, c }) => {
    const historyLength = c.req.query('historyLength') ?? c.req.query('history_length');
    return json(taskOut(await transport.getTask(taskId(c), context, historyLength || undefined)));
  }));
  return routes;
}

/** A 0.3 error: its bare `{ code, message }` body, the HTTP status of its kind, and 429 for back-pressure. */
function legacyError(error: unknown): { status: number; body: unknown; headers: Record<string, string> } {
  const body = toLegacyHTTPError(error);
  if (error instanceof TryLaterError) return { status: 429, body, headers: { 'Retry-After': String(error.retryAfterSeconds) } };
  return { status: restStatusFor(error), body, headers: {} };
}
