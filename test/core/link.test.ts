import { describe, expect, it } from 'vitest';
import { linkKeysFromSecret } from '../../lambdas/adapters/crypto/link-keys.js';
import { InProcessLinkRoster } from '../../lambdas/adapters/local/link/roster.js';
import { InProcessLinkTimer } from '../../lambdas/adapters/local/link/timer.js';
import { proofText, type FromProviderFrame, type ToProviderFrame } from '../../packages/provider/src/wire.js';
import { ANONYMOUS } from '../../lambdas/core/model.js';
import type { LinkChannels, LinkJob } from '../../lambdas/core/ports.js';
import { generateKeyPair, privateKeyOf, signText } from '../../packages/provider/src/ed25519.js';
import { eventually, harness, type Harness } from '../support/core-harness.js';
import { useDynalite } from '../support/dynalite.js';

const dynamo = useDynalite();

/** The link's timer, keeping what it was asked to schedule. */
class RecordedTimer extends InProcessLinkTimer {
  readonly jobs: LinkJob[] = [];
  override async schedule(job: LinkJob, afterMs: number): Promise<void> {
    this.jobs.push(job);
    await super.schedule(job, afterMs);
  }
}

/** The link's frames to providers, kept per link, as a test double of the transport. */
class RecordedChannels implements LinkChannels {
  readonly sent = new Map<string, ToProviderFrame[]>();
  async send(connectionId: string, frame: ToProviderFrame): Promise<boolean> {
    this.sent.set(connectionId, [...(this.sent.get(connectionId) ?? []), frame]);
    return true;
  }
  async close(): Promise<void> {}
  of(connectionId: string, type: ToProviderFrame['type']): ToProviderFrame[] {
    return (this.sent.get(connectionId) ?? []).filter((frame) => frame.type === type);
  }
}

interface Linked {
  h: Harness;
  channels: RecordedChannels;
  timer: RecordedTimer;
  /** Links the provider `p1` (serving `linked`) as connection `c1`, and returns a way to send its frames. */
  open(connectionId?: string): Promise<(frame: FromProviderFrame) => Promise<void>>;
}

/** `handOff`: as on AWS, the dispatcher hands a link run off and returns, and each dispatch comes in a message it names. */
async function linkedHarness(agent: { timeoutSeconds?: number; idleTimeoutSeconds?: number } = {}, handOff = false): Promise<Linked> {
  const channels = new RecordedChannels();
  let timer!: RecordedTimer;
  const h = await harness(await dynamo.freshStore(), {
    providers: { link: { linked: true } },
    ...(handOff ? { receipt: (runId: string) => `receipt-of-${runId}` } : {}),
    link: (clock) => {
      timer = new RecordedTimer(clock, (error) => {
        throw error;
      });
      return { roster: new InProcessLinkRoster(), channels, timer, keys: linkKeysFromSecret('test'), holdUntilSettled: !handOff };
    },
  });
  timer.start((job) => h.gateway.link.fire(job));
  const provider = generateKeyPair();
  expect(await h.gateway.link.providers.put({ providerId: 'p1', publicKey: provider.publicKey, agents: ['linked'], maxConcurrentRuns: 4 })).toMatchObject({ ok: true });
  await h.store.agents.put({ id: 'linked', description: 'over a link', provider: { kind: 'link' }, takesInterjections: false, timeoutSeconds: agent.timeoutSeconds ?? 900, idleTimeoutSeconds: agent.idleTimeoutSeconds ?? 300 });
  let nonces = 0;
  const open = async (connectionId = 'c1') => {
    const proof = { v: 1 as const, providerId: 'p1', nonce: `nonce-of-the-test-${++nonces}`, time: h.clock.now(), gatewayKey: h.gateway.link.publicKey!, signature: '' };
    proof.signature = signText(privateKeyOf(provider.privateKey), proofText(proof));
    expect(await h.gateway.link.admit(proof, connectionId)).toMatchObject({ ok: true });
    const send = (frame: FromProviderFrame) => h.gateway.link.frame(connectionId, frame);
    await send({ v: 1, type: 'register', agents: [{ name: 'linked', description: 'over a link' }] });
    return send;
  };
  return { h, channels, timer, open };
}

const event = (seq: number, body: Record<string, unknown>) => ({ seq, event: body });

