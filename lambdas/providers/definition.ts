import type { LambdaClient } from '@aws-sdk/client-lambda';
import { z } from 'zod';
import { AGENT_ID, AGENT_ID_RULE, type Agent, type AgentProviderSpec } from '../core/model.js';
import type { Clock, IdSource, LinkedProvider, Provider } from '../core/ports.js';

/** A2A's `AgentSkill` (https://a2a-protocol.org/latest/specification/#agentskill), as the agent card quotes it. */
export const AgentSkillSchema = z
  .object({
    id: z.string().min(1),
    name: z.string().min(1),
    description: z.string(),
    tags: z.array(z.string()),
    examples: z.array(z.string()).optional(),
  })
  .strict();

/**
 * A price: 0, or between a trillionth and a trillion. Beyond those a number has no meaning as a
 * price, and DynamoDB refuses numbers under 1e-130 or over 1e125 (a 500 at PUT, seen by the fuzz).
 */
const PRICE = z
  .number()
  .min(0)
  .max(1e12)
  .refine((value) => value === 0 || value >= 1e-12, 'must be 0 or at least 1e-12');

/** Node's timers hold at most 2^31 - 1 ms (about 24.8 days); a longer one fires at once. */
const MAX_LIMIT_SECONDS = 2_073_600;

/** A time limit in seconds, from a millisecond to 24 days. */
const limitSeconds = (fallback: number) =>
  z.number().min(0.001, 'must be at least 0.001 (one millisecond)').max(MAX_LIMIT_SECONDS, `must be at most ${MAX_LIMIT_SECONDS} (24 days)`).default(fallback);

/** What a run of an agent costs (see `Prices` in the core): per run, per running second, per 1,000 tokens by model or `*`. */
export const PricesSchema = z
  .object({
    currency: z.string().regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code such as "USD"'),
    perRun: PRICE.optional(),
    perRunningSecond: PRICE.optional(),
    perThousandTokens: z
      .record(
        z.string().min(1),
        z.object({ input: PRICE.optional(), output: PRICE.optional(), cachedInput: PRICE.optional(), reasoning: PRICE.optional() }).strict(),
      )
      .optional(),
  })
  .strict();

