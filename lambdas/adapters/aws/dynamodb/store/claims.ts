import { PutCommand } from '@aws-sdk/lib-dynamodb';
import type { MessageClaim } from '../../../../core/model.js';
import type { MessageClaims } from '../../../../core/ports.js';
import { RUNS_TABLE } from '../tables.js';
import { isConditionFailure, unitsOf, type DynamoHandle } from './handle.js';
import { domain, messageClaimKey } from './keys.js';

/** Message claims: an item per key (`msg#<key>`), expired by TTL, taken by one conditional put (the rule: `claimIsFree`). */
export class DynamoMessageClaims implements MessageClaims {
  constructor(private readonly handle: DynamoHandle) {}

  async take(claim: MessageClaim, nowSeconds: number): Promise<MessageClaim> {
    const key = messageClaimKey(claim.key);
    const item = { ...key, ...claim, [RUNS_TABLE.timeToLive]: claim.expiresAt };
    this.handle.sent.writeRequests++;
    this.handle.sent.writeUnits += unitsOf(item);
    try {
      // TTL removes expired items only eventually, so an expired claim is free to take over.
      await this.handle.doc.send(
        new PutCommand({
          TableName: this.handle.tables.runs,
          Item: item,
          ConditionExpression: 'attribute_not_exists(pk) OR #expiresAt <= :now',
          ExpressionAttributeNames: { '#expiresAt': 'expiresAt' },
          ExpressionAttributeValues: { ':now': nowSeconds },
        }),
      );
      return claim;
    } catch (err) {
      if (!isConditionFailure(err)) throw err;
    }
    const held = await this.handle.get(key);
    // Released between the put and the read: the caller may simply try again.
    return held ? domain<MessageClaim>(held) : this.take(claim, nowSeconds);
  }

  async release(claim: MessageClaim): Promise<void> {
    await this.handle.deleteWhere(messageClaimKey(claim.key), '#runId = :runId', { '#runId': 'runId' }, { ':runId': claim.runId });
  }
}
