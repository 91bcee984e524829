import { App } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { FunduqStack, settingsFromContext, type FunduqSettings } from '../../lib/funduq-stack.js';
import { RUN_EVENTS_TABLE, RUNS_TABLE } from '../../lambdas/adapters/aws/dynamodb/tables.js';
import { ENV } from '../../lambdas/runtimes/environment.js';
import { DELIVERY_MARGIN_MS, longestSendMs, PUSH_SENDER_SETTINGS } from '../../lambdas/runtimes/push-delivery.js';

type Resource = { Type: string; Properties: Record<string, any> };

const USER_POOL_ARN = 'arn:aws:cognito-idp:eu-west-1:123456789012:userpool/eu-west-1_Example';

/**
 * Bundling the ten functions is esbuild's job and `npx cdk synth` covers it; here the stack's
 * shape is what is asserted, so bundling is skipped (the documented `aws:cdk:bundling-stacks`).
 */
function synth(settings: Partial<FunduqSettings> = {}): { stack: FunduqStack; template: Template } {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const stack = new FunduqStack(app, 'Funduq', { env: { account: '123456789012', region: 'eu-west-1' }, settings });
  return { stack, template: Template.fromStack(stack) };
}

const defaults = synth();

function resources(template: Template, type: string): Record<string, Resource> {
  return template.findResources(type) as Record<string, Resource>;
}

function only(template: Template, type: string, props: Record<string, unknown> = {}): [string, Resource] {
  const found = Object.entries(template.findResources(type, props.Properties ? props : { Properties: props }));
  expect(found).toHaveLength(1);
  return found[0] as [string, Resource];
}

/** The logical id of the function whose handler file is `name`. */
function functionId(template: Template, name: string): string {
  const [id] = only(template, 'AWS::Lambda::Function', {
    Environment: { Variables: Match.objectLike({ FUNDUQ_FUNCTION: name }) },
  });
  return id;
}

/** Every IAM statement attached to a function's role. */
function statementsOf(template: Template, name: string): Array<{ Action: string | string[]; Resource: unknown; Effect: string }> {
  const fn = resources(template, 'AWS::Lambda::Function')[functionId(template, name)];
  const roleId = fn.Properties.Role['Fn::GetAtt'][0];
  return Object.values(resources(template, 'AWS::IAM::Policy'))
    .filter((policy) => policy.Properties.Roles.some((role: { Ref: string }) => role.Ref === roleId))
    .flatMap((policy) => policy.Properties.PolicyDocument.Statement);
}

function actionsOf(template: Template, name: string): string[] {
  return statementsOf(template, name).flatMap((s) => (Array.isArray(s.Action) ? s.Action : [s.Action]));
}

/** The state machine's definition as ASL, with every CloudFormation reference left as a `${Ref}` marker. */
function stateMachineDefinition(template: Template): any {
  const [, machine] = only(template, 'AWS::StepFunctions::StateMachine');
  const parts = machine.Properties.DefinitionString['Fn::Join'][1] as unknown[];
  return JSON.parse(parts.map((part) => (typeof part === 'string' ? part : '${Ref}')).join(''));
}

/** Each API method as `METHOD /path`, with its integration and auth. */
function methods(template: Template): Map<string, Resource['Properties']> {
  const parts = resources(template, 'AWS::ApiGateway::Resource');
  const pathOf = (ref: any): string => (ref.Ref ? `${pathOf(parts[ref.Ref].Properties.ParentId)}/${parts[ref.Ref].Properties.PathPart}` : '');
  const found = new Map<string, Resource['Properties']>();
  for (const method of Object.values(resources(template, 'AWS::ApiGateway::Method'))) {
    found.set(`${method.Properties.HttpMethod} ${pathOf(method.Properties.ResourceId)}`, method.Properties);
  }
  return found;
}

describe('the thread queue', () => {
  const { template } = defaults;
  const queues = resources(template, 'AWS::SQS::Queue');
  const [, main] = Object.entries(queues).find(([, q]) => q.Properties.RedrivePolicy) as [string, Resource];

  it('is a FIFO queue deduplicated by the id the sender gives (the run id), never by content', () => {
    expect(main.Properties).toMatchObject({ FifoQueue: true, ContentBasedDeduplication: false });
  });

  it('is a high-throughput FIFO: deduplication and throughput are per thread (message group)', () => {
    expect(main.Properties).toMatchObject({ DeduplicationScope: 'messageGroup', FifoThroughputLimit: 'perMessageGroupId' });
  });

  it('sends a message that keeps failing to a FIFO dead-letter queue after three receives', () => {
    const dlqId = main.Properties.RedrivePolicy.deadLetterTargetArn['Fn::GetAtt'][0];
    expect(main.Properties.RedrivePolicy.maxReceiveCount).toBe(3);
    expect(queues[dlqId].Properties.FifoQueue).toBe(true);
  });

  it('keeps a message invisible for six times the dispatcher’s timeout, as AWS asks of a Lambda event source', () => {
    const dispatcher = resources(template, 'AWS::Lambda::Function')[functionId(template, 'dispatcher')];
    expect(main.Properties.VisibilityTimeout).toBeGreaterThanOrEqual(6 * dispatcher.Properties.Timeout);
  });

  it('takes its retry count from the settings', () => {
    const { template: custom } = synth({ maxReceiveCount: 5 });
    custom.hasResourceProperties('AWS::SQS::Queue', { RedrivePolicy: Match.objectLike({ maxReceiveCount: 5 }) });
  });
});

describe('the store', () => {
  const { template } = defaults;

  it('declares runs with the keys and indexes the store adapter uses', () => {
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      KeySchema: [
        { AttributeName: RUNS_TABLE.partitionKey, KeyType: 'HASH' },
        { AttributeName: RUNS_TABLE.sortKey, KeyType: 'RANGE' },
      ],
      AttributeDefinitions: Match.arrayWith([
        { AttributeName: RUNS_TABLE.byThread.sortKey, AttributeType: 'N' },
        { AttributeName: RUNS_TABLE.byTenant.sortKey, AttributeType: 'S' },
      ]),
      GlobalSecondaryIndexes: Match.arrayWith(
        [RUNS_TABLE.byThread, RUNS_TABLE.byTenant].map((index) =>
          Match.objectLike({
            IndexName: index.indexName,
            KeySchema: [
              { AttributeName: index.partitionKey, KeyType: 'HASH' },
              { AttributeName: index.sortKey, KeyType: 'RANGE' },
            ],
            Projection: { ProjectionType: 'ALL' },
          }),
        ),
      ),
      TimeToLiveSpecification: { AttributeName: RUNS_TABLE.timeToLive, Enabled: true },
    });
  });

  it('expires message-id claims (and whatever else carries it) by the runs table’s ttl attribute', () => {
    const [, runs] = only(template, 'AWS::DynamoDB::Table', {
      KeySchema: [
        { AttributeName: RUNS_TABLE.partitionKey, KeyType: 'HASH' },
        { AttributeName: RUNS_TABLE.sortKey, KeyType: 'RANGE' },
      ],
    });
    expect(RUNS_TABLE.timeToLive).toBe('ttl');
    expect(runs.Properties.TimeToLiveSpecification).toEqual({ AttributeName: 'ttl', Enabled: true });
  });

  it('declares run_events keyed by run id and numeric seq', () => {
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      KeySchema: [
        { AttributeName: RUN_EVENTS_TABLE.partitionKey, KeyType: 'HASH' },
        { AttributeName: RUN_EVENTS_TABLE.sortKey, KeyType: 'RANGE' },
      ],
      AttributeDefinitions: Match.arrayWith([{ AttributeName: RUN_EVENTS_TABLE.sortKey, AttributeType: 'N' }]),
      TimeToLiveSpecification: { AttributeName: RUN_EVENTS_TABLE.timeToLive, Enabled: true },
    });
  });

  it('bills both tables on demand, with point-in-time recovery and streams of new images', () => {
    const tables = Object.values(resources(template, 'AWS::DynamoDB::Table'));
    expect(tables).toHaveLength(2);
    for (const table of tables) {
      expect(table.Properties).toMatchObject({
        BillingMode: 'PAY_PER_REQUEST',
        PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
        StreamSpecification: { StreamViewType: 'NEW_IMAGE' },
      });
    }
  });

  it('keeps the tables when the stack is deleted unless told otherwise', () => {
    template.allResources('AWS::DynamoDB::Table', { DeletionPolicy: 'Retain' });
    synth({ retainData: false }).template.allResources('AWS::DynamoDB::Table', { DeletionPolicy: 'Delete' });
  });
});

