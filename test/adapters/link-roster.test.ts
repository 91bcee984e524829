import { describe, expect, it } from 'vitest';
import { DynamoLinkRoster } from '../../lambdas/adapters/aws/link/roster.js';
import { InProcessLinkRoster } from '../../lambdas/adapters/local/link/roster.js';
import type { LinkRoster } from '../../lambdas/core/ports.js';
import { useDynalite } from '../support/dynalite.js';

const dynamo = useDynalite();
let now = 1_800_000_000_000;

/** One machine's roster in memory, and the AWS one in the runs table (functions share no memory). */
const rosters: Array<[string, () => Promise<LinkRoster>]> = [
  ['in memory', async () => new InProcessLinkRoster()],
  ['on DynamoDB', async () => new DynamoLinkRoster({ client: dynamo.client, table: (await dynamo.freshTables()).runs, now: () => now })],
];

describe.each(rosters)('the link roster %s', (_, make) => {
  it('keeps one link per provider: a newer one replaces the older, whose own leave then finds nothing', async () => {
    const roster = await make();
    expect(await roster.join({ connectionId: 'c1', providerId: 'p1', agents: [] })).toBeUndefined();
    await roster.serve('c1', ['a']);
    const replaced = await roster.join({ connectionId: 'c2', providerId: 'p1', agents: [] });
    expect(replaced).toEqual({ connectionId: 'c1', providerId: 'p1', agents: ['a'] });
    expect(await roster.get('c1')).toBeUndefined();
    expect(await roster.leave('c1')).toBeUndefined();
    expect(await roster.ofProvider('p1')).toMatchObject({ connectionId: 'c2' });
    expect(await roster.serving('a')).toEqual([]);
    expect(await roster.leave('c2')).toMatchObject({ connectionId: 'c2', providerId: 'p1' });
    expect(await roster.ofProvider('p1')).toBeUndefined();
  });

  it('lists the links serving an agent least busy first, and forgets an agent a link stops serving', async () => {
    const roster = await make();
    await roster.join({ connectionId: 'c1', providerId: 'p1', agents: [] });
    await roster.join({ connectionId: 'c2', providerId: 'p2', agents: [] });
    await roster.serve('c1', ['a', 'b']);
    await roster.serve('c2', ['a']);
    await roster.hold('p1', 'r1');
    expect((await roster.serving('a')).map((c) => c.connectionId)).toEqual(['c2', 'c1']);
    await roster.hold('p2', 'r2');
    await roster.hold('p2', 'r3');
    expect((await roster.serving('a')).map((c) => c.connectionId)).toEqual(['c1', 'c2']);
    await roster.drop('p2', 'r2');
    expect(await roster.held('p2')).toEqual(['r3']);
    await roster.serve('c1', ['b']);
    expect((await roster.serving('a')).map((c) => c.connectionId)).toEqual(['c2']);
    expect((await roster.serving('b')).map((c) => c.connectionId)).toEqual(['c1']);
    await roster.leave('c1');
    expect(await roster.serving('b')).toEqual([]);
  });

  it('keeps the runs waiting for an agent oldest first, each once', async () => {
    const roster = await make();
    await roster.wait('a', 'r1');
    now += 1;
    await roster.wait('a', 'r2');
    now += 1;
    await roster.wait('a', 'r1');
    expect(await roster.waiting('a')).toEqual(['r1', 'r2']);
    await roster.unwait('a', 'r1');
    expect(await roster.waiting('a')).toEqual(['r2']);
    expect(await roster.waiting('b')).toEqual([]);
  });
});

describe('the link roster on DynamoDB', () => {
  it('forgets a link whose $disconnect never came once API Gateway would have closed it (2 hours), by its TTL', async () => {
    const roster = new DynamoLinkRoster({ client: dynamo.client, table: (await dynamo.freshTables()).runs, now: () => now });
    await roster.join({ connectionId: 'c1', providerId: 'p1', agents: [] });
    await roster.serve('c1', ['a']);
    now += 2 * 3600_000;
    expect(await roster.get('c1')).toBeDefined();
    now += 30 * 60_000;
    expect(await roster.get('c1')).toBeUndefined();
    expect(await roster.ofProvider('p1')).toBeUndefined();
    expect(await roster.serving('a')).toEqual([]);
  });

  it('joins the parts of a larger frame, however they come, once each is in (each message is an invocation of its own)', async () => {
    const roster = new DynamoLinkRoster({ client: dynamo.client, table: (await dynamo.freshTables()).runs, now: () => now });
    const part = (index: number, data: string) => ({ id: 'frame-1', index, count: 3, data });
    expect(await roster.takePart('c1', part(2, 'ghi'))).toBeUndefined();
    expect(await roster.takePart('c1', part(0, 'abc'))).toBeUndefined();
    // A part of another link's frame of the same id is another frame.
    expect(await roster.takePart('c2', { id: 'frame-1', index: 0, count: 1, data: 'other' })).toBe('other');
    expect(await roster.takePart('c1', part(1, 'def'))).toBe('abcdefghi');
    // Its parts are gone: a frame is joined once.
    expect(await roster.takePart('c1', part(0, 'abc'))).toBeUndefined();
  });
});
