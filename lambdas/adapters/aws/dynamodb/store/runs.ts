import { QueryCommand, ScanCommand, type ScanCommandInput } from '@aws-sdk/lib-dynamodb';
import { threadKey, type Run, type RunLink, type RunStatus, type ThreadRef } from '../../../../core/model.js';
import type { AskChanges, RunRecords } from '../../../../core/ports.js';
import { checkRunPatch } from '../../../../core/record/rules.js';
import { RUNS_TABLE } from '../tables.js';
import type { DynamoHandle } from './handle.js';
import { domain, fitsKey, RUN_ITEM, runKey, type Item } from './keys.js';
import type { DynamoAuditLog } from './audit.js';
import type { DynamoTaskIndex } from './tasks.js';

/**
 * Runs: an item each (`run#<runId>`), with its asks and its input, in `byThread` by arrival and,
 * for a root, in `byTenant` by creation. A status change, a closing or an opening of asks, a link
 * moved: each one conditional write, the rules' (`core/record/rules.ts`) in DynamoDB's conditions.
 * Each write of a run writes its task's index entry right after (`DynamoTaskIndex.write`), and the
 * audit records it implies (`RecordProjections.auditOf`).
 */
export class DynamoRunRecords implements RunRecords {
  constructor(
    private readonly handle: DynamoHandle,
    private readonly tasks: DynamoTaskIndex,
    private readonly audit: DynamoAuditLog,
  ) {}

  async create(run: Run): Promise<boolean> {
    const created = await this.handle.putNew({
      ...runKey(run.runId),
      ...run,
      [RUNS_TABLE.byThread.partitionKey]: threadKey(run),
      // Only roots are A2A tasks; answers stay out of the tenant index, which pages tasks.
      ...(run.runId === run.rootRunId ? { [RUNS_TABLE.byTenant.partitionKey]: run.tenant } : {}),
    });
    // The task entry and the audit record at once: the run's admission waits for one round trip, not two.
    if (created) await Promise.all([this.tasks.write(run), this.audited(run, 'created')]);
    return created;
  }

  async get(runId: string): Promise<Run | undefined> {
    const item = await this.handle.get(runKey(runId));
    return item && domain<Run>(item);
  }

  async getOf(tenant: string, runId: string): Promise<Run | undefined> {
    const key = runKey(runId);
    if (!fitsKey(key)) return undefined;
    this.handle.sent.readRequests++;
    // A GetItem would hand over another tenant's run to be looked at here; the filter leaves it in the table.
    const result = await this.handle.doc.send(
      new QueryCommand({
        TableName: this.handle.tables.runs,
        KeyConditionExpression: 'pk = :pk AND sk = :sk',
        FilterExpression: '#tenant = :tenant',
        ExpressionAttributeNames: { '#tenant': 'tenant' },
        ExpressionAttributeValues: { ':pk': key.pk, ':sk': key.sk, ':tenant': tenant },
        ConsistentRead: true,
      }),
    );
    const item = result.Items?.[0];
    return item && domain<Run>(item);
  }

  async listOfThread(thread: ThreadRef): Promise<Run[]> {
    const { indexName, partitionKey } = RUNS_TABLE.byThread;
    const items = await this.handle.queryAll({
      TableName: this.handle.tables.runs,
      IndexName: indexName,
      KeyConditionExpression: '#thread = :thread',
      ExpressionAttributeNames: { '#thread': partitionKey },
      ExpressionAttributeValues: { ':thread': threadKey(thread) },
      ScanIndexForward: true,
    });
    return items.map((item) => domain<Run>(item));
  }

  async listByStatus(status: RunStatus): Promise<Run[]> {
    const input: ScanCommandInput = {
      TableName: this.handle.tables.runs,
      FilterExpression: '#sk = :run AND #status = :status',
      ExpressionAttributeNames: { '#sk': RUNS_TABLE.sortKey, '#status': 'status' },
      ExpressionAttributeValues: { ':run': RUN_ITEM, ':status': status },
    };
    const runs: Run[] = [];
    let start: Item | undefined;
    do {
      this.handle.sent.readRequests++;
      const page = await this.handle.doc.send(new ScanCommand({ ...input, ExclusiveStartKey: start }));
      for (const item of page.Items ?? []) runs.push(domain<Run>(item));
      start = page.LastEvaluatedKey;
    } while (start);
    return runs;
  }

  async pageByStatus(status: RunStatus, page: { limit: number; cursor?: string }): Promise<{ runs: Run[]; cursor?: string }> {
    this.handle.sent.readRequests++;
    // Scan's Limit counts the items read, not those the filter keeps: a page may hold fewer runs than asked, even none, and go on.
    const found = await this.handle.doc.send(
      new ScanCommand({
        TableName: this.handle.tables.runs,
        FilterExpression: '#sk = :run AND #status = :status',
        ExpressionAttributeNames: { '#sk': RUNS_TABLE.sortKey, '#status': 'status' },
        ExpressionAttributeValues: { ':run': RUN_ITEM, ':status': status },
        Limit: page.limit,
        ExclusiveStartKey: page.cursor === undefined ? undefined : (JSON.parse(page.cursor) as Item),
      }),
    );
    const runs = (found.Items ?? []).map((item) => domain<Run>(item));
    return found.LastEvaluatedKey ? { runs, cursor: JSON.stringify(found.LastEvaluatedKey) } : { runs };
  }

