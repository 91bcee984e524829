import type { Core } from './deps.js';
import { ok, refuse, type Result } from './errors.js';

/** A principal may have this many keys at once (rotation: the new beside the old). */
export const MAX_PRINCIPAL_KEYS = 16;

/** What an admin sees of a principal's keys. */
export interface PrincipalKeysView {
  tenant: string;
  principal: string;
  publicKeys: string[];
}

/** Registers a principal's keys (replacing any): each an Ed25519 public key, base64url of its 32 bytes or PEM. */
export async function putPrincipalKeys(core: Core, tenant: string, principal: string, given: readonly string[]): Promise<Result<PrincipalKeysView & { created: boolean }>> {
  if (!core.proofs) return refuse('invalid_input', 'this gateway has no identity key: it takes no actor chains');
  if (given.length === 0 || given.length > MAX_PRINCIPAL_KEYS) return refuse('invalid_input', `publicKeys: 1 to ${MAX_PRINCIPAL_KEYS} keys`);
  const publicKeys: string[] = [];
  for (const [index, key] of given.entries()) {
    const normal = core.proofs.normalize(key);
    if (!normal) return refuse('invalid_input', `publicKeys[${index}]: not an Ed25519 public key (the base64url of its 32 bytes, or PEM)`);
    if (!publicKeys.includes(normal)) publicKeys.push(normal);
  }
  const created = await core.store.principals.put(tenant, principal, publicKeys);
  return ok({ tenant, principal, publicKeys, created });
}

export async function getPrincipalKeys(core: Core, tenant: string, principal: string): Promise<Result<PrincipalKeysView>> {
  const publicKeys = await core.store.principals.get(tenant, principal);
  return publicKeys ? ok({ tenant, principal, publicKeys }) : refuse('principal_not_found', `principal "${principal}" of tenant "${tenant}" has no registered keys`);
}

export async function deletePrincipalKeys(core: Core, tenant: string, principal: string): Promise<Result<void>> {
  return (await core.store.principals.delete(tenant, principal)) ? ok(undefined) : refuse('principal_not_found', `principal "${principal}" of tenant "${tenant}" has no registered keys`);
}
