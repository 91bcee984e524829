import type { LinkedProvider } from '../core/ports.js';
import { providerKind } from './definition.js';

/**
 * The `link` kind: an agent whose provider dials out to funduq over a WebSocket (no URL, no open
 * port) and is offered its runs there (`core/link`). Its definition has no fields of its own: a
 * provider registering the agent on its link makes it (or an admin does, to set its limits first).
 */
export const linkKind = providerKind({
  kind: 'link',
  fields: {},
  spec: () => ({ kind: 'link' }),
  adminView: () => ({}),
  create: (): LinkedProvider => ({ linked: true }),
});
