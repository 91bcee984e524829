import type { AwsCall, AwsService, Reply } from './aws-endpoint.js';

export interface Secret {
  /** The template's logical id. */
  id: string;
  arn: string;
  name: string;
  value: string;
}

/**
 * Secrets Manager's GetSecretValue over its JSON API, for a function that reads a secret with the
 * SDK rather than through the extension (the push signing seed); the template's secrets only.
 */
export class SecretsManagerService implements AwsService {
  constructor(
    private readonly secrets: ReadonlyMap<string, Secret>,
    private readonly now: () => number,
  ) {}

  private find(call: AwsCall): Secret | undefined {
    const secretId = String((call.body as { SecretId?: unknown }).SecretId ?? '');
    return [...this.secrets.values()].find((s) => s.arn === secretId || s.name === secretId);
  }

  authorize(call: AwsCall): Array<{ action: string; resource: string }> {
    const resource = this.find(call)?.arn ?? String((call.body as { SecretId?: unknown }).SecretId ?? '*');
    return [{ action: `secretsmanager:${call.operation}`, resource }];
  }

  async handle(call: AwsCall): Promise<Reply> {
    if (call.operation !== 'GetSecretValue') return error('InvalidRequestException', `the box's Secrets Manager does not serve ${call.operation}`);
    const secret = this.find(call);
    if (!secret) return error('ResourceNotFoundException', "Secrets Manager can't find the specified secret.");
    return {
      status: 200,
      body: JSON.stringify({ ARN: secret.arn, Name: secret.name, SecretString: secret.value, VersionId: 'v1', VersionStages: ['AWSCURRENT'], CreatedDate: this.now() / 1000 }),
      headers: { 'content-type': 'application/x-amz-json-1.1' },
    };
  }
}

function error(type: string, message: string): Reply {
  return { status: 400, body: JSON.stringify({ __type: type, message }), headers: { 'content-type': 'application/x-amz-json-1.1' } };
}
