import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { createTracing, NO_TRACING, type Tracing } from '../../lambdas/adapters/otel/tracing.js';
import { flushing, tracingOf } from '../../lambdas/runtimes/tracing.js';

describe('a traced Lambda handler', () => {
  it('returns only once its spans are flushed, whether it answered or threw', async () => {
    const order: string[] = [];
    const tracing: Tracing = {
      ...createTracing({ serviceName: 'funduq', exporter: new InMemorySpanExporter() }),
      flush: async () => {
        await new Promise((resolve) => setImmediate(resolve));
        order.push('flushed');
      },
    };
    const answered = flushing(tracing, async (n: number) => {
      order.push('handled');
      return n + 1;
    });
    expect(await answered(1)).toBe(2);
    order.push('returned');
    const threw = flushing(tracing, async () => {
      throw new Error('boom');
    });
    await expect(threw()).rejects.toThrow('boom');
    order.push('returned');
    expect(order).toEqual(['handled', 'flushed', 'returned', 'flushed', 'returned']);
  });

  it('has nothing to flush in a function whose environment names no endpoint', () => {
    expect(tracingOf({})).toBe(NO_TRACING);
    expect(tracingOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }).enabled).toBe(true);
  });
});
