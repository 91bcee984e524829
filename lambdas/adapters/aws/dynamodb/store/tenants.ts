import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import type { Budget, Spend, Tenant } from '../../../../core/model.js';
import type { TenantAdmission, TenantCounters, TenantLimits } from '../../../../core/ports.js';
import { RUNS_TABLE } from '../tables.js';
import { holds, type DynamoHandle } from './handle.js';
import { TENANT_ITEM, tenantKey, type Item } from './keys.js';

/** Rounds of a tenant's admission lost to concurrent writers before it gives up as rate limited. */
const ADMISSION_ROUNDS = 5;

/**
 * Tenants: an item each (`tenant#<tenant>`) with its limits' counters, the set of its places'
 * holders, its budget and its spend. Admission and a charge are each one conditional write per
 * round (the rules as `core/record/rules.ts` states them, in DynamoDB's conditions).
 */
export class DynamoTenants implements TenantCounters {
  constructor(private readonly handle: DynamoHandle) {}

  async admit(tenant: string, holder: string, limits: TenantLimits): Promise<TenantAdmission> {
    const { runsPerWindow, places } = limits;
    const key = tenantKey(tenant);
    // Each write below is one conditional UpdateItem: the place and the window's count are taken
    // together or not at all. Placeholders are built per write: DynamoDB refuses unused ones. A
    // place is its run's (a set of holders beside the count), so it goes back once whoever gives it.
    const place =
      places === undefined
        ? undefined
        : { add: '#places :one, #holders :holder', check: '(attribute_not_exists(#places) OR #places < :places) AND NOT contains(#holders, :id)' };
    const placeNames: Record<string, string> = place ? { '#places': 'places', '#holders': 'holders' } : {};
    const placeValues: Item = place ? { ':places': places, ':holder': new Set([holder]), ':id': holder } : {};
    const owner = { names: { '#tenant': 'tenant' }, values: { ':tenant': tenant } };
    if (runsPerWindow === undefined) {
      if (!place) return 'admitted';
      const taken = await this.handle.update({
        Key: key,
        UpdateExpression: `SET #tenant = :tenant ADD ${place.add}`,
        ConditionExpression: place.check,
        ExpressionAttributeNames: { ...owner.names, ...placeNames },
        ExpressionAttributeValues: { ...owner.values, ':one': 1, ...placeValues },
      });
      if (taken) return 'admitted';
      return holds(await this.handle.get(key), holder) ? 'admitted' : 'places_full';
    }
    const windowNames = { '#window': 'window', '#runs': 'windowRuns' };
    let window = limits.window;
    for (let round = 0; round < ADMISSION_ROUNDS; round++) {
      // The common case: this minute's window is open and has room.
      const counted = await this.handle.update({
        Key: key,
        UpdateExpression: `ADD #runs :one${place ? `, ${place.add}` : ''}`,
        ConditionExpression: ['#window = :window AND #runs < :rate', ...(place ? [place.check] : [])].join(' AND '),
        ExpressionAttributeNames: { ...windowNames, ...placeNames },
        ExpressionAttributeValues: { ':window': window, ':rate': runsPerWindow, ':one': 1, ...placeValues },
      });
      if (counted) return 'admitted';
      // The first run of a new minute opens its window, which starts the count again.
      const opened = await this.handle.update({
        Key: key,
        UpdateExpression: `SET #tenant = :tenant, #window = :window, #runs = :one${place ? ` ADD ${place.add}` : ''}`,
        ConditionExpression: ['(attribute_not_exists(#window) OR #window < :window)', ...(place ? [place.check] : [])].join(' AND '),
        ExpressionAttributeNames: { ...owner.names, ...windowNames, ...placeNames },
        ExpressionAttributeValues: { ...owner.values, ':window': window, ':one': 1, ...placeValues },
      });
      if (opened) return 'admitted';
      // Both refused: say which limit holds, or go round again after a writer that raced this one.
      const held = await this.handle.get(key);
      // The run holds a place already (its request came again after a crash): it is admitted on that one.
      if (place && holds(held, holder)) return 'admitted';
      if (places !== undefined && ((held?.places as number | undefined) ?? 0) >= places) return 'places_full';
      const heldWindow = (held?.window as number | undefined) ?? window;
      if (heldWindow === window && ((held?.windowRuns as number | undefined) ?? 0) >= runsPerWindow) return 'rate_limited';
      // A writer whose clock runs ahead opened a later window: this run counts in it.
      window = Math.max(window, heldWindow);
    }
    return 'rate_limited';
  }

  async releasePlace(tenant: string, holder: string): Promise<void> {
    // As a thread's: only a place the run holds goes back, once.
    await this.handle.update({
      Key: tenantKey(tenant),
      UpdateExpression: 'ADD #places :minusOne DELETE #holders :holder',
      ConditionExpression: 'contains(#holders, :id)',
      ExpressionAttributeNames: { '#places': 'places', '#holders': 'holders' },
      ExpressionAttributeValues: { ':minusOne': -1, ':holder': new Set([holder]), ':id': holder },
    });
  }

  async get(tenant: string): Promise<Tenant | undefined> {
    const item = await this.handle.get(tenantKey(tenant));
    if (!item || (item.budget === undefined && item.spendPeriod === undefined)) return undefined;
    const found: Tenant = { tenant };
    if (item.budget !== undefined) found.budget = item.budget as Budget;
    if (typeof item.spendPeriod === 'string') {
      found.spend = { period: item.spendPeriod, tokens: Number(item.spendTokens ?? 0), cost: Number(item.spendCost ?? 0) };
      if (typeof item.spendCrossedAt === 'string') found.spend.crossedAt = item.spendCrossedAt;
      if (typeof item.spendCrossedBy === 'string') found.spend.crossedByRunId = item.spendCrossedBy;
    }
    return found;
  }

