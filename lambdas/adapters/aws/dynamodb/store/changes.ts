import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { AttributeValue as StreamAttributeValue } from 'aws-lambda';
import type { Run } from '../../../../core/model.js';
import { RUN_EVENTS_TABLE } from '../tables.js';
import { domain } from './keys.js';

/**
 * The tables' stream records as the record's changes: the decoding of an item's image is the
 * store's, with the store's own list of the attributes that are keys and not the run's, so the
 * stream handler and the repair read a change as the store reads the item.
 */
export type StreamImage = { [name: string]: StreamAttributeValue };

/**
 * The run in a runs-table image, or undefined for the table's other items (threads, agents, push
 * configs, message claims: they have no status) and for removals (no image).
 */
export function runOfImage(image: StreamImage | undefined): Run | undefined {
  if (!image || runIdOfImage(image) === undefined) return undefined;
  // As the store reads them: caller JSON may hold numbers past 2^53, which stay (imprecise) numbers.
  const item = unmarshall(image as Record<string, AttributeValue>, { wrapNumbers: (value: string) => Number(value) });
  return domain<Run>(item);
}

/** The id of the run a runs-table image is of, without decoding the rest of it; undefined for the table's other items. */
export function runIdOfImage(image: StreamImage | undefined): string | undefined {
  return image?.status?.S !== undefined && image.rootRunId?.S !== undefined ? image.runId?.S : undefined;
}

/** The event a run_events record's keys name. */
export function eventOfKeys(keys: StreamImage | undefined): { runId: string; seq: number } | undefined {
  const runId = keys?.[RUN_EVENTS_TABLE.partitionKey]?.S;
  const seq = Number(keys?.[RUN_EVENTS_TABLE.sortKey]?.N);
  return runId === undefined || !Number.isInteger(seq) ? undefined : { runId, seq };
}
