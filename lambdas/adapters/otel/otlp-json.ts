import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import type { ISerializer } from '@opentelemetry/otlp-transformer';

/** One export, as it will be sent: what a signer signs. */
export interface ExportRequest {
  url: URL;
  headers: Record<string, string>;
  body: Uint8Array;
}

/** The headers that authenticate one export, computed over its whole body (SigV4 signs the payload's hash, so no header-only hook will do). */
export type ExportSigner = (request: ExportRequest) => Promise<Record<string, string>>;

/** How an export is let in: headers (a collector's key; a function is asked at each export) or a signature. */
export type ExportAuth = { headers?: Record<string, string> | (() => Promise<Record<string, string>>); sign?: undefined } | { sign: ExportSigner; headers?: undefined };

/** An export the receiver refused or that could not be sent: its batch is dropped, as the stock exporters drop it. */
export class OtlpExportFailed extends Error {
  readonly code = 'otlp_export_failed';
}

const EXPORT_TIMEOUT_MS = 10_000;

/**
 * OTLP/HTTP JSON export of one signal (spans, metrics), each request authenticated by headers or
 * signed (CloudWatch's OTLP endpoint takes SigV4 only). The processor or reader in front of it
 * batches; a flush waits for every export on its way. A failure is told to `onFailure` with its
 * code and ends the export as failed, never as a throw.
 */
export class OtlpJsonExporter<Items> {
  private readonly sending = new Set<Promise<void>>();

  constructor(
    private readonly url: string,
    private readonly serializer: ISerializer<Items, unknown>,
    private readonly auth: ExportAuth,
    private readonly onFailure: (failure: OtlpExportFailed) => void,
  ) {}

  export(items: Items, done: (result: ExportResult) => void): void {
    const sent = this.send(items).then(
      () => done({ code: ExportResultCode.SUCCESS }),
      (error: unknown) => {
        // A failure with a code of its own (headers from a secret that could not be read) was told where it happened.
        if (!(error instanceof OtlpExportFailed) && typeof (error as { code?: unknown }).code === 'string') return done({ code: ExportResultCode.FAILED, error: error as Error });
        const failure = error instanceof OtlpExportFailed ? error : new OtlpExportFailed(`an export could not be sent to ${this.url} (${(error as Error).message}): check that the receiver is up and takes OTLP/HTTP at that URL`);
        this.onFailure(failure);
        done({ code: ExportResultCode.FAILED, error: failure });
      },
    );
    this.sending.add(sent);
    void sent.finally(() => this.sending.delete(sent));
  }

  async forceFlush(): Promise<void> {
    await Promise.all(this.sending);
  }

  shutdown(): Promise<void> {
    return this.forceFlush();
  }

  /** The signature's headers; a signer without credentials says what to give it, not that the receiver is down. */
  private async signed(request: ExportRequest): Promise<Record<string, string>> {
    try {
      return await (this.auth.sign as ExportSigner)(request);
    } catch (error) {
      throw new OtlpExportFailed(`an export to ${request.url.host} could not be signed (${(error as Error).message}): give funduq AWS credentials (a function's role; on one machine the environment or a profile)`);
    }
  }

  private async send(items: Items): Promise<void> {
    const body = this.serializer.serializeRequest(items);
    if (!body) return;
    const url = new URL(this.url);
    const headers = { 'content-type': 'application/json' };
    const given = this.auth.sign ? await this.signed({ url, headers, body }) : typeof this.auth.headers === 'function' ? await this.auth.headers() : (this.auth.headers ?? {});
    const response = await fetch(url, { method: 'POST', headers: { ...given, ...headers }, body: body as Uint8Array<ArrayBuffer>, signal: AbortSignal.timeout(EXPORT_TIMEOUT_MS) });
    const text = await response.text();
    if (!response.ok) {
      const check = this.auth.sign
        ? "check the functions' permission (xray:PutTraceSegments) and that CloudWatch Transaction Search is on in this account and region"
        : 'check the URL and the headers the receiver asks for';
      throw new OtlpExportFailed(`${url.host} refused an export with HTTP ${response.status} (${text.slice(0, 200)}): ${check}`);
    }
  }
}
