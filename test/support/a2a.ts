import { Role, TaskState, type Message, type Part, type SendMessageRequest, type StreamResponse, type Task } from '@a2a-js/sdk';
import { Client, ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory } from '@a2a-js/sdk/client';

/** The bindings a stock client can pick from a funduq agent card. */
export const BINDINGS = ['JSONRPC', 'HTTP+JSON'] as const;
export type Binding = (typeof BINDINGS)[number];

/**
 * A stock A2A 1.0 client for an agent behind the gateway, on the binding asked for; with an API
 * key, every request it sends carries it (`x-api-key`), and the headers given (trace context).
 */
export async function a2aClient(gateway: { url: string }, binding: Binding, agentId = 'demo', apiKey?: string, given: Record<string, string> = {}): Promise<Client> {
  const fetchImpl: typeof fetch = (input, init) => {
    const headers = new Headers(init?.headers);
    if (apiKey !== undefined) headers.set('x-api-key', apiKey);
    for (const [name, value] of Object.entries(given)) headers.set(name, value);
    return fetch(input, { ...init, headers });
  };
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      preferredTransports: [binding],
      transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
    }),
  );
  return factory.createFromUrl(`${gateway.url}/a2a/${agentId}/`);
}

export function text(value: string): Part {
  return { content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: '' };
}

export function data(value: unknown): Part {
  return { content: { $case: 'data', value }, metadata: undefined, filename: '', mediaType: '' };
}

let counter = 0;
export function userMessage(parts: Part[] | string, fields: Partial<Message> = {}): Message {
  counter += 1;
  return {
    messageId: `m-${Date.now()}-${counter}`,
    contextId: '',
    taskId: '',
    role: Role.ROLE_USER,
    parts: typeof parts === 'string' ? [text(parts)] : parts,
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
    ...fields,
  };
}

export function send(message: Message, configuration: Partial<NonNullable<SendMessageRequest['configuration']>> = {}, metadata?: Record<string, unknown>): SendMessageRequest {
  return {
    tenant: '',
    message,
    configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: false, ...configuration },
    metadata,
  };
}

/** A send result that must be a Task (funduq always answers with one). */
export function asTask(result: Message | Task): Task {
  if (!('status' in result)) throw new Error(`expected a Task, got ${JSON.stringify(result)}`);
  return result;
}

/** All the agent text of a task's artifacts, one string per artifact. */
export function artifactTexts(task: Task): string[] {
  return task.artifacts.map((artifact) => artifact.parts.map(partText).join(''));
}

export function partText(part: Part): string {
  return part.content?.$case === 'text' ? part.content.value : '';
}

export function stateName(state: TaskState | undefined): string {
  return state === undefined ? 'none' : TaskState[state];
}

/** What a stream said, in order, and the artifact text it builds up (append: true chunks). */
export function summarise(events: StreamResponse[]): { kinds: string[]; states: string[]; text: Map<string, string> } {
  const kinds: string[] = [];
  const states: string[] = [];
  const textById = new Map<string, string>();
  for (const { payload } of events) {
    if (!payload) continue;
    kinds.push(payload.$case);
    if (payload.$case === 'task') states.push(stateName(payload.value.status?.state));
    if (payload.$case === 'statusUpdate') states.push(stateName(payload.value.status?.state));
    if (payload.$case === 'artifactUpdate' && payload.value.artifact) {
      const { artifactId, parts } = payload.value.artifact;
      const chunk = parts.map(partText).join('');
      textById.set(artifactId, payload.value.append ? (textById.get(artifactId) ?? '') + chunk : chunk);
    }
  }
  return { kinds, states, text: textById };
}

export async function collect(stream: AsyncIterable<StreamResponse>): Promise<StreamResponse[]> {
  const events: StreamResponse[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

/** The `metadata.funduq` of a task or update. */
export function funduq(carrier: { metadata?: Record<string, unknown> | undefined }): Record<string, unknown> {
  return (carrier.metadata?.funduq ?? {}) as Record<string, unknown>;
}