  async transition(runId: string, from: readonly RunStatus[], patch: Partial<Run> & { status: RunStatus }): Promise<Run | undefined> {
    if (from.length === 0) return undefined;
    checkRunPatch(patch);
    const names: Record<string, string> = { '#status': 'status' };
    const values: Item = {};
    const sets: string[] = [];
    for (const [key, value] of Object.entries(patch)) {
      if (value === undefined) continue;
      const i = sets.length;
      names[`#p${i}`] = key;
      values[`:p${i}`] = value;
      sets.push(`#p${i} = :p${i}`);
    }
    const allowed = from.map((status, i) => {
      values[`:f${i}`] = status;
      return `:f${i}`;
    });
    const item = await this.handle.update({
      Key: runKey(runId),
      UpdateExpression: `SET ${sets.join(', ')}`,
      // A missing run has no status, so the condition also keeps an update from creating one.
      ConditionExpression: `#status IN (${allowed.join(', ')})`,
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
      ReturnValues: 'ALL_NEW',
    });
    if (!item) return undefined;
    const run = this.handle.written(domain<Run>(item), item);
    await Promise.all([this.indexed(run), this.audited(run, patch)]);
    return run;
  }

  async closeAsks(runId: string, changes: AskChanges): Promise<Run | undefined> {
    const entries = Object.entries(changes);
    if (entries.length === 0) return this.get(runId);
    const names: Record<string, string> = { '#asks': 'asks', '#state': 'state' };
    const values: Item = { ':open': 'open' };
    const sets: string[] = [];
    const conditions: string[] = [];
    entries.forEach(([askId, change], i) => {
      // Ask ids come from agents: any string, so always a name placeholder.
      names[`#a${i}`] = askId;
      values[`:s${i}`] = change.state;
      sets.push(`#asks.#a${i}.#state = :s${i}`);
      conditions.push(`#asks.#a${i}.#state = :open`);
      if (change.closedByRunId !== undefined) {
        names['#closedBy'] = 'closedByRunId';
        values[`:c${i}`] = change.closedByRunId;
        sets.push(`#asks.#a${i}.#closedBy = :c${i}`);
      }
    });
    const item = await this.handle.update({
      Key: runKey(runId),
      UpdateExpression: `SET ${sets.join(', ')}`,
      ConditionExpression: conditions.join(' AND '),
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
      ReturnValues: 'ALL_NEW',
    });
    return item && this.indexed(this.handle.written(domain<Run>(item), item));
  }

  async forgetClosingEvents(runId: string): Promise<void> {
    await this.handle.update({
      Key: runKey(runId),
      UpdateExpression: 'REMOVE #closing',
      ConditionExpression: 'attribute_exists(#closing)',
      ExpressionAttributeNames: { '#closing': 'closingEvents' },
    });
  }

  async reopenAsks(runId: string, changes: AskChanges): Promise<Run | undefined> {
    const entries = Object.entries(changes);
    if (entries.length === 0) return this.get(runId);
    const names: Record<string, string> = { '#asks': 'asks', '#state': 'state', '#closedBy': 'closedByRunId', '#reopened': 'asksReopened' };
    const values: Item = { ':open': 'open', ':one': 1 };
    const sets: string[] = [];
    const removes: string[] = [];
    const conditions: string[] = [];
    entries.forEach(([askId, change], i) => {
      names[`#a${i}`] = askId;
      values[`:c${i}`] = change.closedByRunId ?? '';
      sets.push(`#asks.#a${i}.#state = :open`);
      removes.push(`#asks.#a${i}.#closedBy`);
      conditions.push(`#asks.#a${i}.#closedBy = :c${i}`);
    });
    const item = await this.handle.update({
      Key: runKey(runId),
      UpdateExpression: `SET ${sets.join(', ')} REMOVE ${removes.join(', ')} ADD #reopened :one`,
      ConditionExpression: conditions.join(' AND '),
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
      ReturnValues: 'ALL_NEW',
    });
    return item && this.indexed(this.handle.written(domain<Run>(item), item));
  }

  async updateLink(runId: string, expectedRev: number | undefined, link: RunLink): Promise<Run | undefined> {
    const item = await this.handle.update({
      Key: runKey(runId),
      UpdateExpression: 'SET #link = :link',
      ConditionExpression:
        expectedRev === undefined
          ? '#status IN (:running, :cancelling) AND attribute_not_exists(#link)'
          : '#status IN (:running, :cancelling) AND #link.#rev = :rev',
      ExpressionAttributeNames: { '#status': 'status', '#link': 'link', ...(expectedRev === undefined ? {} : { '#rev': 'rev' }) },
      ExpressionAttributeValues: { ':running': 'running', ':cancelling': 'cancelling', ':link': link, ...(expectedRev === undefined ? {} : { ':rev': expectedRev }) },
      ReturnValues: 'ALL_NEW',
    });
    return item && this.handle.written(domain<Run>(item), item);
  }

  private async indexed(run: Run): Promise<Run> {
    await this.tasks.write(run);
    return run;
  }

  /**
   * The audit records the write implies, right after it. There is no transaction here: one not
   * written (the table refused it, the function died) is written again by the repair of the run's
   * change, so its failure does not fail the write it records, which stands.
   */
  private async audited(run: Run, change: 'created' | Partial<Run>): Promise<void> {
    for (const record of this.handle.projections.auditOf?.(run, change) ?? []) await this.audit.append(record).catch(() => undefined);
  }
}
