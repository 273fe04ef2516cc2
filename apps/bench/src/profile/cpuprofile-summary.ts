/**
 * Self time of a `node --cpu-prof` profile, per package or source folder and per function, largest first: how
 * docs/BENCHMARKS.md splits the layer's per-request CPU (profile a BENCH_PROFILE_ONLY arm, then divide by the
 * iterations). With `--against <other.cpuprofile>` (e.g. the unprotected arm, same iterations), per place: both
 * profiles' self time and the difference, largest added cost first — what the layer adds, and what it saves
 * (statements that no longer go through the ORM). `--per <n>` divides every figure by n (the arm's iterations,
 * warm-up included) and prints microseconds.
 * `tsx src/profile/cpuprofile-summary.ts <file.cpuprofile> [rows] [--against <other.cpuprofile>] [--per <n>]`
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { repoRoot } from '../repository.ts';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: { against: { type: 'string' }, per: { type: 'string' } },
});
const [file, rowsArg = '30'] = positionals;
if (!file)
  throw new Error('usage: cpuprofile-summary.ts <file.cpuprofile> [rows] [--against <file>] [--per <n>]');
const rows = Number(rowsArg);
const per = Number(values.per ?? 1);
/** Microseconds of self time, shown as ms in total or µs per `--per`. */
const show = (us: number) =>
  values.per ? `${(us / per).toFixed(1).padStart(8)} µs` : `${(us / 1000).toFixed(0).padStart(8)} ms`;

/** A dependency → `npm:<package>`; a repository file → its first four folders; no URL → native (idle, GC, I/O). */
function place(url: string): string {
  if (url === '') return '(native: idle, GC, system calls)';
  const path = url
    .replace(/^file:\/\//, '')
    .replace(/.*node_modules\/\.pnpm\/[^/]+\/node_modules\//, 'npm:')
    .replace(`${repoRoot}/`, '');
  return path
    .split('/')
    .slice(0, path.startsWith('npm:') ? (path.startsWith('npm:@') ? 2 : 1) : 4)
    .join('/');
}

interface Summary {
  totalUs: number;
  byPlace: Map<string, number>;
  byFunction: Map<string, number>;
}

function summarise(profileFile: string): Summary {
  const profile = JSON.parse(readFileSync(profileFile, 'utf8')) as CpuProfile;
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const summary: Summary = { totalUs: 0, byPlace: new Map(), byFunction: new Map() };
  const add = (table: Map<string, number>, name: string, us: number) =>
    table.set(name, (table.get(name) ?? 0) + us);
  profile.samples.forEach((id, index) => {
    const us = profile.timeDeltas[index] ?? 0;
    const frame = nodes.get(id)?.callFrame;
    if (!frame) return;
    summary.totalUs += us;
    const where = place(frame.url);
    // Native frames by their own name: idle, the garbage collector and each system call apart.
    add(summary.byPlace, frame.url === '' ? `(native) ${frame.functionName}` : where, us);
    add(summary.byFunction, `${frame.functionName || '(anonymous)'} ${where}:${frame.lineNumber}`, us);
  });
  return summary;
}

const profile = summarise(file);
const print = (title: string, table: Map<string, number>) => {
  console.log(`\n${title}`);
  for (const [name, us] of [...table].sort((a, b) => b[1] - a[1]).slice(0, rows))
    console.log(`${show(us)} ${((100 * us) / profile.totalUs).toFixed(1).padStart(5)} %  ${name}`);
};

if (values.against) {
  const other = summarise(values.against);
  console.log(`${file} against ${values.against}: ${show(profile.totalUs)} / ${show(other.totalUs)} sampled`);
  console.log(`\nself time by place: ${file}, ${values.against}, difference (largest added first)`);
  const places = new Set([...profile.byPlace.keys(), ...other.byPlace.keys()]);
  const differences = [...places].map((name) => {
    const mine = profile.byPlace.get(name) ?? 0;
    const theirs = other.byPlace.get(name) ?? 0;
    return { name, mine, theirs, added: mine - theirs };
  });
  differences.sort((a, b) => b.added - a.added);
  // The largest additions, then the largest savings.
  const shown = [
    ...differences.slice(0, rows),
    ...differences
      .slice(rows)
      .filter((row) => row.added < 0)
      .slice(-10),
  ];
  for (const { name, mine, theirs, added } of shown)
    console.log(
      `${show(mine)} ${show(theirs)} ${added >= 0 ? '+' : '-'}${show(Math.abs(added)).trim()}  ${name}`,
    );
} else {
  console.log(`${file}: ${show(profile.totalUs)} sampled`);
  print('self time by place', profile.byPlace);
  print('self time by function', profile.byFunction);
}
