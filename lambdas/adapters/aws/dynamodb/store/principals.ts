import { DeleteCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import type { PrincipalKeys } from '../../../../core/ports.js';
import { unitsOf, type DynamoHandle } from './handle.js';
import { principalKey } from './keys.js';

/** Principals' keys: an item per principal of a tenant, its keys a list. */
export class DynamoPrincipals implements PrincipalKeys {
  constructor(private readonly handle: DynamoHandle) {}

  async get(tenant: string, principal: string): Promise<string[] | undefined> {
    const item = await this.handle.get(principalKey(tenant, principal));
    return item && (item.publicKeys as string[]);
  }

  async put(tenant: string, principal: string, publicKeys: readonly string[]): Promise<boolean> {
    const item = { ...principalKey(tenant, principal), tenant, principal, publicKeys: [...publicKeys] };
    this.handle.sent.writeRequests++;
    this.handle.sent.writeUnits += unitsOf(item);
    const result = await this.handle.doc.send(new PutCommand({ TableName: this.handle.tables.runs, Item: item, ReturnValues: 'ALL_OLD' }));
    return result.Attributes === undefined;
  }

  async delete(tenant: string, principal: string): Promise<boolean> {
    this.handle.sent.writeRequests++;
    this.handle.sent.writeUnits += 1;
    const result = await this.handle.doc.send(new DeleteCommand({ TableName: this.handle.tables.runs, Key: principalKey(tenant, principal), ReturnValues: 'ALL_OLD' }));
    return result.Attributes !== undefined;
  }
}
