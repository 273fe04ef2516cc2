/**
 * CPU time of processes from /proc (Linux): a process's user + system seconds, and a meter that sums them for a
 * set of roles (the server, its database backends, Redis) over one timed window. CPU per request is steadier than
 * throughput on a shared machine: it leaves out the time a process waits for a core.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';

const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** CPU seconds (user + system) of a process so far, or null when /proc has no such process. */
export function cpuSeconds(pid: number): number | null {
  const file = `/proc/${pid}/stat`;
  if (!existsSync(file)) return null;
  try {
    // The fields after the command name (which may hold spaces, in parentheses): utime is the 12th of them.
    const stat = readFileSync(file, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return null;
  }
}

/** The pids whose command line (as the process shows it, e.g. a Postgres backend's title) passes `test`. */
export function pidsWhere(test: (commandLine: string) => boolean): number[] {
  if (!existsSync('/proc')) return [];
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((entry) => {
      try {
        return test(readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' '));
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** Per role, the processes it is made of (looked up when a window starts and again when it ends). */
export type CpuRoles<TRole extends string> = Record<TRole, () => number[]>;

/**
 * Starts a window: the returned stop() gives each role's CPU seconds since. A process that appears during the
 * window counts from its start; one that exits during it is lost (the pools here keep their connections).
 */
export function startCpuWindow<TRole extends string>(roles: CpuRoles<TRole>): () => Record<TRole, number> {
  const names = Object.keys(roles) as TRole[];
  const start = new Map<number, number>();
  for (const name of names) for (const pid of roles[name]()) start.set(pid, cpuSeconds(pid) ?? 0);
  return () => {
    const used = {} as Record<TRole, number>;
    for (const name of names) {
      used[name] = roles[name]().reduce(
        (sum, pid) => sum + ((cpuSeconds(pid) ?? start.get(pid) ?? 0) - (start.get(pid) ?? 0)),
        0,
      );
    }
    return used;
  };
}
