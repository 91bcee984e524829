import { ApiGatewayManagementApiClient, DeleteConnectionCommand, GoneException, PostToConnectionCommand } from '@aws-sdk/client-apigatewaymanagementapi';
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiGatewayLinkTransport } from '../../../lambdas/adapters/aws/link/api-gateway-transport.js';
import { linkTimerMessageSchema, SqsLinkTimer } from '../../../lambdas/adapters/aws/link/sqs-timer.js';

const connections = mockClient(ApiGatewayManagementApiClient);
const sqs = mockClient(SQSClient);
const QUEUE_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/funduq-link-timer';

afterEach(() => {
  connections.reset();
  sqs.reset();
});

const gone = () => new GoneException({ message: 'gone', $metadata: { httpStatusCode: 410 } });

describe('the link over API Gateway’s @connections', () => {
  const transport = () => new ApiGatewayLinkTransport(new ApiGatewayManagementApiClient({ region: 'eu-west-1', endpoint: 'https://abc.execute-api.eu-west-1.amazonaws.com/link' }));

  it('posts a message to its connection, and tells a connection that is gone (GoneException) by false', async () => {
    connections.on(PostToConnectionCommand).resolvesOnce({}).rejects(gone());
    expect(await transport().send('c1', '{"v":1}')).toBe(true);
    expect(await transport().send('c1', '{"v":1}')).toBe(false);
    const [first] = connections.commandCalls(PostToConnectionCommand);
    expect(first.args[0].input.ConnectionId).toBe('c1');
    expect(new TextDecoder().decode(first.args[0].input.Data as Uint8Array)).toBe('{"v":1}');
  });

  it('closes a connection with its reason sent first as an error frame (API Gateway closes with none), and a gone one quietly', async () => {
    connections.on(PostToConnectionCommand).resolves({});
    connections.on(DeleteConnectionCommand).rejects(gone());
    await transport().close('c1', 'replaced by a newer link of this provider');
    const [post] = connections.commandCalls(PostToConnectionCommand);
    expect(JSON.parse(new TextDecoder().decode(post.args[0].input.Data as Uint8Array))).toEqual({ v: 1, type: 'error', code: 'link_closed', message: 'replaced by a newer link of this provider' });
    expect(connections.commandCalls(DeleteConnectionCommand)).toHaveLength(1);
  });
});

describe('the link timer on SQS', () => {
  it('sends a job delayed by its wait, at most SQS’s 15 minutes, and hops again with what is left until it is due', async () => {
    sqs.on(SendMessageCommand).resolves({ MessageId: 'm' });
    let now = 1_000_000;
    const timer = new SqsLinkTimer({ client: new SQSClient({ region: 'eu-west-1' }), queueUrl: QUEUE_URL, now: () => now });
    await timer.schedule({ kind: 'offer', runId: 'r1', offer: 1 }, 5_000);
    await timer.schedule({ kind: 'deadline', runId: 'r1' }, 3600_000);
    const sent = sqs.commandCalls(SendMessageCommand).map((call) => call.args[0].input);
    expect(sent.map((input) => input.DelaySeconds)).toEqual([5, 900]);
    const long = linkTimerMessageSchema.parse(JSON.parse(sent[1].MessageBody!));
    expect(long).toEqual({ job: { kind: 'deadline', runId: 'r1' }, due: 1_000_000 + 3600_000 });
    now += 900_000;
    expect(await timer.hop(long)).toBe(true);
    expect(sqs.commandCalls(SendMessageCommand).at(-1)!.args[0].input.DelaySeconds).toBe(900);
    now = long.due - 400;
    expect(await timer.hop(long)).toBe(false);
    expect(sqs.commandCalls(SendMessageCommand)).toHaveLength(3);
  });
});