describe('the doors API', () => {
  const { template } = defaults;
  const routes = methods(template);

  it.each([
    'POST /agui/{agentId}',
    'GET /agui/{agentId}/runs/{runId}/events',
    'POST /a2a/{agentId}',
    'ANY /a2a/{agentId}/rest/{proxy+}',
    'GET /admin/usage/export',
  ])('streams %s from the response-streaming function, for up to 15 minutes', (route) => {
    const integration = routes.get(route)?.Integration;
    expect(integration).toMatchObject({ Type: 'AWS_PROXY', ResponseTransferMode: 'STREAM', TimeoutInMillis: 900_000 });
    expect(JSON.stringify(integration.Uri)).toContain('/response-streaming-invocations');
    expect(JSON.stringify(integration.Uri)).toContain(functionId(template, 'doors-stream'));
  });

  it.each([
    'ANY /{proxy+}',
    'ANY /agui/{agentId}/{proxy+}',
    'ANY /agui/{agentId}/runs/{runId}/{proxy+}',
    'ANY /a2a/{agentId}/{proxy+}',
    'ANY /admin/{proxy+}',
    'ANY /admin/usage',
    'ANY /admin/usage/{proxy+}',
    'ANY /admin/usage/export',
    'GET /a2a/{agentId}/.well-known/agent-card.json',
    'GET /healthz',
  ])('buffers %s through the buffered function', (route) => {
    const integration = routes.get(route)?.Integration;
    expect(integration).toMatchObject({ Type: 'AWS_PROXY' });
    expect(integration.ResponseTransferMode).toBeUndefined();
    expect(JSON.stringify(integration.Uri)).toContain(functionId(template, 'doors'));
  });

  it('is a regional endpoint, which keeps an idle stream open for minutes (edge-optimized: 30 s)', () => {
    template.hasResourceProperties('AWS::ApiGateway::RestApi', { EndpointConfiguration: { Types: ['REGIONAL'] } });
  });

  it('requires an API key by default, with a usage plan, except on the agent card, health and the console (which signs its operators in)', () => {
    template.resourceCountIs('AWS::ApiGateway::UsagePlan', 1);
    template.resourceCountIs('AWS::ApiGateway::ApiKey', 1);
    template.resourceCountIs('AWS::ApiGateway::UsagePlanKey', 1);
    for (const [route, method] of routes) {
      const open = /agent-card|jwks|healthz|readyz| \/console/.test(route);
      expect([route, method.ApiKeyRequired === true]).toEqual([route, !open]);
    }
  });

  it('with apiAuth=none requires nothing and says so loudly', () => {
    const { stack, template: open } = synth({ apiAuth: 'none' });
    for (const method of methods(open).values()) expect(method.ApiKeyRequired).toBeUndefined();
    open.resourceCountIs('AWS::ApiGateway::UsagePlan', 0);
    open.hasOutput('Warning', { Value: Match.stringLikeRegexp('API AUTH IS OFF') });
    Annotations.fromStack(stack).hasWarning('/Funduq', Match.stringLikeRegexp('API AUTH IS OFF'));
  });

  it('with apiAuth=jwt authorizes callers with the configured Cognito user pool', () => {
    const { template: jwt } = synth({ apiAuth: 'jwt', jwtUserPoolArn: USER_POOL_ARN });
    jwt.hasResourceProperties('AWS::ApiGateway::Authorizer', { Type: 'COGNITO_USER_POOLS', ProviderARNs: [USER_POOL_ARN] });
    expect(methods(jwt).get('POST /agui/{agentId}')?.AuthorizationType).toBe('COGNITO_USER_POOLS');
    expect(methods(jwt).get('GET /healthz')?.AuthorizationType).toBe('NONE');
  });

  it('leaves the agent card open in every auth mode: it is how a caller learns which credential to bring', () => {
    const { template: jwt } = synth({ apiAuth: 'jwt', jwtUserPoolArn: USER_POOL_ARN });
    for (const t of [template, jwt]) {
      const card = methods(t).get('GET /a2a/{agentId}/.well-known/agent-card.json');
      expect(card).toMatchObject({ AuthorizationType: 'NONE' });
      expect(card?.ApiKeyRequired).not.toBe(true);
    }
  });

  it('tells both door functions the stage’s URL, for the agent cards, and the push signer, for its JWTs’ issuer, without depending on the stage', () => {
    const all = resources(template, 'AWS::Lambda::Function');
    const restApi = only(template, 'AWS::ApiGateway::RestApi')[0];
    for (const name of ['doors', 'doors-stream', 'stream-handler']) {
      const url = all[functionId(template, name)].Properties.Environment.Variables[ENV.publicUrl];
      expect(url).toEqual({
        'Fn::Join': ['', ['https://', { Ref: restApi }, '.execute-api.eu-west-1.', { Ref: 'AWS::URLSuffix' }, '/v1/']],
      });
    }
  });

  it('serves a custom domain when one is configured', () => {
    const { template: custom } = synth({
      domainName: 'agents.example.com',
      certificateArn: 'arn:aws:acm:eu-west-1:123456789012:certificate/abc',
    });
    custom.hasResourceProperties('AWS::ApiGateway::DomainName', {
      DomainName: 'agents.example.com',
      EndpointConfiguration: { Types: ['REGIONAL'] },
    });
    custom.hasOutput('AguiUrl', { Value: 'https://agents.example.com/agui/' });
    custom.hasOutput('A2aUrl', { Value: 'https://agents.example.com/a2a/' });
    custom.hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ FUNDUQ_FUNCTION: 'doors-stream', [ENV.publicUrl]: 'https://agents.example.com/' }) },
    });
  });
});

describe('push signing', () => {
  const { template } = defaults;

  it('derives every key from one generated secret that the stream handler signs with and the doors publish, and no other function reads', () => {
    const [seed] = only(template, 'AWS::SecretsManager::Secret', { GenerateSecretString: Match.objectLike({ PasswordLength: 64 }) });
    const all = resources(template, 'AWS::Lambda::Function');
    for (const name of ['stream-handler', 'doors', 'doors-stream', 'dispatcher', 'ask-expirer']) {
      const told = all[functionId(template, name)].Properties.Environment.Variables[ENV.pushSigningSecretArn];
      const reads = statementsOf(template, name).filter((s) => JSON.stringify(s.Action).includes('secretsmanager:GetSecretValue') && JSON.stringify(s.Resource).includes(seed));
      const uses = ['stream-handler', 'doors', 'doors-stream'].includes(name);
      expect([name, told, reads.length > 0]).toEqual([name, uses ? { Ref: seed } : undefined, uses]);
    }
  });

  it.each([{}, { apiAuth: 'jwt' as const, jwtUserPoolArn: USER_POOL_ARN }])('publishes the keys at GET /.well-known/jwks.json with no credential, from the buffered doors (%o)', (settings) => {
    const { template: t } = synth(settings);
    const jwks = methods(t).get('GET /.well-known/jwks.json');
    expect(jwks).toMatchObject({ AuthorizationType: 'NONE', Integration: { Type: 'AWS_PROXY' } });
    expect(jwks?.ApiKeyRequired).not.toBe(true);
    expect(JSON.stringify(jwks?.Integration.Uri)).toContain(functionId(t, 'doors'));
    expect(JSON.stringify(jwks?.Integration.Uri)).not.toContain(functionId(t, 'doors-stream'));
  });
});

