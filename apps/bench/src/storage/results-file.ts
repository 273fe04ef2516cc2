/**
 * docs/bench-results.json is shared: `pnpm bench` writes the whole file, `pnpm bench:storage` only its `storage`
 * entry. Whoever rewrites the file carries the other's part over.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../repository.ts';

export const RESULTS_FILE = path.join(repoRoot, 'docs/bench-results.json');

function read(file: string): Record<string, unknown> {
  if (!existsSync(file)) return {};
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  } catch {
    return {}; // unreadable: start over rather than fail a run that took minutes
  }
}

/** The `storage` entry the last `pnpm bench:storage` left in `file` (for `pnpm bench` to keep). */
export function keptStorageResults(file = RESULTS_FILE): unknown {
  return read(file).storage;
}

/**
 * Sets the `storage` entry of `file` (section by section), leaving everything else as it is, then lets Biome format it (`pnpm lint`
 * checks docs/*.json, and JSON.stringify spreads every short array over many lines). Formatting is best effort.
 */
export function writeStorageResults(storage: unknown, file = RESULTS_FILE): void {
  const previous = read(file);
  // A run of some sections only (BENCH_STORAGE_SECTIONS) replaces those sections and keeps the others.
  const kept = typeof previous.storage === 'object' && previous.storage !== null ? previous.storage : {};
  const merged = typeof storage === 'object' && storage !== null ? { ...kept, ...storage } : storage;
  writeFileSync(file, `${JSON.stringify({ ...previous, storage: merged }, null, 2)}\n`);
  spawnSync(path.join(repoRoot, 'node_modules/.bin/biome'), ['format', '--write', file], {
    cwd: repoRoot,
    stdio: 'ignore',
  });
}
