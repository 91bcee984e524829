import { RequestMalformedError } from '@a2a-js/sdk/errors';
import { isObject } from './wire.js';

/**
 * A2A 0.3's HTTP+JSON binding speaks the protobuf JSON of 0.3's `a2a.proto` (`content` for a
 * message's parts, `TASK_STATE_CANCELLED`, a status's message as `message`, push configs named
 * `tasks/{id}/pushNotificationConfigs/{configId}`), while the SDK's 0.3 request handler
 * (`LegacyRestTransportHandler`) takes and gives 0.3's JSON-schema objects (`kind`, `parts`). The
 * SDK keeps the codec between the two inside its Express adapter, so this is that codec, written
 * from the 0.3 proto (https://github.com/a2aproject/A2A/blob/v0.3.0/specification/grpc/a2a.proto).
 */

type Json = Record<string, unknown>;

const STATES: Record<string, string> = {
  submitted: 'TASK_STATE_SUBMITTED',
  working: 'TASK_STATE_WORKING',
  completed: 'TASK_STATE_COMPLETED',
  failed: 'TASK_STATE_FAILED',
  canceled: 'TASK_STATE_CANCELLED',
  'input-required': 'TASK_STATE_INPUT_REQUIRED',
  rejected: 'TASK_STATE_REJECTED',
  'auth-required': 'TASK_STATE_AUTH_REQUIRED',
  unknown: 'TASK_STATE_UNSPECIFIED',
};

const ROLES: Record<string, string> = { user: 'ROLE_USER', agent: 'ROLE_AGENT' };

/** The body of `POST /v1/message:send` and `:stream` (0.3 `SendMessageRequest`) as `MessageSendParams`. */
export function messageSendParams(body: unknown): Json {
  const request = object(body, 'the request body');
  const message = request.message ?? request.request;
  if (message === undefined) throw new RequestMalformedError('message is required');
  const configuration = request.configuration === undefined ? undefined : object(request.configuration, 'configuration');
  return defined({
    message: messageIn(object(message, 'message')),
    configuration: configuration
      ? defined({
          acceptedOutputModes: strings(configuration.acceptedOutputModes),
          blocking: typeof configuration.blocking === 'boolean' ? configuration.blocking : undefined,
          historyLength: configuration.historyLength === undefined ? undefined : Number(configuration.historyLength),
          pushNotificationConfig: configuration.pushNotification === undefined ? undefined : pushConfigIn(configuration.pushNotification),
        })
      : undefined,
    metadata: metadata(request.metadata),
  });
}

/** The body of `POST /v1/tasks/{id}/pushNotificationConfigs` (0.3 `TaskPushNotificationConfig`) for a task. */
export function taskPushConfigIn(body: unknown, taskId: string): Json {
  const config = object(body, 'the request body');
  const push = config.pushNotificationConfig ?? config.push_notification_config;
  if (push === undefined) throw new RequestMalformedError('pushNotificationConfig is required');
  return { taskId, pushNotificationConfig: pushConfigIn(push) };
}

/** A `message:send` answer (0.3 `SendMessageResponse`). */
export function sendResultOut(result: object): Json {
  const said = result as Json;
  return said.kind === 'message' ? { message: messageOut(said) } : { task: taskOut(said) };
}

/** One event of a 0.3 REST stream (0.3 `StreamResponse`). */
export function streamResultOut(result: unknown): Json {
  const said = result as Json;
  switch (said.kind) {
    case 'message':
      return { message: messageOut(said) };
    case 'status-update':
      return {
        statusUpdate: defined({ taskId: said.taskId, contextId: said.contextId, status: statusOut(said.status as Json), final: said.final === true, metadata: said.metadata }),
      };
    case 'artifact-update':
      return {
        artifactUpdate: defined({
          taskId: said.taskId,
          contextId: said.contextId,
          artifact: artifactOut(said.artifact as Json),
          append: said.append === true,
          lastChunk: said.lastChunk === true,
          metadata: said.metadata,
        }),
      };
    default:
      return { task: taskOut(said) };
  }
}

export function taskOut(value: object): Json {
  const task = value as Json;
  return defined({
    id: task.id,
    contextId: task.contextId,
    status: statusOut(task.status as Json),
    artifacts: (task.artifacts as Json[] | undefined)?.map(artifactOut),
    history: (task.history as Json[] | undefined)?.map(messageOut),
    metadata: task.metadata,
  });
}

