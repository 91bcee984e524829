import { Worker } from 'node:worker_threads';

/** The log is cut back to this once it has been copied whole, after a burst made it grow. */
export const JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024;

/**
 * Copies the record's write-ahead log into its file on a thread of its own. Left to SQLite, the
 * commit that crosses the log's threshold copies it and syncs the file on the gateway's only
 * thread: 20–90 ms during which no socket is read (a health check, another tenant's stream).
 * Here the gateway's connection never checkpoints (`wal_autocheckpoint = 0`) and this thread's
 * connection copies the log as it grows, without waiting for or stopping the writer.
 */
export class SqliteCheckpointer {
  private readonly worker: Worker;
  private readonly ended: Promise<void>;
  private stopping = false;

  /**
   * `onFailure` hears of a log the thread could not copy (it tries again); `onGone`, of a thread
   * that ended without being stopped, after which the gateway's connection must checkpoint again.
   */
  constructor(path: string, onFailure: (message: string) => void, onGone: (message: string) => void) {
    this.worker = new Worker(new URL('./sqlite-checkpoint-thread.cjs', import.meta.url), {
      workerData: { path, journalSizeLimit: JOURNAL_SIZE_LIMIT },
      resourceLimits: { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 4 },
    });
    this.worker.on('message', (message: { kind: string; message: string }) => {
      if (message.kind === 'failed') onFailure(message.message);
    });
    let failure = 'it ended';
    this.worker.on('error', (error) => (failure = error.message));
    this.ended = new Promise<void>((resolve) =>
      this.worker.once('exit', () => {
        if (!this.stopping) onGone(failure);
        resolve();
      }),
    );
    // The thread never holds the process open: a gateway that ends leaves the log for its next start to copy.
    this.worker.unref();
  }

  /** The thread closes its connection and ends; the gateway's own connection, closing last, copies what is left. */
  stop(): Promise<void> {
    this.stopping = true;
    // Held again until it ends: a process with nothing else to wait for would otherwise end first.
    this.worker.ref();
    this.worker.postMessage('close');
    return this.ended;
  }
}
