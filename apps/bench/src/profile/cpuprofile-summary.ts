/**
 * Self time of a `node --cpu-prof` profile, per package or source folder and per function, largest first: how
 * docs/BENCHMARKS.md splits the layer's per-request CPU (profile a BENCH_PROFILE_ONLY arm, then divide by the
 * iterations). `tsx src/profile/cpuprofile-summary.ts <file.cpuprofile> [rows]`
 */
import { readFileSync } from 'node:fs';
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

const [file, rowsArg = '30'] = process.argv.slice(2);
if (!file) throw new Error('usage: cpuprofile-summary.ts <file.cpuprofile> [rows]');
const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
const nodes = new Map(profile.nodes.map((node) => [node.id, node]));

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

const byPlace = new Map<string, number>();
const byFunction = new Map<string, number>();
let totalUs = 0;
profile.samples.forEach((id, index) => {
  const us = profile.timeDeltas[index] ?? 0;
  const frame = nodes.get(id)?.callFrame;
  if (!frame) return;
  totalUs += us;
  const where = place(frame.url);
  byPlace.set(where, (byPlace.get(where) ?? 0) + us);
  const name = `${frame.functionName || '(anonymous)'} ${where}:${frame.lineNumber}`;
  byFunction.set(name, (byFunction.get(name) ?? 0) + us);
});

const rows = Number(rowsArg);
const print = (title: string, table: Map<string, number>) => {
  console.log(`\n${title}`);
  for (const [name, us] of [...table].sort((a, b) => b[1] - a[1]).slice(0, rows))
    console.log(
      `${(us / 1000).toFixed(0).padStart(8)} ms ${((100 * us) / totalUs).toFixed(1).padStart(5)} %  ${name}`,
    );
};
console.log(`${file}: ${(totalUs / 1000).toFixed(0)} ms sampled`);
print('self time by place', byPlace);
print('self time by function', byFunction);
