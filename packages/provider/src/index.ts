/**
 * `@funduq/provider`: put agents behind funduq without opening a port. `connect` links this process
 * to funduq and serves `@ag-ui/client` agents on the link; the wire's frames are exported as zod
 * schemas, for a provider written without the SDK.
 */
export { connect, LinkRefused, type ConnectOptions, type LinkedAgent, type OfferedRun, type ProviderLink } from './connect.js';
export { generateKeyPair, type LinkKeyPair } from './ed25519.js';
export * from './wire.js';
