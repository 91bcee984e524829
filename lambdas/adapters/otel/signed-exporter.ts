import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { JsonTraceSerializer } from '@opentelemetry/otlp-transformer';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';

/** One export, as it will be sent: what a signer signs. */
export interface ExportRequest {
  url: URL;
  headers: Record<string, string>;
  body: Uint8Array;
}

/** The headers that authenticate one export, computed over its whole body (SigV4 signs the payload's hash, so no header-only hook will do). */
export type ExportSigner = (request: ExportRequest) => Promise<Record<string, string>>;

/** An export the receiver refused or could not be sent: its spans are dropped, as the stock exporter drops them. */
export class OtlpExportFailed extends Error {
  readonly code = 'otlp_export_failed';
}

const EXPORT_TIMEOUT_MS = 10_000;

/**
 * OTLP/HTTP JSON export of spans with each request signed (CloudWatch's OTLP endpoint takes SigV4
 * only). The batch processor in front of it does the batching; a flush waits for every export
 * on its way.
 */
export class SignedSpanExporter implements SpanExporter {
  private readonly sending = new Set<Promise<void>>();

  constructor(
    private readonly url: string,
    private readonly sign: ExportSigner,
    private readonly onFailure: (failure: OtlpExportFailed) => void,
  ) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    const sent = this.send(spans).then(
      () => done({ code: ExportResultCode.SUCCESS }),
      (error: unknown) => {
        const failure = error instanceof OtlpExportFailed ? error : new OtlpExportFailed(`spans could not be sent to ${this.url} (${(error as Error).message})`);
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

  private async send(spans: ReadableSpan[]): Promise<void> {
    const body = JsonTraceSerializer.serializeRequest(spans);
    if (!body) return;
    const url = new URL(this.url);
    const headers = { 'content-type': 'application/json' };
    const signed = await this.sign({ url, headers, body });
    const response = await fetch(url, { method: 'POST', headers: { ...headers, ...signed }, body: body as Uint8Array<ArrayBuffer>, signal: AbortSignal.timeout(EXPORT_TIMEOUT_MS) });
    const text = await response.text();
    if (!response.ok) {
      throw new OtlpExportFailed(`${url.host} refused ${spans.length} spans with HTTP ${response.status} (${text.slice(0, 200)}): check the functions' permission (xray:PutTraceSegments) and that CloudWatch Transaction Search is on in this account and region`);
    }
  }
}
