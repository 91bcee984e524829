import type { AuditEntry } from './audit/record.js';
import type { AuditSeal } from './audit/seal.js';
import { Ledger } from './ledger.js';
import type { LinkProvider, Tenant } from './model.js';
import type { TenantRetention } from './retention/policy.js';
import { agentForDispatch, Recent, RecentAgents } from './recent-agents.js';
import { DEFAULT_LINK_SETTINGS, type CoreSettings, type LinkSettings } from './settings.js';
import type { ActorProofs, AskTimer, ChangeFeed, Clock, DoorRelay, IdSource, LinkChannels, LinkedProvider, LinkKeys, LinkRoster, LinkTimer, Provider, RunStore, StreamRules, ThreadQueue } from './ports.js';
import { UNOBSERVED, type RunLife } from './run-life.js';

/** Everything the use cases reach the world through. */
export interface CoreDeps {
  store: RunStore;
  queue: ThreadQueue;
  timer: AskTimer;
  feed: ChangeFeed;
  /** Providers by kind (`demo`, `agui-http`, `lambda`, `link`, …): an agent's `provider.kind` picks one. */
  providers: Readonly<Record<string, Provider | LinkedProvider>>;
  /** The provider link's ports (agents that dial out); absent, this gateway takes no links. */
  link?: LinkDeps;
  /** Actor chains' and bound threads' signatures, with funduq's identity key; absent, a request with a chain is refused. */
  proofs?: ActorProofs;
  /** Where a door relays a run it admitted on an idle thread itself (`claimAtDoor`, `relayAtDoor`); absent, the thread queue hands every run to a dispatcher. */
  doorRelay?: DoorRelay;
  /** The rules every agent's stream is held to: the stock AG-UI client's. */
  rules: StreamRules;
  clock: Clock;
  ids: IdSource;
  settings: CoreSettings;
  /** Definitions read moments ago, for a dispatch right after admission; absent, one is made. */
  recentAgents?: RecentAgents;
  /**
   * Who watches runs' lives (metrics, the usage meter, tracing), composed once by the runtime
   * (`composeRunLife`); absent, nobody.
   */
  life?: RunLife;
  /** funduq's identity key for sealing the audit log, and SHA-256; absent, records are written but not sealed. */
  auditSeal?: AuditSeal;
  /** An audit record of funduq's own acts that could not be written: the runtime logs it whole (`audit_write_failed`). */
  auditLost?: (entry: AuditEntry, error: unknown) => void;
  /**
   * Waits a turn of the event loop when this process's slice of work is spent (undefined: go on):
   * on one machine every run shares one thread, and a burst's events come off the socket a chunk
   * at a time, hundreds of them relayed in one stretch while another tenant's event waits. Absent
   * (a Lambda serves one run at a time), never waits.
   */
  turn?: () => Promise<void> | undefined;
}

/** What the provider link reaches the world through, beside the core's own ports. */
export interface LinkDeps {
  roster: LinkRoster;
  channels: LinkChannels;
  timer: LinkTimer;
  keys: LinkKeys;
  /**
   * The dispatcher holds a link run until it settles (one machine: an in-process promise, so the
   * thread's next run waits for it), rather than returning once the run is offered (AWS).
   */
  holdUntilSettled: boolean;
}

/**
 * What a reader does for a running run it hears nothing of for `afterMs` (the lease's lapse, on
 * AWS): `check` fails the run `dispatch_lost` if its dispatcher's lease lapsed (`failIfLapsed`), so
 * a caller learns of a dead dispatcher a lapse after it died rather than at the next sweep.
 */
export interface LapseCheck {
  afterMs: number;
  check(runId: string): Promise<unknown>;
}

/** The ports with the record's owner over them: what every use case takes. */
export interface Core extends CoreDeps {
  life: RunLife;
  ledger: Ledger;
  recentAgents: RecentAgents;
  /** Tenants read moments ago (their budgets); null for a tenant the record has nothing of. */
  recentTenants: Recent<Tenant | null>;
  linkSettings: LinkSettings;
  /** Link providers' registrations read moments ago: an offer reads its provider's limit without a store read per run. */
  recentProviders: Recent<LinkProvider | null>;
  /** Tenants' own retention read moments ago (every read of a thread asks); null for a tenant with none. */
  recentRetention: Recent<TenantRetention | null>;
  /** Where dispatchers hold leases: what the readers of runs (both doors) check a quiet run's lease with; set by the gateway. */
  lapse?: LapseCheck;
}

export function coreOf(deps: CoreDeps): Core {
  const recentAgents = deps.recentAgents ?? new RecentAgents(deps.clock);
  const recentTenants = new Recent<Tenant | null>(deps.clock);
  const budgets = { store: deps.store, clock: deps.clock, defaultBudget: deps.settings.tenantBudget, recentTenants };
  const life = deps.life ?? UNOBSERVED;
  const ledger = new Ledger({ ...deps, life, agentOf: (agentId) => agentForDispatch({ store: deps.store, recentAgents }, agentId), budgets });
  const linkSettings = { ...DEFAULT_LINK_SETTINGS, ...deps.settings.link };
  return { ...deps, life, ledger, recentAgents, recentTenants, linkSettings, recentProviders: new Recent(deps.clock), recentRetention: new Recent(deps.clock) };
}