/** A push config as 0.3 names it: by its task and its id. */
export function taskPushConfigOut(value: object): Json {
  const config = value as Json;
  const push = (config.pushNotificationConfig ?? {}) as Json;
  return {
    name: `tasks/${String(config.taskId)}/pushNotificationConfigs/${String(push.id ?? '')}`,
    pushNotificationConfig: defined({
      id: push.id,
      url: push.url,
      token: push.token || undefined,
      authentication: push.authentication,
    }),
  };
}

function messageIn(message: Json): Json {
  const content = message.content ?? message.parts;
  if (!Array.isArray(content)) throw new RequestMalformedError('message.content must be a list of parts');
  return defined({
    kind: 'message',
    messageId: typeof message.messageId === 'string' ? message.messageId : '',
    contextId: message.contextId || undefined,
    taskId: message.taskId || undefined,
    role: roleIn(message.role),
    parts: content.map((part, index) => partIn(part, index)),
    metadata: metadata(message.metadata),
    extensions: strings(message.extensions),
  });
}

function roleIn(role: unknown): string {
  if (role === 'ROLE_USER' || role === 1) return 'user';
  if (role === 'ROLE_AGENT' || role === 2) return 'agent';
  throw new RequestMalformedError(`message.role must be ROLE_USER or ROLE_AGENT, got ${JSON.stringify(role)}`);
}

function partIn(value: unknown, index: number): Json {
  const part = object(value, `message.content[${index}]`);
  if (typeof part.text === 'string') return { kind: 'text', text: part.text };
  if (isObject(part.file)) {
    const { fileWithUri, fileWithBytes, mimeType } = part.file;
    const type = typeof mimeType === 'string' && mimeType !== '' ? { mimeType } : {};
    if (typeof fileWithUri === 'string') return { kind: 'file', file: { uri: fileWithUri, ...type } };
    if (typeof fileWithBytes === 'string') return { kind: 'file', file: { bytes: fileWithBytes, ...type } };
  }
  if (isObject(part.data)) return { kind: 'data', data: isObject(part.data.data) ? part.data.data : {} };
  throw new RequestMalformedError(`message.content[${index}] has no text, file or data`);
}

function pushConfigIn(value: unknown): Json {
  const config = object(value, 'pushNotificationConfig');
  const authentication = isObject(config.authentication)
    ? defined({ schemes: strings(config.authentication.schemes) ?? [], credentials: config.authentication.credentials || undefined })
    : undefined;
  return defined({
    id: config.id || undefined,
    url: typeof config.url === 'string' ? config.url : '',
    token: config.token || undefined,
    authentication,
  });
}

function messageOut(message: Json): Json {
  return defined({
    messageId: message.messageId,
    contextId: message.contextId,
    taskId: message.taskId,
    role: ROLES[String(message.role)] ?? 'ROLE_UNSPECIFIED',
    content: ((message.parts as Json[] | undefined) ?? []).map(partOut),
    metadata: message.metadata,
    extensions: (message.extensions as string[] | undefined)?.length ? message.extensions : undefined,
  });
}

function statusOut(status: Json | undefined): Json {
  return defined({
    state: STATES[String(status?.state)] ?? 'TASK_STATE_UNSPECIFIED',
    message: status?.message === undefined ? undefined : messageOut(status.message as Json),
    timestamp: status?.timestamp,
  });
}

function artifactOut(artifact: Json): Json {
  return defined({
    artifactId: artifact.artifactId,
    name: artifact.name || undefined,
    description: artifact.description || undefined,
    parts: ((artifact.parts as Json[] | undefined) ?? []).map(partOut),
    metadata: artifact.metadata,
    extensions: (artifact.extensions as string[] | undefined)?.length ? artifact.extensions : undefined,
  });
}

function partOut(part: Json): Json {
  if (part.kind === 'file') {
    const file = part.file as Json;
    return { file: defined({ fileWithUri: file.uri, fileWithBytes: file.bytes, mimeType: file.mimeType || undefined }) };
  }
  if (part.kind === 'data') return { data: { data: part.data } };
  return { text: part.text };
}

function object(value: unknown, what: string): Json {
  if (!isObject(value)) throw new RequestMalformedError(`${what} must be a JSON object`);
  return value;
}

function strings(value: unknown): string[] | undefined {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : undefined;
}

function metadata(value: unknown): Json | undefined {
  return isObject(value) ? value : undefined;
}

/** Proto3 JSON leaves unset fields out. */
function defined(fields: Json): Json {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
}
