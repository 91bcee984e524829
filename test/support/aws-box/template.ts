import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

export const ACCOUNT = '123456789012';
export const REGION = 'us-east-1';
export const STACK = 'Funduq';

export interface Resource {
  Type: string;
  Properties?: Record<string, any>;
}
export type Template = { Resources: Record<string, Resource>; Outputs?: Record<string, { Value: unknown }> };

/** Where the box serves what the template's references name (queue URLs must name the SQS stand-in). */
export interface Endpoints {
  aws: string;
}

/**
 * Physical names and attributes for the template's resources, as CloudFormation would give them
 * in the box's account: the names are the logical ids under the stack's name, so a reader of the
 * box's state sees which resource is which.
 */
export class Deployment {
  readonly template: Template;

  constructor(
    template: Template,
    readonly assetsDir: string,
    private readonly endpoints: Endpoints,
    /** Physical ids chosen by the service (API ids, key ids, secret suffixes). */
    private readonly ids: Record<string, string> = {},
  ) {
    this.template = template;
  }

  static async load(dir: string, endpoints: Endpoints): Promise<Deployment> {
    const template = JSON.parse(await readFile(join(dir, `${STACK}.template.json`), 'utf8')) as Template;
    return new Deployment(template, dir, endpoints);
  }

  resources(type: string): Array<[string, Resource]> {
    return Object.entries(this.template.Resources).filter(([, resource]) => resource.Type === type);
  }

  resource(logicalId: string): Resource {
    const found = this.template.Resources[logicalId];
    if (!found) throw new Error(`the template has no resource ${logicalId}`);
    return found;
  }

  /** Resolves CloudFormation's intrinsic functions in a value of the template. */
  resolve(value: unknown): any {
    if (Array.isArray(value)) return value.map((item) => this.resolve(item));
    if (value === null || typeof value !== 'object') return value;
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length === 1) {
      const [fn, arg] = entries[0];
      switch (fn) {
        case 'Ref':
          return this.ref(arg as string);
        case 'Fn::GetAtt': {
          const [id, attribute] = Array.isArray(arg) ? (arg as string[]) : (arg as string).split('.');
          return this.attribute(id, attribute);
        }
        case 'Fn::Join': {
          const [separator, parts] = arg as [string, unknown[]];
          return (this.resolve(parts) as unknown[]).join(separator);
        }
        case 'Fn::Select': {
          const [index, list] = arg as [number, unknown];
          return (this.resolve(list) as unknown[])[Number(this.resolve(index))];
        }
        case 'Fn::Split': {
          const [separator, source] = arg as [string, unknown];
          return String(this.resolve(source)).split(separator);
        }
        case 'Fn::Sub': {
          const [text, variables] = typeof arg === 'string' ? [arg, {}] : (arg as [string, Record<string, unknown>]);
          return text.replace(/\$\{([^}]+)\}/g, (_, name: string) => {
            if (name in variables) return String(this.resolve(variables[name]));
            const [id, attribute] = name.split('.');
            return String(attribute ? this.attribute(id, attribute) : this.ref(id));
          });
        }
      }
    }
    return Object.fromEntries(entries.map(([key, item]) => [key, this.resolve(item)]));
  }

  ref(id: string): string {
    switch (id) {
      case 'AWS::AccountId':
        return ACCOUNT;
      case 'AWS::Region':
        return REGION;
      case 'AWS::Partition':
        return 'aws';
      case 'AWS::URLSuffix':
        return 'amazonaws.com';
      case 'AWS::StackName':
        return STACK;
    }
    const resource = this.resource(id);
    const name = this.physicalName(id);
    switch (resource.Type) {
      case 'AWS::SQS::Queue':
        return `${this.endpoints.aws}/${ACCOUNT}/${name}`;
      case 'AWS::StepFunctions::StateMachine':
        return `arn:aws:states:${REGION}:${ACCOUNT}:stateMachine:${name}`;
      case 'AWS::SecretsManager::Secret':
        return this.attribute(id, 'Arn');
      default:
        return name;
    }
  }

  attribute(id: string, attribute: string): string {
    const resource = this.resource(id);
    const name = this.physicalName(id);
    const key = `${resource.Type}.${attribute}`;
    switch (key) {
      case 'AWS::DynamoDB::Table.Arn':
        return `arn:aws:dynamodb:${REGION}:${ACCOUNT}:table/${name}`;
      case 'AWS::DynamoDB::Table.StreamArn':
        return `arn:aws:dynamodb:${REGION}:${ACCOUNT}:table/${name}/stream/2026-01-01T00:00:00.000`;
      case 'AWS::SQS::Queue.Arn':
        return `arn:aws:sqs:${REGION}:${ACCOUNT}:${name}`;
      case 'AWS::SQS::Queue.QueueName':
        return name;
      case 'AWS::SQS::Queue.QueueUrl':
        return this.ref(id);
      case 'AWS::Events::Rule.Arn':
        return `arn:aws:events:${REGION}:${ACCOUNT}:rule/${name}`;
      case 'AWS::Lambda::Function.Arn':
        return `arn:aws:lambda:${REGION}:${ACCOUNT}:function:${name}`;
      case 'AWS::IAM::Role.Arn':
        return `arn:aws:iam::${ACCOUNT}:role/${name}`;
      case 'AWS::StepFunctions::StateMachine.Name':
        return name;
      case 'AWS::SecretsManager::Secret.Arn':
        return `arn:aws:secretsmanager:${REGION}:${ACCOUNT}:secret:${name}-${this.id(`${id}.suffix`, 'AbCdEf')}`;
      case 'AWS::Logs::LogGroup.Arn':
        return `arn:aws:logs:${REGION}:${ACCOUNT}:log-group:${name}:*`;
      case 'AWS::ApiGateway::RestApi.RootResourceId':
        return `${this.ref(id)}-root`;
    }
    throw new Error(`the box does not know the attribute ${attribute} of ${resource.Type} (${id})`);
  }

  /** The name CloudFormation would give a resource of this stack that names none itself. */
  physicalName(id: string): string {
    const resource = this.resource(id);
    const props = resource.Properties ?? {};
    switch (resource.Type) {
      case 'AWS::SQS::Queue':
        return props.QueueName ?? `${STACK}-${id}${props.FifoQueue ? '.fifo' : ''}`;
      case 'AWS::DynamoDB::Table':
        return props.TableName ?? `${STACK}-${id}`;
      case 'AWS::Lambda::Function':
        return props.FunctionName ?? `${STACK}-${id}`;
      case 'AWS::StepFunctions::StateMachine':
        return props.StateMachineName ?? `${id}-box`;
      case 'AWS::RestApi':
      case 'AWS::ApiGateway::RestApi':
        return this.id(id, 'boxapi0001');
      case 'AWS::ApiGateway::ApiKey':
        return this.id(id, 'boxkey0001');
      case 'AWS::ApiGatewayV2::Api':
        return this.id(id, 'boxws00001');
      case 'AWS::ApiGatewayV2::Stage':
        return props.StageName;
      case 'AWS::ApiGateway::Stage':
        return props.StageName;
      default:
        return `${STACK}-${id}`;
    }
  }

  private id(key: string, fallback: string): string {
    return (this.ids[key] ??= fallback);
  }
}