  async putBudget(tenant: string, budget: Budget | undefined, spend: Spend): Promise<void> {
    const crossed = spend.crossedAt !== undefined && spend.crossedByRunId !== undefined;
    const sets = ['#tenant = :tenant', 'spendPeriod = :period', 'spendTokens = :tokens', 'spendCost = :cost'];
    const removes: string[] = [];
    (budget ? sets : removes).push(budget ? '#budget = :budget' : '#budget');
    if (crossed) sets.push('spendCrossedAt = :at', 'spendCrossedBy = :by');
    else removes.push('spendCrossedAt', 'spendCrossedBy');
    await this.handle.update({
      Key: tenantKey(tenant),
      UpdateExpression: `SET ${sets.join(', ')}${removes.length > 0 ? ` REMOVE ${removes.join(', ')}` : ''}`,
      ExpressionAttributeNames: { '#tenant': 'tenant', '#budget': 'budget' },
      ExpressionAttributeValues: {
        ':tenant': tenant,
        ':period': spend.period,
        ':tokens': spend.tokens,
        ':cost': spend.cost,
        ...(budget ? { ':budget': budget } : {}),
        ...(crossed ? { ':at': spend.crossedAt, ':by': spend.crossedByRunId } : {}),
      },
    });
  }

  async charge(tenant: string, charge: Pick<Spend, 'period' | 'tokens' | 'cost'>): Promise<Spend | undefined> {
    const key = tenantKey(tenant);
    for (let round = 0; round < ADMISSION_ROUNDS; round++) {
      // The common case: the spend is of this period already.
      const added = await this.handle.update({
        Key: key,
        UpdateExpression: 'ADD spendTokens :tokens, spendCost :cost',
        ConditionExpression: 'spendPeriod = :period',
        ExpressionAttributeValues: { ':tokens': charge.tokens, ':cost': charge.cost, ':period': charge.period },
        ReturnValues: 'ALL_NEW',
      });
      if (added) return spendOf(added);
      // The first charge of a period starts its spend; a charge of a period already over adds nothing.
      const started = await this.handle.update({
        Key: key,
        UpdateExpression: 'SET #tenant = :tenant, spendPeriod = :period, spendTokens = :tokens, spendCost = :cost REMOVE spendCrossedAt, spendCrossedBy',
        ConditionExpression: 'attribute_not_exists(spendPeriod) OR spendPeriod < :period',
        ExpressionAttributeNames: { '#tenant': 'tenant' },
        ExpressionAttributeValues: { ':tenant': tenant, ':tokens': charge.tokens, ':cost': charge.cost, ':period': charge.period },
        ReturnValues: 'ALL_NEW',
      });
      if (started) return spendOf(started);
      const held = await this.handle.get(key);
      if (typeof held?.spendPeriod === 'string' && held.spendPeriod > charge.period) return undefined;
    }
    return undefined;
  }

  async markBudgetCrossed(tenant: string, period: string, runId: string, at: string): Promise<void> {
    await this.handle.update({
      Key: tenantKey(tenant),
      UpdateExpression: 'SET spendCrossedAt = :at, spendCrossedBy = :by',
      ConditionExpression: 'spendPeriod = :period AND attribute_not_exists(spendCrossedAt)',
      ExpressionAttributeValues: { ':at': at, ':by': runId, ':period': period },
    });
  }

  async setPlaces(places: ReadonlyMap<string, readonly string[]>): Promise<void> {
    const tenants = new Set(places.keys());
    let start: Item | undefined;
    do {
      this.handle.sent.readRequests++;
      const page = await this.handle.doc.send(
        new ScanCommand({
          TableName: this.handle.tables.runs,
          FilterExpression: '#sk = :tenant',
          ExpressionAttributeNames: { '#sk': RUNS_TABLE.sortKey },
          ExpressionAttributeValues: { ':tenant': TENANT_ITEM },
          ExclusiveStartKey: start,
        }),
      );
      for (const item of page.Items ?? []) tenants.add(item.tenant as string);
      start = page.LastEvaluatedKey;
    } while (start);
    for (const tenant of tenants) {
      const holders = places.get(tenant) ?? [];
      await this.handle.update({
        Key: tenantKey(tenant),
        UpdateExpression: `SET #tenant = :tenant, #places = :places${holders.length > 0 ? ', #holders = :holders' : ' REMOVE #holders'}`,
        ExpressionAttributeNames: { '#tenant': 'tenant', '#places': 'places', '#holders': 'holders' },
        ExpressionAttributeValues: { ':tenant': tenant, ':places': holders.length, ...(holders.length > 0 ? { ':holders': new Set(holders) } : {}) },
      });
    }
  }
}

function spendOf(item: Item): Spend {
  const spend: Spend = { period: String(item.spendPeriod), tokens: Number(item.spendTokens ?? 0), cost: Number(item.spendCost ?? 0) };
  if (typeof item.spendCrossedAt === 'string') spend.crossedAt = item.spendCrossedAt;
  if (typeof item.spendCrossedBy === 'string') spend.crossedByRunId = item.spendCrossedBy;
  return spend;
}