/** Starts a run of the `linked` agent and returns it once its offer reached `c1`. */
async function offered(l: Linked, text = 'hello') {
  // A thread of its own: runs of one thread wait for each other.
  const started = await l.h.gateway.startRun({ agentId: 'linked', input: l.h.input(text, { threadId: `thread-of-${text}` }), door: 'agui', principal: ANONYMOUS });
  if (!started.ok) throw new Error(started.message);
  const runId = started.value.run.runId;
  const offer = await eventually(() => {
    const frame = l.channels.of('c1', 'run').find((f) => f.type === 'run' && f.runId === runId);
    expect(frame).toBeDefined();
    return frame as Extract<ToProviderFrame, { type: 'run' }>;
  });
  return { runId, offer };
}

describe('a link run’s frames', () => {
  it('make a whole log when they come twice and out of order, and end the run once, at its terminal event', async () => {
    const l = await linkedHarness();
    const send = await l.open();
    const { runId, offer } = await offered(l);
    await send({ v: 1, type: 'accept', runId, offer: offer.offer });
    const late = { v: 1 as const, type: 'events' as const, runId, events: [event(1, { type: 'RUN_STARTED', threadId: 'x', runId: 'y' }), event(2, { type: 'TEXT_MESSAGE_START', messageId: 'm', role: 'assistant' })] };
    // The frame with the end is handled first (as concurrent handlers on AWS may): the end waits for the log.
    await send({ v: 1, type: 'events', runId, events: [event(3, { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: 'hi' }), event(4, { type: 'TEXT_MESSAGE_END', messageId: 'm' }), event(5, { type: 'RUN_FINISHED', threadId: 'x', runId: 'y' })] });
    expect((await l.h.store.runs.get(runId))?.status).toBe('running');
    await send(late);
    await send(late);
    l.h.clock.advance(1_000);
    await eventually(async () => expect((await l.h.store.runs.get(runId))?.status).toBe('completed'));
    await eventually(() => expect(l.channels.of('c1', 'settled')).toHaveLength(1));
    const log = await l.h.events(runId);
    expect(log.map((e) => [e.seq, e.event.type])).toEqual([
      [1, 'RUN_STARTED'],
      [2, 'TEXT_MESSAGE_START'],
      [3, 'TEXT_MESSAGE_CONTENT'],
      [4, 'TEXT_MESSAGE_END'],
      [5, 'RUN_FINISHED'],
    ]);
    // The agent's ids are funduq's, its own kept under rawEvent.
    expect(log[0].event).toMatchObject({ threadId: 'thread-of-hello', runId, rawEvent: { threadId: 'x', runId: 'y' } });
    expect(l.channels.of('c1', 'settled')).toEqual([{ v: 1, type: 'settled', runId }]);
    expect((await l.h.store.providers.get('p1'))?.places).toBe(0);
    // A repeat after the end changes nothing and tells the provider to forget the run.
    await send(late);
    expect(await l.h.events(runId)).toHaveLength(5);
    expect(l.channels.of('c1', 'settled')).toHaveLength(2);
  });

  it('of the provider a run is offered to, handled before its accept (AWS handles frames concurrently), take the run and are stored', async () => {
    const l = await linkedHarness();
    const send = await l.open();
    const { runId, offer } = await offered(l, 'eager');
    await send({ v: 1, type: 'events', runId, events: [event(1, { type: 'RUN_STARTED', threadId: 'x', runId: 'y' })] });
    await send({ v: 1, type: 'accept', runId, offer: offer.offer });
    await send({ v: 1, type: 'events', runId, events: [event(2, { type: 'RUN_FINISHED', threadId: 'x', runId: 'y' })] });
    await eventually(async () => expect((await l.h.store.runs.get(runId))?.status).toBe('completed'));
    expect((await l.h.events(runId)).map((e) => e.event.type)).toEqual(['RUN_STARTED', 'RUN_FINISHED']);
    // The accept that came second is no late verdict: the agent is not told to stop.
    expect(l.channels.of('c1', 'error')).toEqual([]);
    expect(l.channels.of('c1', 'cancel')).toEqual([]);
  });

  it('fail the run provider_sent_malformed_event when the whole log breaks the stock client’s order, checked at its end', async () => {
    const l = await linkedHarness();
    const send = await l.open();
    const { runId, offer } = await offered(l);
    await send({ v: 1, type: 'accept', runId, offer: offer.offer });
    await send({ v: 1, type: 'events', runId, events: [event(1, { type: 'RUN_STARTED', threadId: 't', runId }), event(2, { type: 'TEXT_MESSAGE_CONTENT', messageId: 'nowhere', delta: 'hi' }), event(3, { type: 'RUN_FINISHED', threadId: 't', runId })] });
    const run = await l.h.store.runs.get(runId);
    expect(run).toMatchObject({ status: 'failed', reason: 'provider_sent_malformed_event' });
    expect(run?.message).toMatch(/breaks the AG-UI event order/);
    expect((await l.h.events(runId)).map((e) => e.event.type)).toEqual(['RUN_STARTED', 'TEXT_MESSAGE_CONTENT', 'RUN_ERROR']);
  });

  it('of a run the link does not hold (it declined it) are refused with an error frame and stored nowhere', async () => {
    const l = await linkedHarness();
    const send = await l.open();
    const { runId, offer } = await offered(l);
    await send({ v: 1, type: 'decline', runId, offer: offer.offer });
    await send({ v: 1, type: 'events', runId, events: [event(1, { type: 'RUN_STARTED', threadId: 't', runId })] });
    expect(l.channels.of('c1', 'error')).toEqual([expect.objectContaining({ code: 'link_run_not_held', runId })]);
    expect(await l.h.events(runId)).toEqual([]);
  });
});

