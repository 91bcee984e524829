import type { Core } from '../deps.js';
import { auditId, FUNDUQ_ACTOR, type AuditEntry, type AuditRecord } from './record.js';

/** Writes an audit record now: its id and time are the log's. */
export async function writeAudit(core: Pick<Core, 'store' | 'clock' | 'ids'>, entry: AuditEntry): Promise<AuditRecord> {
  const at = new Date(core.clock.now()).toISOString();
  const record: AuditRecord = { id: auditId(at, core.ids.newId()), at, ...entry };
  await core.store.audit.append(record);
  return record;
}

/**
 * What funduq did on its own (an ask expired, a run failed by the repair or the sweep), written by
 * whoever won the write it records, so it is written once. A record that could not be written is
 * not worth failing the act it records: it goes to `core.audit.onLost`, which logs it whole.
 */
export async function auditSystem(core: Core, entry: Omit<AuditEntry, 'actor' | 'outcome'> & { outcome?: string }): Promise<void> {
  const full: AuditEntry = { actor: FUNDUQ_ACTOR, outcome: 'ok', ...entry };
  await writeAudit(core, full).catch((error: unknown) => core.auditLost?.(full, error));
}
