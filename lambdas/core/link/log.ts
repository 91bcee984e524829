import { EventType } from '@ag-ui/core';
import { checkEvent, withRunIds } from '../events.js';
import type { AgUiEventRecord, Run, RunLink, StoredEvent } from '../model.js';
import { deriveEnd, failedEnd } from '../outcome.js';
import type { LinkConnection, RunStore } from '../ports.js';
import { MAX_EVENT_BYTES, utf8Bytes } from '../storable.js';
import { RunTranscript } from '../transcript.js';
import { live, nextLink, tell, type LinkCore } from './deps.js';
import { accept, failLinkRun, forgetLinkRun } from './offers.js';

/**
 * A frame can be handled before the frames sent ahead of it (on AWS each is its own invocation,
 * and they run concurrently): an end that finds a hole in the log waits this long for the missing
 * frames, which are being stored, and looks again.
 */
export const GAP_RECHECK_MS = 1_000;

/** The run is this provider's to carry: it accepted its offer and the run has not ended. */
function held(run: Run | undefined, connection: LinkConnection): run is Run & { link: RunLink } {
  return live(run) && run.link?.accepted === true && run.link.providerId === connection.providerId;
}

/**
 * An `events` frame: each event is checked (the AG-UI schema, the size an item holds) and stored at
 * the provider's seq, first write wins, so a frame that comes twice changes nothing. The run's
 * terminal event (RUN_FINISHED or RUN_ERROR) is not stored with the others: it ends the run, which
 * writes it after the run's end, as every provider kind's is.
 */
export async function recordLinkEvents(core: LinkCore, connection: LinkConnection, runId: string, events: { seq: number; event?: unknown }[]): Promise<void> {
  const run = await heldBy(core, connection, runId);
  if (!held(run, connection)) return notHeld(core, connection, run, runId);
  const through = run.link.ending?.through;
  const stored: StoredEvent[] = [];
  let terminal: { seq: number; event: AgUiEventRecord } | undefined;
  for (const { seq, event: raw } of events) {
    // Whatever comes after the run's end is not the run's.
    if (through !== undefined && seq > through) break;
    const checked = checkEvent(raw);
    if (!checked.ok) {
      await failLinkRun(core, run, 'provider_sent_malformed_event', checked.message);
      return;
    }
    const event = withRunIds(checked.event, run);
    const json = JSON.stringify(event);
    if (utf8Bytes(json) > MAX_EVENT_BYTES) {
      await failLinkRun(core, run, 'provider_event_too_large', `a ${event.type} event of ${Math.ceil(utf8Bytes(json) / 1024)} KB is more than the record keeps (${MAX_EVENT_BYTES / 1024} KB an event)`);
      return;
    }
    if (event.type === EventType.RUN_FINISHED || event.type === EventType.RUN_ERROR) {
      terminal = { seq, event };
      break;
    }
    stored.push({ runId, seq, event, json });
  }
  await core.ledger.append(stored, run);
  if (terminal) await endLinkRun(core, run, { through: terminal.seq - 1, terminal: terminal.event });
}

/** A cancel's receipt: the agent stopped after the events through `lastSeq`; the run ends cancelled (unless its own end came first). */
export async function cancelReceipted(core: LinkCore, connection: LinkConnection, runId: string, lastSeq: number): Promise<void> {
  const run = await heldBy(core, connection, runId);
  if (!held(run, connection)) return;
  await endLinkRun(core, run, { through: lastSeq, cancelled: true });
}

/**
 * Ends a link run from its stored log: its events 1 … `through`, whole, held to the stock client's
 * rules all at once (a frame handler sees one frame, never the stream), then the agent's terminal
 * event or funduq's cancelled end. A log the rules refuse fails the run
 * `provider_sent_malformed_event`. A log with a hole (frames still being stored) keeps the end on
 * the run's record and is looked at again shortly.
 */
export async function endLinkRun(core: LinkCore, run: Run, ending: NonNullable<RunLink['ending']>): Promise<void> {
  const log = await storedPrefix(core.store, run.runId, ending.through);
  if (log.events.length < ending.through) {
    const waiting = run.link?.ending ? run : await core.ledger.updateLink(run, nextLink(run, { ending }));
    if (waiting) await core.link.timer.schedule({ kind: 'ending', runId: run.runId }, GAP_RECHECK_MS);
    return;
  }
  const rules = core.rules.start();
  const transcript = new RunTranscript();
  const all = ending.terminal ? [...log.events.map((stored) => stored.event), ending.terminal] : log.events.map((stored) => stored.event);
  let broken: string | undefined;
  for (const event of all) {
    broken = rules(event);
    if (broken) break;
    transcript.observe(event);
  }
  const stored = { events: log.events.length, bytes: log.bytes };
  const end = broken
    ? failedEnd('provider_sent_malformed_event', `the agent's stream breaks the AG-UI event order: ${broken}`)
    : deriveEnd(transcript, { threadId: run.threadId, runId: run.runId, cancelRequested: ending.cancelled === true || run.status === 'cancelling' });
  const settled = await core.ledger.settleStored(run, end, stored, broken ? undefined : ending.terminal);
  if (!settled) return;
  await forgetLinkRun(core, run);
  await tell(core, run.link?.connectionId, { v: 1, type: 'settled', runId: run.runId });
}

/**
 * The run as this provider holds it. A provider sends a run's events only after its `accept`, but
 * on AWS the frames are handled concurrently, so its events may be handled first: events from the
 * provider the run's current offer went to are its acceptance.
 */
async function heldBy(core: LinkCore, connection: LinkConnection, runId: string): Promise<Run | undefined> {
  const run = await core.store.runs.get(runId);
  if (!live(run) || held(run, connection) || run.link?.providerId !== connection.providerId || run.link.accepted) return run;
  await accept(core, connection, runId, run.link.offers);
  return core.store.runs.get(runId);
}

/** A frame about a run the provider does not hold: an ended one is forgotten; another's is refused. */
async function notHeld(core: LinkCore, connection: LinkConnection, run: Run | undefined, runId: string): Promise<void> {
  if (run && !live(run)) {
    await tell(core, connection.connectionId, { v: 1, type: 'settled', runId });
    return;
  }
  await tell(core, connection.connectionId, { v: 1, type: 'error', code: 'link_run_not_held', runId, message: `run "${runId}" is not held by provider "${connection.providerId}"` });
}

/** A run's log as stored from its first event, up to the first hole (or `through`): what a resume carries on from. */
export async function storedPrefix(store: Pick<RunStore, 'events'>, runId: string, through?: number): Promise<{ events: StoredEvent[]; bytes: number }> {
  if (through === 0) return { events: [], bytes: 0 };
  const read = await store.events.read(runId, 0, through);
  const events: StoredEvent[] = [];
  let bytes = 0;
  for (const stored of read) {
    if (stored.seq !== events.length + 1) break;
    events.push(stored);
    bytes += utf8Bytes(stored.json ?? JSON.stringify(stored.event));
  }
  return { events, bytes };
}