describe('a link run’s clocks', () => {
  it('fail a run whose agent goes silent provider_idle, and one past its limit provider_timeout, telling the provider to stop', async () => {
    const l = await linkedHarness({ idleTimeoutSeconds: 30, timeoutSeconds: 100 });
    const send = await l.open();
    const quiet = await offered(l, 'quiet');
    await send({ v: 1, type: 'accept', runId: quiet.runId, offer: quiet.offer.offer });
    await send({ v: 1, type: 'events', runId: quiet.runId, events: [event(1, { type: 'RUN_STARTED', threadId: 't', runId: quiet.runId })] });
    l.h.clock.advance(30_000);
    // It spoke since the last look: the idle clock starts again.
    await eventually(() => expect(l.timer.jobs).toContainEqual({ kind: 'idle', runId: quiet.runId, seq: 1 }));
    expect((await l.h.store.runs.get(quiet.runId))?.status).toBe('running');
    l.h.clock.advance(30_000);
    await eventually(async () => expect(await l.h.store.runs.get(quiet.runId)).toMatchObject({ status: 'failed', reason: 'provider_idle' }));
    await eventually(() => expect(l.channels.of('c1', 'cancel')).toContainEqual({ v: 1, type: 'cancel', runId: quiet.runId, reason: 'provider_idle' }));

    const slow = await offered(l, 'slow');
    await send({ v: 1, type: 'accept', runId: slow.runId, offer: slow.offer.offer });
    // It speaks every 20 s, so it is never idle, until its 100 s are up.
    for (let seq = 1; seq <= 5; seq++) {
      await send({ v: 1, type: 'events', runId: slow.runId, events: [event(seq, seq === 1 ? { type: 'RUN_STARTED', threadId: 't', runId: slow.runId } : { type: 'CUSTOM', name: 'tick', value: seq })] });
      const jobs = l.timer.jobs.length;
      l.h.clock.advance(20_000);
      if (seq % 2 === 0) await eventually(() => expect(l.timer.jobs.length).toBeGreaterThan(jobs));
      if (seq < 5) expect((await l.h.store.runs.get(slow.runId))?.status).toBe('running');
    }
    await eventually(async () => expect(await l.h.store.runs.get(slow.runId)).toMatchObject({ status: 'failed', reason: 'provider_timeout', message: 'the run passed its limit of 100 s' }));
  });

  it('offer an unanswered run again after 5 s, and the late answer to the first offer is told the offer was taken back', async () => {
    const l = await linkedHarness();
    const send = await l.open();
    const { runId, offer } = await offered(l);
    l.h.clock.advance(5_000);
    await eventually(() => expect(l.channels.of('c1', 'run')).toHaveLength(2));
    await send({ v: 1, type: 'accept', runId, offer: offer.offer });
    expect(l.channels.of('c1', 'cancel').filter((f) => f.type === 'cancel' && f.reason === 'offer_withdrawn')).toHaveLength(2);
    expect((await l.h.store.runs.get(runId))?.link?.accepted).toBeUndefined();
    await send({ v: 1, type: 'accept', runId, offer: offer.offer + 1 });
    expect((await l.h.store.runs.get(runId))?.link).toMatchObject({ accepted: true, offers: 2, providerId: 'p1' });
    expect((await l.h.store.providers.get('p1'))?.places).toBe(1);
  });

  it('fail at once a run its provider comes back without (it restarted), and carry on the ones it resumes', async () => {
    const l = await linkedHarness();
    const send = await l.open();
    const kept = await offered(l, 'kept');
    const lost = await offered(l, 'lost');
    for (const { runId, offer } of [kept, lost]) {
      await send({ v: 1, type: 'accept', runId, offer: offer.offer });
      await send({ v: 1, type: 'events', runId, events: [event(1, { type: 'RUN_STARTED', threadId: 't', runId })] });
    }
    await l.h.gateway.link.closed('c1');
    const again = await l.open('c2');
    await again({ v: 1, type: 'resume', runs: [kept.runId] });
    expect(l.channels.of('c2', 'resumed')).toEqual([{ v: 1, type: 'resumed', runs: [{ runId: kept.runId, lastSeq: 1 }], gone: [] }]);
    expect(await l.h.store.runs.get(lost.runId)).toMatchObject({ status: 'failed', reason: 'provider_left_holding_it' });
    expect(await l.h.store.runs.get(kept.runId)).toMatchObject({ status: 'running', link: { connectionId: 'c2' } });
    // The grace window of the closed link ends: the resumed run is not the closed link's any more.
    l.h.clock.advance(60_000);
    await again({ v: 1, type: 'events', runId: kept.runId, events: [event(2, { type: 'RUN_FINISHED', threadId: 't', runId: kept.runId })] });
    expect(await l.h.store.runs.get(kept.runId)).toMatchObject({ status: 'completed' });
  });
});

