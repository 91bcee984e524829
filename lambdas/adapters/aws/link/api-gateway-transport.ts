import { ApiGatewayManagementApiClient, DeleteConnectionCommand, PostToConnectionCommand } from '@aws-sdk/client-apigatewaymanagementapi';

/**
 * The provider link's messages over an API Gateway WebSocket API: `@connections` PostToConnection
 * to send, DeleteConnection to close. A connection that is gone answers GoneException (410).
 * It is the link door's transport on AWS, as the gateway's own WebSockets are on one machine.
 */
export class ApiGatewayLinkTransport {
  constructor(private readonly client: ApiGatewayManagementApiClient) {}

  async send(connectionId: string, text: string): Promise<boolean> {
    try {
      await this.client.send(new PostToConnectionCommand({ ConnectionId: connectionId, Data: new TextEncoder().encode(text) }));
      return true;
    } catch (error) {
      if (isGone(error)) return false;
      throw error;
    }
  }

  /**
   * API Gateway closes a connection with no reason of its own (close code 1000 or 1006), so the
   * reason goes first as an `error` frame the provider's SDK reports.
   */
  async close(connectionId: string, reason: string): Promise<void> {
    if (!(await this.send(connectionId, JSON.stringify({ v: 1, type: 'error', code: 'link_closed', message: reason })))) return;
    try {
      await this.client.send(new DeleteConnectionCommand({ ConnectionId: connectionId }));
    } catch (error) {
      if (!isGone(error)) throw error;
    }
  }
}

function isGone(error: unknown): boolean {
  return (error as { name?: string }).name === 'GoneException';
}