describe('the dispatcher', () => {
  const { template } = defaults;

  it('takes one message (one run) per invocation, reporting a failed one back', () => {
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      FunctionName: { Ref: functionId(template, 'dispatcher') },
      BatchSize: 1,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
    });
  });

  it('is bounded by the event source’s maximum concurrency, reserving none unless asked to', () => {
    const { template: custom } = synth({ dispatcherConcurrency: 4 });
    custom.hasResourceProperties('AWS::Lambda::EventSourceMapping', { BatchSize: 1, ScalingConfig: { MaximumConcurrency: 4 } });
    for (const fn of Object.values(resources(custom, 'AWS::Lambda::Function'))) {
      expect(fn.Properties.ReservedConcurrentExecutions).toBeUndefined();
    }
    const { template: reserved } = synth({ dispatcherConcurrency: 4, dispatcherReservedConcurrency: 6 });
    reserved.hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ FUNDUQ_FUNCTION: 'dispatcher' }) },
      ReservedConcurrentExecutions: 6,
    });
    expect(() => synth({ dispatcherConcurrency: 4, dispatcherReservedConcurrency: 4 })).toThrow(/dispatcherReservedConcurrency.*more than dispatcherConcurrency/);
  });

  it('starts no function with source maps enabled (they slow a cold start’s import)', () => {
    for (const fn of Object.values(resources(template, 'AWS::Lambda::Function'))) {
      expect(fn.Properties.Environment.Variables.NODE_OPTIONS ?? '').not.toContain('--enable-source-maps');
    }
  });
});

describe('the dead letters', () => {
  const { template } = defaults;

  it('are read from the thread queue’s dead-letter queue by a function of their own, a failed message reported back', () => {
    const queues = resources(template, 'AWS::SQS::Queue');
    const [deadLetterQueue] = Object.entries(queues).find(([id]) => id.startsWith('ThreadQueueDeadLetters'))!;
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      FunctionName: { Ref: functionId(template, 'dead-letters') },
      EventSourceArn: { 'Fn::GetAtt': [deadLetterQueue, 'Arn'] },
      FunctionResponseTypes: ['ReportBatchItemFailures'],
    });
  });

  it('let their function read and end a run on the record, and let go of a link run’s message, and nothing else: no queue to send to, no timer, no agent, no secret', () => {
    const [runs] = only(template, 'AWS::DynamoDB::Table', { KeySchema: Match.arrayWith([{ AttributeName: RUNS_TABLE.sortKey, KeyType: 'RANGE' }]) });
    const [runEvents] = only(template, 'AWS::DynamoDB::Table', {
      KeySchema: Match.arrayWith([{ AttributeName: RUN_EVENTS_TABLE.sortKey, KeyType: 'RANGE' }]),
    });
    const statements = statementsOf(template, 'dead-letters');
    const on = (table: string) =>
      statements
        .filter((s) => JSON.stringify(s.Resource).includes(`"${table}"`))
        .flatMap((s) => (Array.isArray(s.Action) ? s.Action : [s.Action]))
        .filter((a) => a.startsWith('dynamodb:'))
        .sort();
    expect(on(runs)).toEqual(['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem']);
    expect(on(runEvents)).toEqual(['dynamodb:PutItem', 'dynamodb:Query']);
    const sqsStatements = statementsOf(template, 'dead-letters').filter((s) => JSON.stringify(s.Action).includes('sqs:'));
    const onQueue = (dead: boolean) => sqsStatements.filter((s) => JSON.stringify(s.Resource).includes('ThreadQueueDeadLetters') === dead).flatMap((s) => (Array.isArray(s.Action) ? s.Action : [s.Action])).sort();
    // What the event source needs of its queue; of the thread queue, a held message's delete.
    expect(onQueue(true)).toEqual(['sqs:ChangeMessageVisibility', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl', 'sqs:ReceiveMessage']);
    expect(onQueue(false)).toEqual(['sqs:DeleteMessage']);
    const others = actionsOf(template, 'dead-letters').filter((a) => !a.startsWith('dynamodb:') && !a.startsWith('logs:') && !a.startsWith('xray:') && !a.startsWith('sqs:'));
    expect(others).toEqual([]);
  });
});

