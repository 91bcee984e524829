import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * A random secret kept in a file of the data dir, beside the store's: made on the first start,
 * readable by its owner only, the same at every start after.
 */
export async function dataDirSecret(dataDir: string, file: string): Promise<string> {
  const path = join(dataDir, file);
  await mkdir(dataDir, { recursive: true });
  try {
    // Exclusive: of two first starts at once, one writes the secret and the other reads it.
    await writeFile(path, `${randomBytes(32).toString('hex')}\n`, { flag: 'wx', mode: 0o600 });
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'EEXIST') throw error;
  }
  return (await readFile(path, 'utf8')).trim();
}
