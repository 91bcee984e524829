// The record's checkpoints, on a thread of their own (see sqlite-checkpointer.ts). Plain CommonJS:
// a worker loads it as it is, under tsx, vitest or node alike.
'use strict';
const { parentPort, workerData } = require('node:worker_threads');
const Database = require('better-sqlite3');

/** How long the thread rests once the log is copied whole; a log still growing is copied on at once. */
const REST_MS = 25;

const db = new Database(workerData.path, { timeout: 0 });
// NORMAL: the log is synced before it is copied and the file after, so a power cut loses no commit a checkpoint took.
db.pragma('synchronous = NORMAL');
db.pragma(`journal_size_limit = ${workerData.journalSizeLimit}`);

let timer;
let closed = false;
/** The failure last reported, so that one that lasts is reported once, not every round. */
let failing;

function checkpoint() {
  if (closed) return;
  let more = false;
  try {
    // PASSIVE: copies what no reader still needs, and never waits for (or stops) the gateway's writes.
    const [result] = db.pragma('wal_checkpoint(PASSIVE)');
    more = result.busy === 0 && result.log > result.checkpointed;
    failing = undefined;
  } catch (error) {
    // Busy: the next round copies it. Anything else (a full disk, an I/O error) is said once while it lasts.
    if (error.code !== 'SQLITE_BUSY' && error.message !== failing) parentPort.postMessage({ kind: 'failed', message: error.message });
    if (error.code !== 'SQLITE_BUSY') failing = error.message;
  }
  timer = more ? setImmediate(checkpoint) : setTimeout(checkpoint, REST_MS);
}

parentPort.on('message', (message) => {
  if (message !== 'close') return;
  closed = true;
  clearTimeout(timer);
  clearImmediate(timer);
  db.close();
  parentPort.close();
});

checkpoint();