describe('the repair', () => {
  const { template } = defaults;

  it('reads the runs table’s stream from its oldest change, invoked only for run items queued or settled, and parks a change it keeps failing on', () => {
    const [mapping] = Object.values(resources(template, 'AWS::Lambda::EventSourceMapping')).filter(
      (m) => m.Properties.FunctionName.Ref === functionId(template, 'repair'),
    );
    expect(mapping.Properties).toMatchObject({ StartingPosition: 'TRIM_HORIZON', BisectBatchOnFunctionError: true, MaximumRetryAttempts: 10, FunctionResponseTypes: ['ReportBatchItemFailures'] });
    expect(JSON.stringify(mapping.Properties.EventSourceArn)).toContain('StoreRuns');
    const pattern = JSON.parse(mapping.Properties.FilterCriteria.Filters[0].Pattern);
    expect(pattern).toEqual({ eventName: ['INSERT', 'MODIFY'], dynamodb: { NewImage: { status: { S: ['queued', 'completed', 'failed', 'cancelled'] } } } });
    expect(JSON.stringify(mapping.Properties.DestinationConfig)).toContain('RepairFailures');
  });

  it('lets the repair write what a run’s change calls for and nothing else: the run’s items and its audit records, a message to the thread queue and a settled run’s message deleted, an ask timer', () => {
    const statements = statementsOf(template, 'repair');
    const dynamo = (table: string) =>
      statements
        .filter((s) => JSON.stringify(s.Resource).includes(`"${table}`))
        .flatMap((s) => (Array.isArray(s.Action) ? s.Action : [s.Action]))
        .filter((a) => a.startsWith('dynamodb:') && !/Stream|GetRecords|GetShardIterator/.test(a))
        .sort();
    // BatchGetItem: the audit records the run's record holds the facts of, read before those missing are written.
    expect(dynamo('StoreRuns')).toEqual(['dynamodb:BatchGetItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem']);
    expect(dynamo('StoreRunEvents')).toEqual(['dynamodb:PutItem']);
    const actions = actionsOf(template, 'repair');
    expect(actions.filter((a) => a.startsWith('states:'))).toEqual(['states:StartExecution']);
    // SendMessage to the thread queue (a queued run's message) and to its own failure queue (the event source's destination).
    const sends = statements.filter((s) => JSON.stringify(s.Action).includes('sqs:SendMessage')).map((s) => JSON.stringify(s.Resource));
    expect(sends).toHaveLength(2);
    expect(sends.some((r) => r.includes('ThreadQueue') && !r.includes('DeadLetters'))).toBe(true);
    expect(sends.some((r) => r.includes('RepairFailures'))).toBe(true);
    // DeleteMessage on the thread queue alone: a settled run's message, whose dispatcher may have died.
    const deletes = statements.filter((s) => JSON.stringify(s.Action).includes('sqs:DeleteMessage')).map((s) => JSON.stringify(s.Resource));
    expect(deletes).toHaveLength(1);
    expect(deletes[0]).toContain('ThreadQueue');
    expect(deletes[0]).not.toContain('DeadLetters');
    expect(actions.filter((a) => a.startsWith('sqs:') && !['sqs:SendMessage', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl'].includes(a))).toEqual([]);
    expect(actions.filter((a) => a.startsWith('lambda:') || a.startsWith('secretsmanager:'))).toEqual([]);
  });
});

describe('the sweep', () => {
  const { template } = defaults;

  it('runs every arrivalSweepMinutes (5 by default), told to act only on requests older than the doors’ timeout and a minute', () => {
    const [ruleId, rule] = only(template, 'AWS::Events::Rule');
    expect(rule.Properties.ScheduleExpression).toBe('rate(5 minutes)');
    expect(rule.Properties.Targets).toHaveLength(1);
    expect(rule.Properties.Targets[0]).toMatchObject({ Arn: { 'Fn::GetAtt': [functionId(template, 'sweep'), 'Arn'] }, RetryPolicy: { MaximumRetryAttempts: 0 } });
    expect(JSON.parse(rule.Properties.Targets[0].Input)).toEqual({ olderThanSeconds: 16 * 60 });
    const doorsTimeout = resources(template, 'AWS::Lambda::Function')[functionId(template, 'doors-stream')].Properties.Timeout;
    expect(JSON.parse(rule.Properties.Targets[0].Input).olderThanSeconds).toBeGreaterThan(doorsTimeout);
    const [, permission] = only(template, 'AWS::Lambda::Permission', { Principal: 'events.amazonaws.com' });
    expect(permission.Properties.SourceArn).toEqual({ 'Fn::GetAtt': [ruleId, 'Arn'] });
    expect(only(synth({ arrivalSweepMinutes: 1 }).template, 'AWS::Events::Rule')[1].Properties.ScheduleExpression).toBe('rate(1 minute)');
  });

  it('lets the sweep list the notes and the leases, read runs, give back places, reopen asks and arm their timers, fail a lapsed run, send to, release from and redeliver in the thread queue, read the identity key it seals the audit log with, delete what retention ended, and nothing else', () => {
    const statements = statementsOf(template, 'sweep');
    const actions = actionsOf(template, 'sweep');
    expect([...new Set(actions.filter((a) => a.startsWith('dynamodb:')))].sort()).toEqual(['dynamodb:BatchGetItem', 'dynamodb:BatchWriteItem', 'dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:Query', 'dynamodb:UpdateItem']);
    // Of the events table, only a lapsed run's log read and its RUN_ERROR appended, and an expired thread's events deleted.
    const eventActions = statements.filter((s) => JSON.stringify(s.Action).includes('dynamodb:') && JSON.stringify(s.Resource).includes('StoreRunEvents')).flatMap((s) => [s.Action].flat());
    expect([...new Set(eventActions)].sort()).toEqual(['dynamodb:BatchWriteItem', 'dynamodb:PutItem', 'dynamodb:Query']);
    const releases = statements.filter((s) => JSON.stringify(s.Action).includes('sqs:DeleteMessage')).map((s) => JSON.stringify(s.Resource));
    expect(releases).toHaveLength(1);
    expect(releases[0]).not.toContain('DeadLetters');
    expect(actions.filter((a) => a.startsWith('states:'))).toEqual(['states:StartExecution']);
    const sends = statements.filter((s) => JSON.stringify(s.Action).includes('sqs:SendMessage')).map((s) => JSON.stringify(s.Resource));
    expect(sends).toHaveLength(1);
    expect(sends[0]).toContain('ThreadQueue');
    expect(sends[0]).not.toContain('DeadLetters');
    // A still-queued run's message made visible again (its dispatcher died between its lease and its start): the thread queue's only.
    const redeliveries = statements.filter((s) => JSON.stringify(s.Action).includes('sqs:ChangeMessageVisibility')).map((s) => JSON.stringify(s.Resource));
    expect(redeliveries).toHaveLength(1);
    expect(redeliveries[0]).toContain('ThreadQueue');
    expect(redeliveries[0]).not.toContain('DeadLetters');
    // The audit log's seal: funduq's identity key (the link key's secret), its value only.
    const secrets = statements.filter((s) => JSON.stringify(s.Action).includes('secretsmanager:'));
    expect(secrets.map((s) => [s.Action, JSON.stringify(s.Resource)])).toEqual([['secretsmanager:GetSecretValue', expect.stringContaining('LinkKeySecret')]]);
    expect(actions.filter((a) => !/^(dynamodb|states|xray):/.test(a) && !['sqs:SendMessage', 'sqs:DeleteMessage', 'sqs:ChangeMessageVisibility', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl', 'secretsmanager:GetSecretValue'].includes(a))).toEqual([]);
  });
});

describe('the event sources', () => {
  it('keeps every queue a function reads invisible for at least six times that function’s timeout, as AWS asks of a Lambda event source', () => {
    const { template } = defaults;
    const queues = resources(template, 'AWS::SQS::Queue');
    const functions = resources(template, 'AWS::Lambda::Function');
    const read = Object.values(resources(template, 'AWS::Lambda::EventSourceMapping')).filter((m) => JSON.stringify(m.Properties.EventSourceArn).includes('Queue'));
    expect(read.length).toBeGreaterThanOrEqual(2);
    for (const mapping of read) {
      const queueId = mapping.Properties.EventSourceArn['Fn::GetAtt'][0] as string;
      const fn = functions[mapping.Properties.FunctionName.Ref as string];
      // SQS's default visibility is 30 s, Lambda's default timeout 3 s.
      const visibility = Number(queues[queueId].Properties.VisibilityTimeout ?? 30);
      expect({ queueId, visibility }).toEqual({ queueId, visibility: expect.toSatisfy((v: number) => v >= 6 * Number(fn.Properties.Timeout ?? 3)) });
    }
  });
});

describe('the stream handler', () => {
  it('reads both tables’ streams, retrying a bad record alone and parking it after three attempts', () => {
    const { template } = defaults;
    const mappings = Object.values(resources(template, 'AWS::Lambda::EventSourceMapping')).filter(
      (m) => m.Properties.FunctionName.Ref === functionId(template, 'stream-handler'),
    );
    expect(mappings.map((m) => m.Properties.EventSourceArn['Fn::GetAtt'][1])).toEqual(['StreamArn', 'StreamArn']);
    for (const mapping of mappings) {
      expect(mapping.Properties).toMatchObject({
        BisectBatchOnFunctionError: true,
        MaximumRetryAttempts: 3,
        FunctionResponseTypes: ['ReportBatchItemFailures'],
        DestinationConfig: { OnFailure: { Destination: { 'Fn::GetAtt': [expect.stringContaining('StreamHandlerFailures'), 'Arn'] } } },
      });
    }
  });
});

describe('the stream handler’s timeout', () => {
  it('outlasts one push notification tried to the last, with room to record its dead letter', () => {
    const { template } = defaults;
    const fn = resources(template, 'AWS::Lambda::Function')[functionId(template, 'stream-handler')];
    const timeoutMs = fn.Properties.Timeout * 1000;
    expect(longestSendMs(PUSH_SENDER_SETTINGS)).toBe(18_000);
    // At least a few notifications per invocation, so a batch makes progress past a slow receiver.
    expect(timeoutMs).toBeGreaterThanOrEqual(4 * (longestSendMs(PUSH_SENDER_SETTINGS) + DELIVERY_MARGIN_MS));
    expect(timeoutMs).toBeLessThanOrEqual(900_000);
  });
});

describe('the ask waiter', () => {
  const { template } = defaults;
  const definition = stateMachineDefinition(template);
  const states = definition.States as Record<string, any>;

  it('starts by asking whether the run has an expiresAt, and ends at once when it has none', () => {
    const start = states[definition.StartAt];
    expect(start.Type).toBe('Choice');
    expect(start.Choices).toEqual([{ Variable: '$.expiresAt', IsPresent: true, Next: expect.any(String) }]);
    expect(states[start.Default].Type).toBe('Succeed');
  });

  it('waits until the earliest expiresAt, then invokes the expirer with its state whole (the run id, and the context the run carries)', () => {
    const wait = states[states[definition.StartAt].Choices[0].Next];
    expect(wait).toMatchObject({ Type: 'Wait', TimestampPath: '$.expiresAt' });
    const expire = states[wait.Next];
    expect(expire).toMatchObject({ Type: 'Task', Resource: '${Ref}' });
    expect(expire).not.toHaveProperty('Parameters');
    const [, machine] = only(template, 'AWS::StepFunctions::StateMachine');
    expect(JSON.stringify(machine.Properties.DefinitionString)).toContain(functionId(template, 'ask-expirer'));
  });

  it('goes round again with what the expirer answers, so a wake-up before the expiry waits again', () => {
    const expire = states[states[states[definition.StartAt].Choices[0].Next].Next];
    expect(expire.Next).toBe(definition.StartAt);
    expect(expire.Retry).toEqual(expect.arrayContaining([expect.objectContaining({ ErrorEquals: ['States.ALL'] })]));
  });

  it('is a Standard workflow, since a wait may last days', () => {
    template.hasResourceProperties('AWS::StepFunctions::StateMachine', { StateMachineType: 'STANDARD' });
  });
});

describe('least privilege', () => {
  const { template } = defaults;

  it('lets the dispatcher arm the ask timer, and nothing else of Step Functions', () => {
    const states = actionsOf(template, 'dispatcher').filter((a) => a.startsWith('states:'));
    expect(states).toEqual(['states:StartExecution']);
  });

  it('lets the dispatcher and the doors send to the thread queue and the link’s timer queue, and the doors delete a held message, and nothing else of SQS but the dispatcher’s event source', () => {
    for (const name of ['dispatcher', 'doors', 'doors-stream']) {
      const sends = statementsOf(template, name).filter((s) => JSON.stringify(s.Action).includes('sqs:SendMessage'));
      expect(sends.map((s) => s.Action)).toEqual(['sqs:SendMessage', 'sqs:SendMessage']);
      expect(sends.map((s) => JSON.stringify(s.Resource))).toEqual([expect.stringContaining('ThreadQueue'), expect.stringContaining('LinkTimerQueue')]);
    }
    for (const name of ['doors', 'doors-stream']) {
      const statements = statementsOf(template, name).filter((s) => JSON.stringify(s.Action).includes('sqs:'));
      expect(statements.map((s) => [s.Action, JSON.stringify(s.Resource).includes('ThreadQueue')])).toEqual([
        ['sqs:SendMessage', true],
        ['sqs:SendMessage', false],
        ['sqs:DeleteMessage', true],
      ]);
    }
  });

  it('lets the doors read the admin token’s, the push seed’s and the link key’s values, and nothing else of Secrets Manager', () => {
    for (const name of ['doors', 'doors-stream']) {
      const reads = statementsOf(template, name).filter((s) => JSON.stringify(s.Action).includes('secretsmanager:'));
      expect(reads.map((s) => s.Action)).toEqual(['secretsmanager:GetSecretValue', 'secretsmanager:GetSecretValue', 'secretsmanager:GetSecretValue']);
      expect(reads.map((s) => JSON.stringify(s.Resource))).toEqual([expect.stringContaining('AdminToken'), expect.stringContaining('PushSigningSeed'), expect.stringContaining('LinkKeySecret')]);
    }
    expect(actionsOf(template, 'stream-handler').filter((a) => a.startsWith('secretsmanager:'))).toEqual(['secretsmanager:GetSecretValue']);
  });

  it('lets the doors stop a run’s execution (answer, cancel), only on that state machine’s executions; the streaming doors arm one as a run they relay settles with asks', () => {
    const stops = (door: string, found: Template) => statementsOf(found, door).filter((s) => JSON.stringify(s.Action).includes('states:StopExecution'));
    for (const door of ['doors', 'doors-stream']) {
      const statements = stops(door, template);
      expect(statements.map((s) => s.Action)).toEqual(['states:StopExecution']);
      expect(JSON.stringify(statements[0].Resource)).toContain(':execution:');
    }
    const starts = (door: string, found: Template) => statementsOf(found, door).filter((s) => JSON.stringify(s.Action).includes('states:StartExecution'));
    expect(starts('doors', template)).toEqual([]);
    expect(starts('doors-stream', template)).toHaveLength(1);
    expect(JSON.stringify(starts('doors-stream', template)[0].Resource)).toContain('AskWaiter');
    // With no run relayed at a door (relayAtDoor false), the streaming doors start nothing.
    expect(starts('doors-stream', synth({ relayAtDoor: false }).template)).toEqual([]);
  });

  it('gives the expirer and the stream handler no queue and no Step Functions', () => {
    for (const name of ['ask-expirer', 'stream-handler']) {
      const actions = actionsOf(template, name);
      expect(actions.filter((a) => a.startsWith('states:'))).toEqual([]);
      expect(actions.filter((a) => a.startsWith('sqs:') && a !== 'sqs:SendMessage' && a !== 'sqs:GetQueueAttributes' && a !== 'sqs:GetQueueUrl')).toEqual([]);
    }
    const sends = statementsOf(template, 'stream-handler').filter((s) => JSON.stringify(s.Action).includes('sqs:SendMessage'));
    // Only to its own dead-letter queue for records it gave up on.
    expect(JSON.stringify(sends.map((s) => s.Resource))).toContain('StreamHandlerFailures');
  });

  it('grants the doors and the dispatcher the store adapter’s calls on both tables and their indexes (batch reads for the audit export), and no transactions; the expirer the expiry and its audit record', () => {
    for (const name of ['doors', 'doors-stream', 'dispatcher']) {
      const dynamo = [...new Set(actionsOf(template, name).filter((a) => a.startsWith('dynamodb:')))].sort();
      expect(dynamo).toEqual(['dynamodb:BatchGetItem', 'dynamodb:BatchWriteItem', 'dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:Query', 'dynamodb:Scan', 'dynamodb:UpdateItem']);
    }
    expect([...new Set(actionsOf(template, 'ask-expirer').filter((a) => a.startsWith('dynamodb:')))].sort()).toEqual(['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem']);
  });

  it('lets the stream handler read both tables, and write only dead letters on the runs table (UpdateItem)', () => {
    const [runs] = only(template, 'AWS::DynamoDB::Table', { KeySchema: Match.arrayWith([{ AttributeName: RUNS_TABLE.sortKey, KeyType: 'RANGE' }]) });
    const [runEvents] = only(template, 'AWS::DynamoDB::Table', {
      KeySchema: Match.arrayWith([{ AttributeName: RUN_EVENTS_TABLE.sortKey, KeyType: 'RANGE' }]),
    });
    const statements = statementsOf(template, 'stream-handler');
    const on = (table: string) => (s: { Resource: unknown }) => JSON.stringify(s.Resource).includes(`"${table}"`);
    const actions = (table: string) =>
      statements.filter(on(table)).flatMap((s) => (Array.isArray(s.Action) ? s.Action : [s.Action]));
    const writes = (list: string[]) => list.filter((a) => /dynamodb:(Put|Update|Delete|BatchWrite|PartiQLInsert|PartiQLUpdate|PartiQLDelete)/.test(a));
    // The streams' own reads (the event source's) are granted on the stream ARNs, apart.
    const onTable = (list: string[]) => list.filter((a) => a.startsWith('dynamodb:') && !/Stream|GetRecords|GetShardIterator/.test(a)).sort();
    expect(onTable(actions(runs))).toEqual(['dynamodb:GetItem', 'dynamodb:Query', 'dynamodb:UpdateItem']);
    expect(onTable(actions(runEvents))).toEqual(['dynamodb:Query']);
    expect(writes(actions(runs))).toEqual(['dynamodb:UpdateItem']);
    expect(writes(actions(runEvents))).toEqual([]);
    expect(writes(actionsOf(template, 'stream-handler'))).toEqual(['dynamodb:UpdateItem']);
  });

  it('lets only the doors invoke the dispatcher (interjections beside the message group), and tells them its name', () => {
    const dispatcher = functionId(template, 'dispatcher');
    for (const name of ['doors', 'doors-stream', 'dispatcher', 'ask-expirer', 'stream-handler', 'dead-letters', 'repair', 'sweep']) {
      const invokes = statementsOf(template, name).filter((s) => JSON.stringify(s.Action).includes('lambda:InvokeFunction'));
      expect([name, invokes.length > 0]).toEqual([name, name.startsWith('doors')]);
      for (const statement of invokes) expect(JSON.stringify(statement.Resource)).toContain(dispatcher);
    }
    const told = Object.entries(resources(template, 'AWS::Lambda::Function')).filter(([, fn]) =>
      JSON.stringify(fn.Properties.Environment ?? {}).includes('FUNDUQ_DISPATCHER_FUNCTION'),
    );
    expect(told.map(([id]) => id).sort()).toEqual([functionId(template, 'doors'), functionId(template, 'doors-stream')].sort());
    for (const [, fn] of told) expect(fn.Properties.Environment.Variables.FUNDUQ_DISPATCHER_FUNCTION).toEqual({ Ref: dispatcher });
  });

  it('lets the dispatcher invoke the agent functions the agentFunctions setting names, and no others', () => {
    const { template: hosting } = synth({ agentFunctions: ['travel-agent', 'arn:aws:lambda:eu-west-1:210987654321:function:shared-agent'] });
    const invokes = statementsOf(hosting, 'dispatcher').filter((s) => JSON.stringify(s.Action).includes('lambda:InvokeFunction'));
    const inStack = (suffix: string) => ({ 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, `:lambda:eu-west-1:123456789012:function:${suffix}`]] });
    expect(invokes.map((s) => s.Resource)).toEqual([
      [
        inStack('travel-agent'),
        inStack('travel-agent:*'),
        'arn:aws:lambda:eu-west-1:210987654321:function:shared-agent',
        'arn:aws:lambda:eu-west-1:210987654321:function:shared-agent:*',
      ],
    ]);
    expect(statementsOf(template, 'dispatcher').filter((s) => JSON.stringify(s.Action).includes('lambda:InvokeFunction'))).toEqual([]);
    // The streaming doors relay runs on idle threads: the same agents, and nothing else of Lambda's but the dispatcher (interjections).
    const doorInvokes = statementsOf(hosting, 'doors-stream').filter((s) => JSON.stringify(s.Action).includes('lambda:InvokeFunction') && !JSON.stringify(s.Resource).includes('Dispatcher'));
    expect(doorInvokes.map((s) => s.Resource)).toEqual(invokes.map((s) => s.Resource));
    const { template: relayless } = synth({ agentFunctions: ['travel-agent'], relayAtDoor: false });
    expect(statementsOf(relayless, 'doors-stream').filter((s) => JSON.stringify(s.Action).includes('lambda:InvokeFunction') && !JSON.stringify(s.Resource).includes('Dispatcher'))).toEqual([]);
  });

  it('lets only the doors read the admin token', () => {
    const [adminToken] = only(template, 'AWS::SecretsManager::Secret', { Description: Match.stringLikeRegexp('admin token') });
    for (const name of ['doors', 'doors-stream', 'dispatcher', 'ask-expirer', 'stream-handler', 'dead-letters', 'repair', 'sweep']) {
      const reads = statementsOf(template, name).some((s) => JSON.stringify(s.Action).includes('secretsmanager:GetSecretValue') && JSON.stringify(s.Resource).includes(adminToken));
      expect([name, reads]).toEqual([name, name.startsWith('doors')]);
    }
  });

  it('grants no wildcard action, and a wildcard resource only where AWS has no resource-level permission', () => {
    for (const policy of Object.values(resources(template, 'AWS::IAM::Policy'))) {
      for (const statement of policy.Properties.PolicyDocument.Statement) {
        const actions: string[] = Array.isArray(statement.Action) ? statement.Action : [statement.Action];
        expect(actions.filter((a) => a.endsWith(':*') || a === '*')).toEqual([]);
        if (statement.Resource === '*') {
          for (const action of actions) expect(action).toMatch(/^(xray:|logs:|dynamodb:ListStreams$)/);
        }
      }
    }
  });
});

describe('the tenant settings', () => {
  it('reach every function that accepts runs as environment, and stay unset (no limit) by default', () => {
    const { template } = synth({ tenantRunsPerMinute: 60, tenantConcurrentRuns: 5 });
    for (const name of ['doors', 'doors-stream', 'dispatcher']) {
      const fn = resources(template, 'AWS::Lambda::Function')[functionId(template, name)];
      expect(fn.Properties.Environment.Variables).toMatchObject({
        FUNDUQ_TENANT_RUNS_PER_MINUTE: '60',
        FUNDUQ_TENANT_CONCURRENT_RUNS: '5',
      });
    }
    const plain = resources(defaults.template, 'AWS::Lambda::Function')[functionId(defaults.template, 'doors')];
    expect(plain.Properties.Environment.Variables).not.toHaveProperty('FUNDUQ_TENANT_RUNS_PER_MINUTE');
  });
});

describe('the functions', () => {
  const { template } = defaults;

  it('run Node.js 22 on arm64 without X-Ray (traces are OpenTelemetry), Powertools configured and logs kept 30 days by default', () => {
    const functions = Object.values(resources(template, 'AWS::Lambda::Function'));
    expect(functions).toHaveLength(10);
    for (const fn of functions) {
      expect(fn.Properties).toMatchObject({
        Runtime: 'nodejs22.x',
        Architectures: ['arm64'],
        Environment: { Variables: expect.objectContaining({ POWERTOOLS_SERVICE_NAME: 'funduq' }) },
      });
      expect(fn.Properties.TracingConfig).toBeUndefined();
    }
    template.allResourcesProperties('AWS::Logs::LogGroup', { RetentionInDays: 30 });
  });

  it('send every function\'s traces to the collector otlpEndpoint names, and nowhere without it', () => {
    for (const fn of Object.values(resources(template, 'AWS::Lambda::Function'))) {
      expect(fn.Properties.Environment.Variables).not.toHaveProperty('OTEL_EXPORTER_OTLP_ENDPOINT');
    }
    const traced = Object.values(resources(synth({ otlpEndpoint: 'https://collector.example:4318' }).template, 'AWS::Lambda::Function'));
    expect(traced).toHaveLength(10);
    for (const fn of traced) expect(fn.Properties.Environment.Variables.OTEL_EXPORTER_OTLP_ENDPOINT).toBe('https://collector.example:4318');
  });

  it('let every function read the secret otlpHeadersSecret names (its value only), and refuse it without a collector', () => {
    const { template: withHeaders } = synth({ otlpEndpoint: 'https://collector.example:4318', otlpHeadersSecret: 'funduq/otlp-headers' });
    const functions = Object.values(resources(withHeaders, 'AWS::Lambda::Function'));
    expect(functions).toHaveLength(10);
    for (const fn of functions) expect(fn.Properties.Environment.Variables.FUNDUQ_OTLP_HEADERS_SECRET).toBe('funduq/otlp-headers');
    const reads = Object.values(resources(withHeaders, 'AWS::IAM::Policy')).filter((policy) => JSON.stringify(policy).includes('secret:funduq/otlp-headers-??????'));
    expect(reads).toHaveLength(10);
    for (const policy of reads) {
      const statement = (policy.Properties.PolicyDocument.Statement as Array<{ Action: unknown; Resource: unknown }>).find((s) => JSON.stringify(s.Resource).includes('otlp-headers'));
      expect(statement?.Action).toBe('secretsmanager:GetSecretValue');
    }
    expect(() => synth({ otlpHeadersSecret: 'funduq/otlp-headers' })).toThrow(/set otlpEndpoint too/);
  });

  it("let every function send its traces to CloudWatch's OTLP endpoint with otlpCloudWatch, never beside a collector", () => {
    const { template: cloudWatch } = synth({ otlpCloudWatch: true });
    const functions = Object.values(resources(cloudWatch, 'AWS::Lambda::Function'));
    expect(functions).toHaveLength(10);
    for (const fn of functions) {
      expect(fn.Properties.Environment.Variables.FUNDUQ_OTLP_CLOUDWATCH).toBe('true');
      expect(fn.Properties.Environment.Variables.OTEL_EXPORTER_OTLP_ENDPOINT).toBeUndefined();
    }
    const puts = Object.values(resources(cloudWatch, 'AWS::IAM::Policy')).filter((policy) =>
      (policy.Properties.PolicyDocument.Statement as Array<{ Action: unknown; Resource: unknown }>).some((s) => s.Action === 'xray:PutTraceSegments' && s.Resource === '*'),
    );
    expect(puts).toHaveLength(10);
    expect(JSON.stringify(resources(template, 'AWS::IAM::Policy'))).not.toContain('xray:');
    expect(() => synth({ otlpCloudWatch: true, otlpEndpoint: 'https://collector.example:4318' })).toThrow(/otlpCloudWatch sends traces to CloudWatch itself/);
  });

  it('hand the core the thread queue limit from the settings (default 8)', () => {
    template.hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ FUNDUQ_FUNCTION: 'doors', [ENV.threadQueueLimit]: '8' }) },
    });
    synth({ threadQueueLimit: 3 }).template.hasResourceProperties('AWS::Lambda::Function', {
      Environment: { Variables: Match.objectLike({ FUNDUQ_FUNCTION: 'dispatcher', [ENV.threadQueueLimit]: '3' }) },
    });
  });

  it('raise an alarm on errors of each function and on the dead-letter queues', () => {
    const alarms = Object.values(resources(template, 'AWS::CloudWatch::Alarm'));
    expect(alarms.filter((a) => a.Properties.MetricName === 'Errors')).toHaveLength(10);
    const depth = alarms.filter((a) => a.Properties.MetricName === 'ApproximateNumberOfMessagesVisible');
    expect(JSON.stringify(depth)).toContain('ThreadQueueDeadLetters');
    expect(JSON.stringify(depth)).toContain('LinkTimerDeadLetters');
    expect(alarms.some((a) => a.Properties.MetricName === 'ExecutionsFailed')).toBe(true);
  });

  it('send the alarms to an email address when one is given', () => {
    const { template: custom } = synth({ alarmEmail: 'ops@example.com' });
    custom.hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'ops@example.com' });
    for (const alarm of Object.values(resources(custom, 'AWS::CloudWatch::Alarm'))) {
      expect(alarm.Properties.AlarmActions).toHaveLength(1);
    }
  });
});

