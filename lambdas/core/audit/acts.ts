import type { Run } from '../model.js';
import type { AuditRecord } from './record.js';

/**
 * The audit records a run's record itself holds the facts of: its submission (or the answer or
 * interjection it is) and the cancel that changed it. They are a projection of the run, written
 * with the run's write as the task index's entry is (`RecordProjections`): in the same transaction
 * where the store has one (SQLite), else right after and again by the repair of the run's change
 * (DynamoDB), each under an id made from the run, so a write done twice is one record.
 */
export function runAudits(run: Run, change: 'created' | Partial<Run>): AuditRecord[] {
  const records: AuditRecord[] = [];
  if (change === 'created') records.push(submissionAudit(run));
  if ((change === 'created' || change.cancelRequest !== undefined) && run.cancelRequest) records.push(cancelAudit(run)!);
  return records;
}

export function submissionAudit(run: Run): AuditRecord {
  const chain = chainOf(run);
  const traceId = run.context?.traceparent?.split('-')[1];
  return {
    id: `${run.createdAt}/${uniqueOf(run.runId)}#submitted`,
    at: run.createdAt,
    tenant: run.tenant,
    actor: { kind: 'principal', principal: run.principal, ...(run.credentialId ? { credentialId: run.credentialId } : {}), ...chain },
    action: run.parentRunId !== undefined ? 'ask.answered' : run.addressedRunId !== undefined ? 'run.interjected' : 'run.submitted',
    target: `run:${run.runId}`,
    outcome: 'ok',
    ...(run.requestId ? { requestId: run.requestId } : {}),
    ...(traceId && /^[0-9a-f]{32}$/.test(traceId) ? { traceId } : {}),
    detail: { threadId: run.threadId, agentId: run.agentId, door: run.door, ...(run.parentRunId ? { answers: run.parentRunId } : {}), ...(run.addressedRunId ? { addressed: run.addressedRunId } : {}) },
  };
}

export function cancelAudit(run: Run): AuditRecord | undefined {
  const cancel = run.cancelRequest;
  if (!cancel) return undefined;
  return {
    id: `${cancel.at}/${uniqueOf(run.runId)}#cancel`,
    at: cancel.at,
    tenant: run.tenant,
    actor: { kind: 'principal', principal: cancel.principal, ...(cancel.credentialId ? { credentialId: cancel.credentialId } : {}) },
    action: 'run.cancel_requested',
    target: `run:${run.runId}`,
    outcome: 'ok',
    ...(cancel.requestId ? { requestId: cancel.requestId } : {}),
    // On a thread bound to its head, the key that signed the cancel: the head's, or the serving provider's.
    detail: { threadId: run.threadId, status: run.status, ...(run.cancelRequestedBy ? { signedBy: run.cancelRequestedBy } : {}) },
  };
}

/** The chain's head and presenter, for a run that carried one (verified at its admission). */
function chainOf(run: Run): { chainHead?: string; chainPresenter?: string } {
  return run.actors ? { chainHead: run.actors.head, chainPresenter: run.actors.presenter } : {};
}

/** A run id in a record's id: as it is, or, when long, a digest of it (a record's id is a sort key of at most 1 KB). */
function uniqueOf(runId: string): string {
  if (runId.length <= 128 && /^[\x21-\x7e]+$/.test(runId)) return runId;
  // FNV-1a, 64 bits, twice over (two offsets): a short, stable name for a long or non-ASCII id.
  let a = 0xcbf29ce484222325n;
  let b = 0x84222325cbf29ce4n;
  for (const unit of runId) {
    const code = BigInt(unit.codePointAt(0)!);
    a = ((a ^ code) * 0x100000001b3n) & 0xffffffffffffffffn;
    b = ((b ^ code) * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return `~${a.toString(16)}${b.toString(16)}`;
}
