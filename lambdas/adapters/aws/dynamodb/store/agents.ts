import { DeleteCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import type { Agent } from '../../../../core/model.js';
import type { AgentRegistry } from '../../../../core/ports.js';
import { unitsOf, type DynamoHandle } from './handle.js';
import { AGENT_PARTITION, agentKey, domain } from './keys.js';

/** Agent definitions: an item each in the `agent` partition, sorted by id. */
export class DynamoAgents implements AgentRegistry {
  constructor(private readonly handle: DynamoHandle) {}

  async put(agent: Agent): Promise<void> {
    const item = { ...agentKey(agent.id), ...agent };
    this.handle.sent.writeRequests++;
    this.handle.sent.writeUnits += unitsOf(item);
    await this.handle.doc.send(new PutCommand({ TableName: this.handle.tables.runs, Item: item }));
  }

  async get(agentId: string): Promise<Agent | undefined> {
    const item = await this.handle.get(agentKey(agentId));
    return item && domain<Agent>(item);
  }

  async list(): Promise<Agent[]> {
    const items = await this.handle.queryAll({
      TableName: this.handle.tables.runs,
      KeyConditionExpression: 'pk = :agents',
      ExpressionAttributeValues: { ':agents': AGENT_PARTITION },
      ConsistentRead: true,
    });
    return items.map((item) => domain<Agent>(item));
  }

  async delete(agentId: string): Promise<void> {
    this.handle.sent.writeRequests++;
    // A delete is billed on the deleted item's size; agents are well under 1 KB.
    this.handle.sent.writeUnits += 1;
    await this.handle.doc.send(new DeleteCommand({ TableName: this.handle.tables.runs, Key: agentKey(agentId) }));
  }
}