describe('the provider link', () => {
  const { template } = defaults;
  const LINKED = ['doors', 'doors-stream', 'dispatcher', 'link', 'link-timer'];
  const ALL = ['doors', 'doors-stream', 'dispatcher', 'ask-expirer', 'stream-handler', 'dead-letters', 'repair', 'link', 'link-timer'];
  const onThreadQueue = (resource: unknown) => /"ThreadQueue(?!DeadLetters)/.test(JSON.stringify(resource));

  it('is a WebSocket API whose $connect, $default and $disconnect routes are one function, on an auto-deployed stage `link`', () => {
    const [apiId] = only(template, 'AWS::ApiGatewayV2::Api', { ProtocolType: 'WEBSOCKET' });
    const routes = Object.values(resources(template, 'AWS::ApiGatewayV2::Route'));
    expect(routes.map((r) => r.Properties.RouteKey).sort()).toEqual(['$connect', '$default', '$disconnect']);
    const integrations = resources(template, 'AWS::ApiGatewayV2::Integration');
    for (const route of routes) {
      expect(route.Properties.ApiId).toEqual({ Ref: apiId });
      const integration = integrations[route.Properties.Target['Fn::Join'][1][1].Ref];
      expect(integration.Properties).toMatchObject({ IntegrationType: 'AWS_PROXY' });
      expect(JSON.stringify(integration.Properties.IntegrationUri)).toContain(functionId(template, 'link'));
    }
    template.hasResourceProperties('AWS::ApiGatewayV2::Stage', { ApiId: { Ref: apiId }, StageName: 'link', AutoDeploy: true });
    // API Gateway waits 29 s for a route's integration.
    expect(resources(template, 'AWS::Lambda::Function')[functionId(template, 'link')].Properties.Timeout).toBe(29);
    const permissions = Object.values(resources(template, 'AWS::Lambda::Permission')).filter((p) => JSON.stringify(p.Properties.FunctionName).includes(functionId(template, 'link')));
    expect(permissions.every((p) => p.Properties.Principal === 'apigateway.amazonaws.com' && JSON.stringify(p.Properties.SourceArn).includes(apiId))).toBe(true);
  });

  it('derives funduq’s link key from a generated secret that only the functions taking part in the link read, each told its ARN', () => {
    const [secret] = only(template, 'AWS::SecretsManager::Secret', { Description: Match.stringLikeRegexp('link key') });
    expect(resources(template, 'AWS::SecretsManager::Secret')[secret].Properties.GenerateSecretString).toMatchObject({ PasswordLength: 56, ExcludePunctuation: true });
    const all = resources(template, 'AWS::Lambda::Function');
    for (const name of ALL) {
      const reads = statementsOf(template, name).filter((s) => JSON.stringify(s.Action).includes('secretsmanager:GetSecretValue') && JSON.stringify(s.Resource).includes(secret));
      const told = all[functionId(template, name)].Properties.Environment.Variables[ENV.linkKeySecretArn];
      const takes = LINKED.includes(name);
      expect([name, reads.length, told]).toEqual([name, takes ? 1 : 0, takes ? { Ref: secret } : undefined]);
    }
  });

  it('lets those functions post to and close the connections of this API’s stage only (execute-api:ManageConnections), and no other function', () => {
    const [apiId] = only(template, 'AWS::ApiGatewayV2::Api', { ProtocolType: 'WEBSOCKET' });
    for (const name of ALL) {
      const manage = statementsOf(template, name).filter((s) => JSON.stringify(s.Action).includes('execute-api:'));
      if (!LINKED.includes(name)) {
        expect([name, manage]).toEqual([name, []]);
        continue;
      }
      expect(manage.map((s) => s.Action)).toEqual(['execute-api:ManageConnections']);
      const arns = (manage[0].Resource as unknown[]).map((r) => JSON.stringify(r));
      expect(arns).toHaveLength(2);
      expect(arns.every((arn) => arn.includes(`{"Ref":"${apiId}"}`))).toBe(true);
      expect(arns[0]).toContain('/link/POST/@connections/*');
      expect(arns[1]).toContain('/link/DELETE/@connections/*');
    }
  });

  it('keeps its timers as delayed messages on a standard queue read by the link-timer function, which only the functions taking part in the link send to', () => {
    const [queueId, queue] = only(template, 'AWS::SQS::Queue', { RedrivePolicy: Match.objectLike({ deadLetterTargetArn: { 'Fn::GetAtt': [Match.stringLikeRegexp('LinkTimerDeadLetters'), 'Arn'] } }) });
    expect(queue.Properties.FifoQueue).toBeUndefined();
    expect(queue.Properties).toMatchObject({ VisibilityTimeout: 360, RedrivePolicy: { maxReceiveCount: 10 } });
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      EventSourceArn: { 'Fn::GetAtt': [queueId, 'Arn'] },
      FunctionName: { Ref: functionId(template, 'link-timer') },
      BatchSize: 10,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
    });
    for (const name of ALL) {
      const sends = statementsOf(template, name).filter((s) => JSON.stringify(s.Action).includes('sqs:SendMessage') && JSON.stringify(s.Resource).includes(queueId));
      expect([name, sends.length]).toEqual([name, LINKED.includes(name) ? 1 : 0]);
    }
  });

  it('lets every function that settles runs delete a link run’s held thread-queue message, and the dispatcher keep it in flight', () => {
    for (const name of ['doors', 'doors-stream', 'dispatcher', 'repair', 'dead-letters', 'link', 'link-timer']) {
      const deletes = statementsOf(template, name).filter((s) => JSON.stringify(s.Action).includes('sqs:DeleteMessage') && onThreadQueue(s.Resource));
      expect([name, deletes.length > 0]).toEqual([name, true]);
    }
    const keeps = statementsOf(template, 'dispatcher').filter((s) => JSON.stringify(s.Action).includes('sqs:ChangeMessageVisibility'));
    expect(keeps.some((s) => onThreadQueue(s.Resource))).toBe(true);
    for (const name of ['ask-expirer', 'stream-handler']) {
      expect([name, statementsOf(template, name).filter((s) => JSON.stringify(s.Action).includes('sqs:') && onThreadQueue(s.Resource))]).toEqual([name, []]);
    }
  });

  it('lets the link’s own functions settle runs as a dispatcher does: the record and arming the ask waiter', () => {
    for (const name of ['link', 'link-timer']) {
      const actions = actionsOf(template, name);
      expect(actions).toEqual(expect.arrayContaining(['dynamodb:GetItem', 'dynamodb:Query', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem', 'states:StartExecution']));
      expect(actions.filter((a) => a.startsWith('lambda:'))).toEqual([]);
    }
  });

  it('names where providers link (the stage’s wss URL) and the key’s secret in the stack outputs', () => {
    const outputs = template.toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(JSON.stringify(outputs.LinkUrl.Value)).toMatch(/^\{"Fn::Join":\["",\["wss:\/\/",.*\/link"\]\]\}$/);
    expect(outputs.LinkKeySecret).toBeDefined();
  });
});

describe('the admin token', () => {
  it('is generated by Secrets Manager when none is named, so no value is in the template', () => {
    const { template } = defaults;
    const [, secret] = only(defaults.template, 'AWS::SecretsManager::Secret', { Description: Match.stringLikeRegexp('admin token') });
    expect(secret.Properties.GenerateSecretString).toBeDefined();
    expect(secret.Properties.SecretString).toBeUndefined();
    template.hasOutput('AdminTokenSecret', Match.anyValue());
    // Where the console is: the doors' stage, /console.
    expect(JSON.stringify(template.findOutputs('ConsoleUrl').ConsoleUrl.Value)).toMatch(/console"\]\]\}$/);
  });

  it('is referenced by name when one is given, and reaches the doors as an ARN, never as a value', () => {
    const { template } = synth({ adminTokenSecretName: 'team/funduq-admin' });
    expect(Object.keys(template.findResources('AWS::SecretsManager::Secret', { Properties: { Description: Match.stringLikeRegexp('admin token') } }))).toEqual([]);
    const doors = resources(template, 'AWS::Lambda::Function')[functionId(template, 'doors')];
    expect(JSON.stringify(doors.Properties.Environment.Variables[ENV.adminTokenSecretArn])).toContain('secret:team/funduq-admin');
    expect(JSON.stringify(template.toJSON())).not.toMatch(/resolve:secretsmanager/);
  });
});

describe("the console's read-only token", () => {
  it('is none by default; with consoleReadToken=true a generated secret of its own, reaching the doors (and only them) as an ARN they may read', () => {
    expect(Object.keys(defaults.template.findResources('AWS::SecretsManager::Secret', { Properties: { Description: Match.stringLikeRegexp('read-only') } }))).toEqual([]);
    const { template } = synth({ consoleReadToken: true });
    const [id, secret] = only(template, 'AWS::SecretsManager::Secret', { Description: Match.stringLikeRegexp('read-only') });
    expect(secret.Properties.GenerateSecretString).toBeDefined();
    template.hasOutput('ConsoleReadTokenSecret', Match.anyValue());
    const all = resources(template, 'AWS::Lambda::Function');
    for (const name of ['doors', 'doors-stream', 'dispatcher', 'sweep']) {
      const variables = all[functionId(template, name)].Properties.Environment.Variables;
      expect([name, JSON.stringify(variables[ENV.consoleReadTokenSecretArn] ?? null).includes(id)]).toEqual([name, name.startsWith('doors')]);
    }
    for (const name of ['doors', 'doors-stream']) {
      const reads = statementsOf(template, name).filter((statement) => JSON.stringify(statement.Action).includes('secretsmanager:'));
      expect(JSON.stringify(reads[0].Resource)).toContain(id);
    }
  });
});

describe('the admin token, read at run time', () => {
  it('is read by the doors through the Parameters and Secrets extension, and by no other function', () => {
    const { template } = defaults;
    const all = resources(template, 'AWS::Lambda::Function');
    for (const name of ['doors', 'doors-stream', 'dispatcher', 'ask-expirer', 'stream-handler', 'dead-letters', 'repair', 'sweep']) {
      const fn = all[functionId(template, name)].Properties;
      const door = name.startsWith('doors');
      expect([name, Boolean(fn.Layers), ENV.adminTokenSecretArn in fn.Environment.Variables]).toEqual([name, door, door]);
    }
  });
});

describe('the outputs', () => {
  it('name the doors’ base URLs, the admin URL, the tables and the queue', () => {
    const outputs = Object.keys(defaults.template.toJSON().Outputs);
    expect(outputs).toEqual(
      expect.arrayContaining(['AguiUrl', 'A2aUrl', 'AdminUrl', 'RunsTableName', 'RunEventsTableName', 'ThreadQueueName', 'ApiKeyId']),
    );
  });
});

describe('the settings', () => {
  it('are read from CDK context, where values arrive as strings', () => {
    const context: Record<string, string> = { threadQueueLimit: '4', apiAuth: 'none', retainData: 'false', logRetentionDays: '7' };
    expect(settingsFromContext((key) => context[key])).toEqual({
      threadQueueLimit: 4,
      apiAuth: 'none',
      retainData: false,
      logRetentionDays: 7,
    });
  });

  it('refuse what cannot be deployed, naming the setting', () => {
    expect(() => settingsFromContext((key) => (key === 'threadQueueLimit' ? 'eight' : undefined))).toThrow(/threadQueueLimit/);
    expect(() => synth({ apiAuth: 'jwt' })).toThrow(/jwtUserPoolArn/);
    expect(() => synth({ logRetentionDays: 8 as FunduqSettings['logRetentionDays'] })).toThrow(/logRetentionDays/);
    expect(() => synth({ dispatcherConcurrency: 1 })).toThrow(/dispatcherConcurrency/);
    expect(() => synth({ domainName: 'agents.example.com' })).toThrow(/certificateArn/);
  });
});
