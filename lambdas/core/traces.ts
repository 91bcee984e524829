/**
 * Every span, attribute and event name funduq's traces use, in one place: the doors' spans and the
 * run observer's (`adapters/otel/`) both take them from here, so the core holds them as it holds
 * the other words of the protocols (names only: nothing here traces). The GenAI conventions
 * (and A2A's, which OpenTelemetry has not written yet) are all "Development": names may change
 * between versions of the conventions, so they are copied here, as OpenTelemetry asks of
 * instrumentations (the `incubating` entry of @opentelemetry/semantic-conventions is not for
 * runtime code), and the schema they follow is named on every span's scope.
 */

/** The semantic conventions these names follow (GenAI as of semconv 1.41.0). */
export const SCHEMA_URL = 'https://opentelemetry.io/schemas/1.41.0';
/** The instrumentation scope of every span. */
export const SCOPE = 'funduq';

export const SPAN = {
  /** The HTTP server span: `{method} {route}` (HTTP semconv, stable). */
  http: (method: string, route: string) => `${method} ${route}`,
  /** A run's wait in its thread's queue, from its record to its dispatch. */
  queueWait: 'funduq.queue.wait',
  /** One call to the run's provider (GenAI agent spans: `invoke_agent {gen_ai.agent.name}`). */
  invokeAgent: (agent: string) => `invoke_agent ${agent}`,
  /** A run's asks expired unanswered (the run itself ended long before, maybe elsewhere). */
  askExpiry: 'funduq.ask.expiry',
  /** A request for a run already recorded (a retry of its runId), linked to the run's first attempt. */
  retry: 'funduq.run.retry',
  /** A submission refused before any run was recorded (a full queue, a tenant's limit or budget). */
  refused: 'funduq.run.refused',
} as const;

/** The A2A methods as the A2A specification names them (1.0): each is the name of its span. */
export const A2A_METHOD = {
  sendMessage: 'SendMessage',
  sendMessageStream: 'SendStreamingMessage',
  getTask: 'GetTask',
  listTasks: 'ListTasks',
  cancelTask: 'CancelTask',
  resubscribe: 'SubscribeToTask',
  getAuthenticatedExtendedAgentCard: 'GetExtendedAgentCard',
  createTaskPushNotificationConfig: 'CreateTaskPushNotificationConfig',
  getTaskPushNotificationConfig: 'GetTaskPushNotificationConfig',
  listTaskPushNotificationConfigs: 'ListTaskPushNotificationConfigs',
  deleteTaskPushNotificationConfig: 'DeleteTaskPushNotificationConfig',
} as const;

export const ATTR = {
  // HTTP (stable)
  httpMethod: 'http.request.method',
  httpRoute: 'http.route',
  httpStatus: 'http.response.status_code',
  urlPath: 'url.path',
  urlScheme: 'url.scheme',
  userAgent: 'user_agent.original',
  errorType: 'error.type',
  // RPC
  rpcSystem: 'rpc.system',
  rpcMethod: 'rpc.method',
  // GenAI (Development)
  operationName: 'gen_ai.operation.name',
  agentName: 'gen_ai.agent.name',
  agentId: 'gen_ai.agent.id',
  conversationId: 'gen_ai.conversation.id',
  providerName: 'gen_ai.provider.name',
  requestModel: 'gen_ai.request.model',
  responseModel: 'gen_ai.response.model',
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
  tokenType: 'gen_ai.token.type',
  toolName: 'gen_ai.tool.name',
  toolCallId: 'gen_ai.tool.call.id',
  /** The messages the agent was given, as JSON: only with content capture on. */
  inputMessages: 'gen_ai.input.messages',
  // A2A (no OpenTelemetry convention yet: the names A2A's own SDKs use)
  taskId: 'a2a.task.id',
  taskState: 'a2a.task.state',
  messageId: 'a2a.message.id',
  // funduq's own
  runId: 'funduq.run.id',
  threadId: 'funduq.thread.id',
  tenant: 'funduq.tenant',
  door: 'funduq.door',
  outcome: 'funduq.run.outcome',
  status: 'funduq.run.status',
  code: 'funduq.code',
  askIds: 'funduq.ask.ids',
  /** On an answer's link and its `funduq.ask.answered` event: the run whose asks it answers. */
  askingRunId: 'funduq.ask.run.id',
  askExpiresAt: 'funduq.ask.expires_at',
  /** Every model the usage record names (gen_ai.response.model holds one). */
  models: 'funduq.usage.models',
  observed: 'funduq.observed',
} as const;

/**
 * The metrics (OpenTelemetry's, beside the EMF ones on AWS). An agent call's duration and its
 * tokens are the GenAI client metrics, with `gen_ai.operation.name` = `invoke_agent` (the
 * conventions name no metric of agents' own); the rest are funduq's.
 */
export const METRIC = {
  /** Seconds from a run's start to its end, each provider call's whole (GenAI, Development). */
  operationDuration: 'gen_ai.client.operation.duration',
  /** Tokens the agent reported, by `gen_ai.token.type` and model (GenAI, Development). */
  tokenUsage: 'gen_ai.client.token.usage',
  /** Runs ended, by status, outcome and code. */
  runs: 'funduq.runs',
  /** Seconds a run waited in its thread's queue, from its record to its start. */
  queueWait: 'funduq.queue.wait.duration',
  /** Asks open now: opened by a run's end, closed by an answer or an expiry. */
  asksOpen: 'funduq.asks.open',
  /** Submissions refused before a run was recorded, by code. */
  refused: 'funduq.submissions.refused',
} as const;

/** `gen_ai.operation.name` of a call to an agent. */
export const INVOKE_AGENT = 'invoke_agent';

export const EVENT = {
  /** The run ended with interrupts: each ask it opened. */
  askOpened: 'funduq.ask.opened',
  /** A later run answered the run's asks. */
  askAnswered: 'funduq.ask.answered',
  /** The run's asks expired unanswered. */
  askExpired: 'funduq.ask.expired',
  /** A tool call the agent reported (the gateway executes none: observed, not run). */
  toolCall: 'funduq.tool_call',
  /** A cancel of the running run was recorded. */
  cancelRequested: 'funduq.run.cancel_requested',
} as const;

/** W3C Trace Context's headers (https://www.w3.org/TR/trace-context/). */
export const TRACEPARENT = 'traceparent';
export const TRACESTATE = 'tracestate';

/**
 * The entry of an answer run's context (`Run.context`) that holds the `traceparent` of the run
 * whose asks it answers: whichever function calls the answer's provider links its span to the
 * asking run's trace from the run alone (on AWS the answer is taken by a door and dispatched by
 * another function, hours later perhaps).
 */
export const ANSWERS_CONTEXT = 'funduq-answers';
