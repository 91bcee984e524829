import { DeleteCommand } from '@aws-sdk/lib-dynamodb';
import type { LinkProvider } from '../../../../core/model.js';
import type { ProviderRegistry } from '../../../../core/ports.js';
import type { DynamoHandle } from './handle.js';
import { domain, fitsKey, PROVIDER_PARTITION, providerKey, type Item } from './keys.js';

/**
 * Link providers: an item each in the `provider` partition, the registration beside the places its
 * runs hold (a count, taken and given back by conditional ADDs); a registration is an update that
 * keeps the first `createdAt` (the rule: `registrationOf`).
 */
export class DynamoProviders implements ProviderRegistry {
  constructor(private readonly handle: DynamoHandle) {}

  async put(provider: LinkProvider): Promise<boolean> {
    // An update, not a put: the places its runs hold are the record's, not the admin's.
    const before = await this.handle.update({
      Key: providerKey(provider.providerId),
      UpdateExpression: 'SET #id = :id, #key = :key, #agents = :agents, #max = :max, #created = if_not_exists(#created, :created)',
      ExpressionAttributeNames: { '#id': 'providerId', '#key': 'publicKey', '#agents': 'agents', '#max': 'maxConcurrentRuns', '#created': 'createdAt' },
      ExpressionAttributeValues: { ':id': provider.providerId, ':key': provider.publicKey, ':agents': provider.agents, ':max': provider.maxConcurrentRuns, ':created': provider.createdAt },
      ReturnValues: 'UPDATED_OLD',
    });
    return before?.providerId === undefined;
  }

  async get(providerId: string): Promise<(LinkProvider & { places: number }) | undefined> {
    const item = await this.handle.get(providerKey(providerId));
    return item && providerOf(item);
  }

  async list(): Promise<(LinkProvider & { places: number })[]> {
    const items = await this.handle.queryAll({
      TableName: this.handle.tables.runs,
      KeyConditionExpression: 'pk = :providers',
      ExpressionAttributeValues: { ':providers': PROVIDER_PARTITION },
      ConsistentRead: true,
    });
    return items.map(providerOf);
  }

  async delete(providerId: string): Promise<boolean> {
    if (!fitsKey(providerKey(providerId))) return false;
    this.handle.sent.writeRequests++;
    this.handle.sent.writeUnits += 1;
    const result = await this.handle.doc.send(new DeleteCommand({ TableName: this.handle.tables.runs, Key: providerKey(providerId), ReturnValues: 'ALL_OLD' }));
    return result.Attributes !== undefined;
  }

  async takePlace(providerId: string, limit: number): Promise<boolean> {
    // A registration has no places attribute until a run takes one, which the condition reads as room: under a limit of none there is none.
    if (limit < 1) return false;
    const taken = await this.handle.update({
      Key: providerKey(providerId),
      UpdateExpression: 'ADD #places :one',
      ConditionExpression: 'attribute_exists(pk) AND (attribute_not_exists(#places) OR #places < :limit)',
      ExpressionAttributeNames: { '#places': 'places' },
      ExpressionAttributeValues: { ':one': 1, ':limit': limit },
    });
    return taken !== undefined;
  }

  async releasePlace(providerId: string): Promise<void> {
    // A failed condition: none held (a recovery reset them) or the provider is gone: nothing to give back.
    await this.handle.update({
      Key: providerKey(providerId),
      UpdateExpression: 'ADD #places :minusOne',
      ConditionExpression: '#places > :zero',
      ExpressionAttributeNames: { '#places': 'places' },
      ExpressionAttributeValues: { ':minusOne': -1, ':zero': 0 },
    });
  }

  async resetPlaces(): Promise<void> {
    for (const provider of await this.list()) {
      if (provider.places === 0) continue;
      await this.handle.update({
        Key: providerKey(provider.providerId),
        UpdateExpression: 'SET #places = :zero',
        ConditionExpression: 'attribute_exists(pk)',
        ExpressionAttributeNames: { '#places': 'places' },
        ExpressionAttributeValues: { ':zero': 0 },
      });
    }
  }
}

function providerOf(item: Item): LinkProvider & { places: number } {
  const { places, ...provider } = domain<LinkProvider & { places?: number }>(item);
  return { ...provider, places: Number(places ?? 0) };
}