/** The fields every agent definition has, whatever reaches it. */
const COMMON_FIELDS = {
  id: z.string().regex(AGENT_ID, AGENT_ID_RULE),
  description: z.string().min(1),
  skills: z.array(AgentSkillSchema).optional(),
  takesInterjections: z.boolean().default(false),
  /** The whole run; past it the run fails `provider_timeout`. */
  timeoutSeconds: limitSeconds(900),
  /** The longest silence of the agent; past it the run fails `provider_idle`. */
  idleTimeoutSeconds: limitSeconds(300),
  status: z.enum(['enabled', 'disabled']).default('enabled'),
  prices: PricesSchema.optional(),
  /** The serving provider's Ed25519 key (base64url of its 32 bytes): it may act on threads bound to another head (issue 26). */
  publicKey: z.string().regex(/^[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$/, 'must be an Ed25519 public key: the base64url of its 32 bytes').optional(),
};

/** What a provider needs from its runtime to be made. */
export interface ProviderRuntime {
  clock: Clock;
  ids: IdSource;
  /** The demo agent's pace for `/slow N`. */
  demoSlowIntervalMs?: number;
  /** The client agents of the `lambda` kind are invoked with; absent, one for the runtime's region is made on first use. */
  lambda?: LambdaClient;
}

/**
 * A provider kind: the fields of its agent definitions (beside the common ones), how they become
 * the agent's provider spec and back into what an admin may see (secrets masked), and the provider.
 */
export interface ProviderKind<Fields extends z.ZodRawShape = z.ZodRawShape> {
  kind: string;
  fields: Fields;
  spec(fields: z.infer<z.ZodObject<Fields>>): AgentProviderSpec;
  /** The spec's fields as the admin routes show them: every value that may be a credential masked. */
  adminView(spec: AgentProviderSpec): Record<string, unknown>;
  create(runtime: ProviderRuntime): Provider | LinkedProvider;
}

export function providerKind<Fields extends z.ZodRawShape>(kind: ProviderKind<Fields>): ProviderKind<Fields> {
  return kind;
}

/** A definition names its kind in `provider`; one that names none is a stock AG-UI agent at a URL. */
export const DEFAULT_PROVIDER_KIND = 'agui-http';

export type AgentDefinition = { provider: string } & Record<string, unknown>;

/**
 * The agent definitions of the given kinds, as they cross the admin boundary and the agents file:
 * the one source of truth for that shape, a union by `provider`. Unknown keys are refused, so a
 * misspelt limit (`timeoutSecond`) is a 400 rather than a silent default. No message quotes a value.
 */
export function definitionSchema(kinds: readonly ProviderKind[]): z.ZodType<AgentDefinition, z.ZodTypeDef, unknown> {
  const [first, ...rest] = kinds.map((kind) =>
    z.object({ provider: z.literal(kind.kind), ...COMMON_FIELDS, ...kind.fields }).strict(),
  );
  const union = z.discriminatedUnion('provider', [first, ...rest] as [typeof first, ...(typeof first)[]], {
    errorMap: (issue, context) =>
      issue.code === 'invalid_union_discriminator'
        ? { message: `must be one of ${kinds.map((kind) => `"${kind.kind}"`).join(', ')}` }
        : { message: context.defaultError },
  });
  return z.preprocess(
    (value) => (isObject(value) && value.provider === undefined ? { ...value, provider: DEFAULT_PROVIDER_KIND } : value),
    union,
  ) as unknown as z.ZodType<AgentDefinition, z.ZodTypeDef, unknown>;
}

/** The admin door's parse and view of agent definitions, for the given kinds (see `AgentCatalog` in the doors). */
export function agentCatalog(kinds: readonly ProviderKind[]) {
  const schema = definitionSchema(kinds);
  return {
    parse(body: unknown) {
      const parsed = schema.safeParse(body);
      return parsed.success ? { ok: true as const, agent: agentFrom(parsed.data, kinds) } : { ok: false as const, issues: parsed.error.issues };
    },
    view: (agent: Agent): Record<string, unknown> => adminView(agent, kinds),
  };
}

/** The registry's record of a definition. */
export function agentFrom(definition: AgentDefinition, kinds: readonly ProviderKind[]): Agent {
  const { provider, id, description, skills, takesInterjections, timeoutSeconds, idleTimeoutSeconds, status, prices, publicKey, ...fields } = definition as AgentDefinition &
    z.infer<z.ZodObject<typeof COMMON_FIELDS>>;
  const kind = kindOf(kinds, provider);
  return {
    id,
    description,
    provider: kind.spec(fields as never),
    takesInterjections,
    timeoutSeconds,
    idleTimeoutSeconds,
    status,
    ...(skills ? { skills } : {}),
    ...(prices ? { prices } : {}),
    ...(publicKey ? { publicKey } : {}),
  };
}

/**
 * An agent's definition as it would be given (`PUT /admin/agents/{id}`, the agents file), secrets
 * and all: to check an agent the store holds by the rules a definition must pass today.
 */
export function definitionOf(agent: Agent): AgentDefinition {
  const { kind, ...fields } = agent.provider;
  return {
    id: agent.id,
    provider: kind,
    ...fields,
    description: agent.description,
    ...(agent.skills ? { skills: agent.skills } : {}),
    takesInterjections: agent.takesInterjections,
    timeoutSeconds: agent.timeoutSeconds,
    idleTimeoutSeconds: agent.idleTimeoutSeconds,
    ...(agent.status ? { status: agent.status } : {}),
    ...(agent.publicKey ? { publicKey: agent.publicKey } : {}),
  };
}

/** An agent as the admin routes show it: its definition, with every value that may be a credential masked. */
export function adminView(agent: Agent, kinds: readonly ProviderKind[]) {
  const kind = kinds.find((k) => k.kind === agent.provider.kind);
  return {
    id: agent.id,
    provider: agent.provider.kind,
    ...(kind ? kind.adminView(agent.provider) : {}),
    description: agent.description,
    ...(agent.skills ? { skills: agent.skills } : {}),
    takesInterjections: agent.takesInterjections,
    timeoutSeconds: agent.timeoutSeconds,
    idleTimeoutSeconds: agent.idleTimeoutSeconds,
    status: agent.status ?? 'enabled',
    ...(agent.prices ? { prices: agent.prices } : {}),
    ...(agent.publicKey ? { publicKey: agent.publicKey } : {}),
  };
}

/** The value every masked field shows. */
export const MASK = '***';

function kindOf(kinds: readonly ProviderKind[], name: string): ProviderKind {
  const kind = kinds.find((k) => k.kind === name);
  if (!kind) throw new TypeError(`no provider kind "${name}"`);
  return kind;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