describe('a link run whose dispatcher hands it off and returns (AWS)', () => {
  it('holds the thread-queue message it came in until it settles, and its settle lets the message go', async () => {
    const l = await linkedHarness({}, true);
    const released: string[] = [];
    Object.assign(l.h.queue, { release: async (hold: string) => void released.push(hold) });
    const send = await l.open();
    const { runId, offer } = await offered(l);
    expect((await l.h.store.runs.get(runId))?.link?.hold).toBe(`receipt-of-${runId}`);
    await send({ v: 1, type: 'accept', runId, offer: offer.offer });
    await send({ v: 1, type: 'events', runId, events: [event(1, { type: 'RUN_STARTED', threadId: 'x', runId: 'y' })] });
    expect(released).toEqual([]);
    await send({ v: 1, type: 'events', runId, events: [event(2, { type: 'RUN_FINISHED', threadId: 'x', runId: 'y' })] });
    expect((await l.h.store.runs.get(runId))?.status).toBe('completed');
    expect(released).toEqual([`receipt-of-${runId}`]);
  });

  it('takes its message again when it comes back while the run is at its provider, rather than failing the run dispatch_lost', async () => {
    const l = await linkedHarness({}, true);
    l.h.queue.release = async () => {};
    const send = await l.open();
    const { runId, offer } = await offered(l);
    await send({ v: 1, type: 'accept', runId, offer: offer.offer });
    expect(await l.h.gateway.dispatchRun(runId, { receipt: 'receipt-of-the-second-receive' })).toBe('handed_off');
    expect(await l.h.store.runs.get(runId)).toMatchObject({ status: 'running', link: { accepted: true, hold: 'receipt-of-the-second-receive' } });
    // A message without a hand-off behind it (a dispatcher that died before the run's first offer) still fails its run.
    await send({ v: 1, type: 'events', runId, events: [event(1, { type: 'RUN_STARTED', threadId: 'x', runId: 'y' }), event(2, { type: 'RUN_FINISHED', threadId: 'x', runId: 'y' })] });
    expect(await l.h.gateway.dispatchRun(runId, { receipt: 'receipt-of-a-third-receive' })).toBe('skipped');
  });
});
