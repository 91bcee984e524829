import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * What lives in the data dir (FUNDUQ_DATA_DIR), one name per file, so that whatever else the
 * gateway keeps there is added here, beside these:
 * - `funduq.sqlite` (and `funduq.sqlite-wal`, `funduq.sqlite-shm` while it is open): the record, in
 *   SQLite (the default store), and `funduq.sqlite-lock`, which the gateway holding it keeps locked;
 * - `funduq.pid`: which process holds the data dir, for the message a second gateway prints;
 * - with FUNDUQ_STORE=dynamodb, dynalite's LevelDB files (`CURRENT`, `LOCK`, `LOG`, `MANIFEST-*`,
 *   `*.ldb`, `*.log`) at the top of the dir, where funduq kept them before it had SQLite.
 */
export const DATA_DIR_FILES = {
  record: 'funduq.sqlite',
  holder: 'funduq.pid',
} as const;

/** The data dir is held by another gateway (its store's lock is taken). */
export class DataDirInUse extends Error {
  readonly code = 'data_dir_in_use';
}

/** The data dir holds dynalite's files and no SQLite record: a data dir of a funduq before SQLite. */
export class DataDirOfDynalite extends Error {
  readonly code = 'data_dir_of_dynalite';
}

interface Holder {
  pid: number;
  startedAt: string;
}

export function recordFile(dir: string): string {
  return join(dir, DATA_DIR_FILES.record);
}

/** Dynalite's LevelDB is there (a `CURRENT` and a `MANIFEST-*`), and no SQLite record beside it. */
export function holdsOnlyDynalite(dir: string): boolean {
  if (existsSync(recordFile(dir)) || !existsSync(join(dir, 'CURRENT'))) return false;
  return readdirSync(dir).some((name) => name.startsWith('MANIFEST-'));
}

export function dynaliteDirError(dir: string): DataDirOfDynalite {
  return new DataDirOfDynalite(
    `the data dir ${dir} holds a record kept by dynalite (funduq's local store before SQLite): start with FUNDUQ_STORE=dynamodb to keep using it, or set FUNDUQ_DATA_DIR to a new directory to start a SQLite record`,
  );
}

/** Says who holds the data dir, once its store refused to open because another process has it. */
export function inUseError(dir: string, cause: unknown): DataDirInUse {
  const holder = holderOf(dir);
  const who = holder && holder.pid !== process.pid ? `process ${holder.pid} (a funduq started ${holder.startedAt})` : 'another process';
  return new DataDirInUse(`the data dir ${dir} is in use by ${who}: stop it, or set FUNDUQ_DATA_DIR to another directory`, { cause });
}

/** Writes who holds the data dir, once its store's lock is taken; returns the release. */
export function markHolder(dir: string): () => void {
  const file = join(dir, DATA_DIR_FILES.holder);
  const mine = `${JSON.stringify({ pid: process.pid, startedAt: new Date().toISOString() } satisfies Holder)}\n`;
  writeFileSync(file, mine);
  return () => {
    // Only our own mark goes: a stale one is overwritten by the next holder anyway.
    try {
      if (readFileSync(file, 'utf8') === mine) rmSync(file);
    } catch {
      // Already gone.
    }
  };
}

function holderOf(dir: string): Holder | undefined {
  try {
    const holder = JSON.parse(readFileSync(join(dir, DATA_DIR_FILES.holder), 'utf8')) as Holder;
    return Number.isInteger(holder.pid) ? holder : undefined;
  } catch {
    return undefined;
  }
}
