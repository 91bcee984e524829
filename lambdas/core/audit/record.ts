/**
 * The audit log's record (issue 27): who did what to which target, when, through which request,
 * and how it ended. One is written for every request that changed something or was refused after
 * its caller was known, and for what funduq did on its own. Records are never changed: a segment
 * seals their hashes (`seal.ts`), and the offline verifier (`verify.ts`) proves them unedited.
 */

/** What was done, in the field's words: a closed list, so a reader can filter on it and a verifier knows every name. */
export const AUDIT_ACTIONS = [
  // Admin changes (with the values before and after).
  'agent.registered',
  'agent.changed',
  'agent.deleted',
  'provider.registered',
  'provider.changed',
  'provider.deleted',
  'tenant.budget_changed',
  'principal.keys_changed',
  'principal.keys_deleted',
  'tenant.retention_changed',
  'tenant.hold_placed',
  'tenant.hold_lifted',
  'thread.hold_placed',
  'thread.hold_lifted',
  // The data plane.
  'run.submitted',
  'run.interjected',
  'ask.answered',
  'run.cancel_requested',
  'push_config.created',
  'push_config.deleted',
  'link.opened',
  'link.closed',
  // What funduq did on its own.
  'ask.expired',
  'run.failed_by_repair',
  'run.failed_by_sweep',
  'retention.deleted',
] as const;

export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/** Who acted: a caller's principal (and the credential it showed, never the secret), the admin, a provider on its link, or funduq itself. */
export interface AuditActor {
  kind: 'principal' | 'admin' | 'provider' | 'funduq';
  /** The principal's id (for `admin`, `admin`; for a provider, its id; for `funduq`, absent). */
  principal?: string;
  /** Which credential was shown: an id derived from it (a digest's prefix), never the credential. */
  credentialId?: string;
  /** The actor chain's head and presenter (Ed25519 keys, base64url), when the request carried one. */
  chainHead?: string;
  chainPresenter?: string;
}

export const FUNDUQ_ACTOR: AuditActor = { kind: 'funduq' };

/** `ok`, or the stable code the request was refused (or failed) with. */
export type AuditOutcome = 'ok' | (string & {});

export interface AuditRecord {
  /** Sorts as the records were written: `<at>/<unique>` (the listing's and the seal's order). */
  id: string;
  /** When it was written (ISO 8601, UTC, ms). */
  at: string;
  /** Whose record it is: the tenant acted on, or absent for a gateway-wide change (an agent, a provider). */
  tenant?: string;
  actor: AuditActor;
  action: AuditAction;
  /** What was acted on, as `<kind>:<id>` (`run:…`, `agent:…`, `tenant:…`, `thread:…`, `provider:…`, `push_config:<task>/<config>`). */
  target: string;
  outcome: AuditOutcome;
  requestId?: string;
  traceId?: string;
  /** An admin change's values before and after (secrets masked as the admin routes show them). */
  before?: unknown;
  after?: unknown;
  /** What else a reader needs (a retention deletion's counts, a refusal's message, the answered run). */
  detail?: Record<string, unknown>;
}

/** What a writer gives: the rest (`id`, `at`) the log gives. */
export type AuditEntry = Omit<AuditRecord, 'id' | 'at'>;

/** A record's id: its time, then a unique part, so ids sort as records were written (to the ms) and never collide. */
export function auditId(at: string, unique: string): string {
  return `${at}/${unique}`;
}

/**
 * A value as one canonical JSON text: object keys sorted, no whitespace, `undefined` members left
 * out (RFC 8785's ordering for the ASCII keys funduq writes). Two parties that parse the same record
 * hash the same bytes, whatever order a store or an editor kept its keys in.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') {
    const text = JSON.stringify(value);
    return text === undefined ? 'null' : text;
  }
  if (Array.isArray(value)) return `[${value.map((item) => (item === undefined ? 'null' : canonicalJson(item))).join(',')}]`;
  const keys = Object.keys(value).sort();
  let out = '{';
  for (const key of keys) {
    const member = (value as Record<string, unknown>)[key];
    if (member === undefined) continue;
    if (out.length > 1) out += ',';
    out += `${JSON.stringify(key)}:${canonicalJson(member)}`;
  }
  return `${out}}`;
}

/** The hash a segment seals a record by: SHA-256 (hex) of its canonical JSON. */
export function recordHash(record: AuditRecord, sha256Hex: (text: string) => string): string {
  return sha256Hex(canonicalJson(record));
}

/** What a listing may filter on; every filter given must hold. */
export interface AuditQuery {
  tenant?: string;
  /** A principal id (or `admin`, or `funduq`). */
  actor?: string;
  action?: AuditAction;
  target?: string;
  /** ISO times: records written in [from, to). */
  from: string;
  to: string;
  limit: number;
  cursor?: string;
}

/** The actor's name a filter matches: the principal, `admin`, or `funduq`. */
export function actorName(actor: AuditActor): string {
  return actor.kind === 'funduq' ? 'funduq' : (actor.principal ?? actor.kind);
}
