import type { LinkedProvider, Provider } from '../core/ports.js';
import { aguiHttpKind } from '../providers/agui-http.js';
import { definitionSchema, type ProviderKind, type ProviderRuntime } from '../providers/definition.js';
import { demoKind } from '../providers/demo.js';
import { lambdaKind } from '../providers/lambda.js';
import { linkKind } from '../providers/link.js';

/** Every provider kind funduq knows: one line each. Agent definitions are a union of their fields. */
export const PROVIDER_KINDS: readonly ProviderKind[] = [aguiHttpKind, lambdaKind, linkKind, demoKind] as readonly ProviderKind[];

/** The schema of an agent definition (`PUT /admin/agents/{id}`, the agents file), for every kind. */
export const AgentDefinitionSchema = definitionSchema(PROVIDER_KINDS);

/** One provider of each kind, by kind: what the core picks an agent's provider from. */
export function createProviders(runtime: ProviderRuntime): Record<string, Provider | LinkedProvider> {
  return Object.fromEntries(PROVIDER_KINDS.map((kind) => [kind.kind, kind.create(runtime)]));
}
