import { DeleteCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import type { PushConfig } from '../../../../core/model.js';
import type { PushConfigs } from '../../../../core/ports.js';
import { unitsOf, type DynamoHandle } from './handle.js';
import { domain, fitsKey, PUSH_CONFIG_PREFIX, pushConfigKey, taskPartition } from './keys.js';

/** Push configs: an item each in its task's partition (`task#<taskId>`, sk `push#<configId>`). */
export class DynamoPushConfigs implements PushConfigs {
  constructor(private readonly handle: DynamoHandle) {}

  async put(config: PushConfig): Promise<void> {
    const item = { ...pushConfigKey(config.taskId, config.configId), ...config };
    this.handle.sent.writeRequests++;
    this.handle.sent.writeUnits += unitsOf(item);
    await this.handle.doc.send(new PutCommand({ TableName: this.handle.tables.runs, Item: item }));
  }

  async get(taskId: string, configId: string): Promise<PushConfig | undefined> {
    const item = await this.handle.get(pushConfigKey(taskId, configId));
    return item && domain<PushConfig>(item);
  }

  async list(taskId: string): Promise<PushConfig[]> {
    const items = await this.handle.queryAll({
      TableName: this.handle.tables.runs,
      KeyConditionExpression: 'pk = :task AND begins_with(sk, :push)',
      ExpressionAttributeValues: { ':task': taskPartition(taskId), ':push': PUSH_CONFIG_PREFIX },
      ConsistentRead: true,
    });
    return items.map((item) => domain<PushConfig>(item));
  }

  async delete(taskId: string, configId: string): Promise<boolean> {
    if (!fitsKey(pushConfigKey(taskId, configId))) return false;
    this.handle.sent.writeRequests++;
    this.handle.sent.writeUnits += 1;
    const result = await this.handle.doc.send(
      new DeleteCommand({ TableName: this.handle.tables.runs, Key: pushConfigKey(taskId, configId), ReturnValues: 'ALL_OLD' }),
    );
    return result.Attributes !== undefined;
  }

  async recordFailure(taskId: string, configId: string, deadLetter: NonNullable<PushConfig['deadLetter']>): Promise<void> {
    await this.handle.update({
      Key: pushConfigKey(taskId, configId),
      UpdateExpression: 'SET #deadLetter = :deadLetter',
      // A config deleted while its notification was being retried is not brought back.
      ConditionExpression: 'attribute_exists(pk)',
      ExpressionAttributeNames: { '#deadLetter': 'deadLetter' },
      ExpressionAttributeValues: { ':deadLetter': deadLetter },
    });
  }
}
