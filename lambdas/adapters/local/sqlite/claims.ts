import type Database from 'better-sqlite3';
import type { MessageClaim } from '../../../core/model.js';
import type { MessageClaims } from '../../../core/ports.js';
import { claimIsFree } from '../../../core/record/rules.js';
import type { SqliteHandle } from './handle.js';

/** Message claims: a row per key, taken by a read-check-write in one transaction. */
export class SqliteMessageClaims implements MessageClaims {
  private readonly statements: ReturnType<typeof prepare>;

  constructor(private readonly handle: SqliteHandle) {
    this.statements = prepare(handle.db);
  }

  async take(claim: MessageClaim, nowSeconds: number): Promise<MessageClaim> {
    return this.handle.db.transaction(() => {
      const row = this.statements.getClaim.get(claim.key) as { body: string } | undefined;
      const held = row && (JSON.parse(row.body) as MessageClaim);
      if (!claimIsFree(held, nowSeconds)) return held!;
      this.statements.putClaim.run({ key: claim.key, runId: claim.runId, body: JSON.stringify(claim), expiresAt: claim.expiresAt });
      return claim;
    })();
  }

  async release(claim: MessageClaim): Promise<void> {
    this.statements.releaseMessage.run(claim.key, claim.runId);
  }
}

function prepare(db: Database.Database) {
  return {
    getClaim: db.prepare('SELECT body FROM message_claims WHERE claim_key = ?'),
    putClaim: db.prepare('INSERT OR REPLACE INTO message_claims (claim_key, run_id, body, expires_at) VALUES (@key, @runId, @body, @expiresAt)'),
    releaseMessage: db.prepare('DELETE FROM message_claims WHERE claim_key = ? AND run_id = ?'),
  };
}
