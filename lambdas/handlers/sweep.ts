import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SFNClient } from '@aws-sdk/client-sfn';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { Context } from 'aws-lambda';
import { auditSealFromSecret } from '../adapters/crypto/audit-seal.js';
import type { AuditSeal } from '../core/audit/seal.js';
import type { Gateway } from '../core/gateway.js';
import { ENV } from '../runtimes/environment.js';
import { awsClients, createWiring, sqsThreadQueue, stepFunctionsAskTimer, type WiringOptions } from '../runtimes/aws.js';
import { logger, metrics, publishMetrics } from '../runtimes/powertools.js';
import { flushing, tracingOf } from '../runtimes/tracing.js';

/** What the schedule hands the sweep (the rule's constant input): how old a noted request must be to be of a dead function. */
export interface SweepEvent {
  olderThanSeconds: number;
}

/**
 * The sweep of requests that died before recording their run, on a schedule (`sweepArrivals`):
 * a request noted longer ago than the doors' function may run is of a function that died, and
 * gives back what it took (its places, the asks it closed); a run whose dispatcher's lease lapsed
 * is failed `dispatch_lost` and its thread's message let go. Safe twice, and beside the live flow.
 */
export function createSweep(options: Omit<WiringOptions, 'providers'>) {
  const { gateway } = createWiring(options, { queue: sqsThreadQueue, timer: stepFunctionsAskTimer });
  const seal = auditSealOf(options);
  let lastPass = Number.NEGATIVE_INFINITY;
  return async (event: SweepEvent, context?: Context): Promise<void> => {
    if (context) logger.addContext(context);
    try {
      // First: a failure of the rest leaves the records of the last minutes sealed all the same.
      await sealAuditLog(gateway, seal);
      const sweep = await gateway.sweepArrivals(event.olderThanSeconds * 1000);
      if (sweep.givenBack + sweep.handedOver > 0) logger.warn('requests whose door died were given back or handed over', { ...sweep });
      metrics.addMetric('ArrivalsGivenBack', MetricUnit.Count, sweep.givenBack);
      // A dispatcher whose lease lapsed died mid-run: its run fails now, and its thread moves on.
      const lapsed = await gateway.failLapsed();
      if (lapsed.failed + lapsed.released + lapsed.redelivered > 0) logger.warn('runs whose dispatcher was lost were failed dispatch_lost, or delivered again while still queued', { ...lapsed });
      metrics.addMetric('RunsFailedDispatchLost', MetricUnit.Count, lapsed.failed);
      // Retention's pass, once an hour per environment (at its first sweep, then each hour after).
      const now = gateway.audit.now();
      if (now - lastPass >= RETENTION_PASS_MS) {
        lastPass = now;
        await deleteExpired(gateway);
      }
    } finally {
      publishMetrics();
    }
  };
}

/**
 * The audit log's seal, with funduq's identity key (derived from the link key's secret, as the
 * link's is): read on the first sweep, and again after a failed read. Undefined where the stack
 * names no key (nothing is sealed: records are written and exported as pending).
 */
function auditSealOf(options: Omit<WiringOptions, 'providers'>): (() => Promise<AuditSeal>) | undefined {
  const secretArn = options.env[ENV.linkKeySecretArn];
  const client = options.clients.secretsManager;
  if (!secretArn || !client) return undefined;
  let read: Promise<AuditSeal> | undefined;
  return () =>
    (read ??= client.send(new GetSecretValueCommand({ SecretId: secretArn })).then(({ SecretString }) => {
      if (!SecretString) throw new Error(`the link key secret ${secretArn} holds no string`);
      return auditSealFromSecret(SecretString);
    })).catch((error: unknown) => {
      read = undefined;
      throw error;
    });
}

/** Seals what the log holds unsealed; a failure is logged, and the next sweep seals it (records wait, pending, meanwhile). */
async function sealAuditLog(gateway: Gateway, seal: (() => Promise<AuditSeal>) | undefined): Promise<void> {
  if (!seal) return;
  try {
    const sealed = await gateway.audit.seal(await seal());
    metrics.addMetric('AuditRecordsSealed', MetricUnit.Count, sealed);
  } catch (error) {
    logger.error('the audit log could not be sealed this time; its records stay pending until the next sweep seals them', { code: 'audit_seal_failed', error: error as Error });
  }
}

/** How often an environment of the sweep runs retention's pass: what retention ended is deleted within the hour (reads stop showing it at once). */
const RETENTION_PASS_MS = 3_600_000;

/** Deletes what retention ended; a failure is logged, and the next pass deletes it (reads hide it meanwhile). */
async function deleteExpired(gateway: Gateway): Promise<void> {
  try {
    const deleted = await gateway.retention.apply();
    if (deleted.threads + deleted.usageRecords + deleted.auditRecords > 0) logger.info('retention deleted what it ended', { ...deleted });
    metrics.addMetric('RetentionThreadsDeleted', MetricUnit.Count, deleted.threads);
  } catch (error) {
    logger.error('retention could not delete what it ended this time; reads hide it, and the next pass deletes it', { code: 'retention_pass_failed', error: error as Error });
  }
}

let sweep: ReturnType<typeof createSweep> | undefined;

/** It reads and writes the record, arms ask timers again (asks opened again) and sends to the thread queue (an interjection never handed over). */
const tracing = tracingOf(process.env);

export const handler = flushing(tracing, (event: SweepEvent, context: Context) =>
  (sweep ??= createSweep({ env: process.env, clients: awsClients(process.env, { dynamodb: DynamoDBClient, sqs: SQSClient, sfn: SFNClient, secretsManager: SecretsManagerClient }), tracing }))(event, context),
);
