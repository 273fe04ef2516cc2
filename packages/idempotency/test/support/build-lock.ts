/**
 * The packaging tests build the package (`pnpm run build`: scripts/build.mjs, which replaces `dist` file by file)
 * and pack it. Test files run in parallel, so two of them doing that at once could pack a mix of two builds: each
 * holds this lock — a directory, whose creation is atomic — from the build until its tarball is written.
 */
import { mkdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const packageDir = path.resolve(import.meta.dirname, '..', '..');
const LOCK = path.join(packageDir, '.build.lock');
/** A lock older than this was left by a killed test run: taken over. A build and a pack take ≈ 10 s here. */
const STALE_MS = 180_000;

export async function withBuildLock<T>(work: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      await mkdir(LOCK);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const age = await stat(LOCK).then(
        (lock) => Date.now() - lock.mtimeMs,
        () => 0,
      );
      if (age > STALE_MS) await rm(LOCK, { recursive: true, force: true });
      else await sleep(200);
    }
  }
  try {
    return await work();
  } finally {
    await rm(LOCK, { recursive: true, force: true });
  }
}
