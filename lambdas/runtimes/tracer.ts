import { Tracer } from '@aws-lambda-powertools/tracer';

/**
 * X-Ray subsegments for the AWS calls of the functions that answer callers (the doors) and deliver
 * pushes (the stream handler). The dispatcher and the ask expirer go without: the X-Ray SDK is the
 * largest module of a bundle, and a cold start imports it whole (issue 15 measured it).
 */
export const tracer = new Tracer({ serviceName: 'funduq' });

/** The same clients, each call traced. */
export function traced<T extends object>(clients: T): T {
  return Object.fromEntries(Object.entries(clients).map(([name, client]) => [name, tracer.captureAWSv3Client(client)])) as T;
}
