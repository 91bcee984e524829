import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import { SignatureV4 } from '@smithy/signature-v4';
import type { AwsCredentialIdentity, Checksum, Provider, SourceData } from '@smithy/types';
import type { ExportSigner } from '../otel/otlp-json.js';

/** SHA-256 (or its HMAC, given a key) as the signer asks for it, on Node's crypto. */
class Sha256 implements Checksum {
  private hash: Hash | Hmac;

  constructor(private readonly key?: SourceData) {
    this.hash = this.fresh();
  }

  update(data: Uint8Array): void {
    this.hash.update(data);
  }

  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.hash.digest());
  }

  reset(): void {
    this.hash = this.fresh();
  }

  private fresh(): Hash | Hmac {
    if (this.key === undefined) return createHash('sha256');
    return createHmac('sha256', typeof this.key === 'string' ? this.key : Buffer.from(this.key instanceof ArrayBuffer ? new Uint8Array(this.key) : new Uint8Array(this.key.buffer, this.key.byteOffset, this.key.byteLength)));
  }
}

/**
 * Signs an export with SigV4 for `service` in `region`, with the credentials the AWS SDK would use
 * (a function's role on Lambda; the environment or a profile on one machine), the payload's hash
 * included.
 */
export function sigv4Signer(options: { service: string; region: string; credentials?: AwsCredentialIdentity | Provider<AwsCredentialIdentity> }): ExportSigner {
  let signer: SignatureV4 | undefined;
  return async ({ url, headers, body }) => {
    signer ??= new SignatureV4({
      service: options.service,
      region: options.region,
      credentials: options.credentials ?? (await import('@aws-sdk/credential-provider-node')).defaultProvider(),
      sha256: Sha256,
      applyChecksum: true,
    });
    const signed = await signer.sign({
      method: 'POST',
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port ? { port: Number(url.port) } : {}),
      path: url.pathname,
      query: {},
      headers: { ...headers, host: url.host },
      body,
    });
    // fetch sets the host itself, from the URL the signature was computed for.
    const { host: _host, ...rest } = signed.headers;
    return rest;
  };
}
