/**
 * P7: what the client library adds to the checkout's browser bundle, min+gz. `pnpm bench:client-size --json`
 * (src/client-size.ts) in a process of its own; its first entry is what the checkout imports.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { benchRoot } from '../repository.ts';
import { type Figure, figure } from '../summary.ts';
import type { Skipped } from './context.ts';

export const name = 'client size (P7)';

export const plannedSeconds = () => 3;

/** An entry of client-size.ts's JSON (which has more fields per entry, kept as they are in the results). */
export interface ClientSize {
  entry: string;
  minified: number;
  gzipped: number;
}

export function run(): ClientSize[] | Skipped {
  const result = spawnSync(
    process.execPath,
    ['--import', 'tsx', path.join(benchRoot, 'src/client-size.ts'), '--json'],
    { cwd: benchRoot, encoding: 'utf8' },
  );
  if (result.status !== 0)
    return { skipped: `client-size failed: ${result.stderr.trim().split('\n').pop()}` };
  try {
    return JSON.parse(result.stdout) as ClientSize[];
  } catch {
    return { skipped: 'client-size printed no JSON' };
  }
}

export function figures(bundle: ClientSize[] | Skipped): Figure[] {
  if ('skipped' in bundle) return [];
  const checkout = bundle[0];
  if (!checkout) return [];
  return [
    figure({
      id: 'P7',
      label: 'P7 client library in the checkout bundle, min+gz',
      value: checkout.gzipped / 1024,
      runs: 'exact',
      detail: `${checkout.entry}: ${(checkout.minified / 1024).toFixed(2)} kB min (esbuild, gzip -9; pnpm bench:client-size)`,
    }),
  ];
}
