/**
 * `pnpm test:mutation:table [report.json]`: the per-file score table of the last `pnpm test:mutation` run, as
 * Markdown, for docs/RELIABILITY.md. Stryker's rule for the score: detected = killed + timed out, over
 * detected + survived + reached by no test; static mutants skipped by `--ignoreStatic`, compile and runtime
 * errors are not in it. Each row says its target (issue 17: 90 % in core/, the stores and client/, 85 % in
 * react/; issue 29: 90 % in the plain HTTP layer and its adapters — http/, express/, fetch/ — and 80 % in the
 * conformance kit, testing/) and whether it is met.
 */
import { readFileSync } from 'node:fs';

interface Mutant {
  status: string;
}
interface Report {
  files: Record<string, { mutants: Mutant[] }>;
}

const reportPath = process.argv[2] ?? 'reports/mutation/mutation.json';
const report = JSON.parse(readFileSync(reportPath, 'utf8')) as Report;
const SRC = 'packages/idempotency/src/';

/** The score a file must reach (issues 17 and 29), or null where none is set (trpc/, protocol.ts). */
function targetOf(file: string): number | null {
  if (file.startsWith('react/')) return 85;
  if (file.startsWith('testing/')) return 80;
  if (/^(core|prisma|mariadb|sqlite|client|http|express|fetch)\//.test(file)) return 90;
  return null;
}

interface Tally {
  killed: number;
  timeout: number;
  survived: number;
  noCoverage: number;
  ignored: number;
}
const empty = (): Tally => ({ killed: 0, timeout: 0, survived: 0, noCoverage: 0, ignored: 0 });
const field: Record<string, keyof Tally> = {
  Killed: 'killed',
  Timeout: 'timeout',
  Survived: 'survived',
  NoCoverage: 'noCoverage',
  Ignored: 'ignored',
};

function row(name: string, tally: Tally, target: number | null): string {
  const detected = tally.killed + tally.timeout;
  const valid = detected + tally.survived + tally.noCoverage;
  const score = valid === 0 ? Number.NaN : (100 * detected) / valid;
  const shown = Number.isNaN(score) ? 'n/a' : `${score.toFixed(1)} %`;
  const met = target === null || Number.isNaN(score) ? '–' : score >= target ? 'yes' : '**no**';
  return `| ${name} | ${shown} | ${detected} / ${valid} | ${tally.timeout} | ${tally.survived} | ${tally.noCoverage} | ${tally.ignored} | ${target === null ? '–' : `${target} %`} | ${met} |`;
}

const total = empty();
const rows: string[] = [];
for (const [path, { mutants }] of Object.entries(report.files).sort(([a], [b]) => a.localeCompare(b))) {
  const file = path.startsWith(SRC) ? path.slice(SRC.length) : path;
  const tally = empty();
  for (const mutant of mutants) {
    const key = field[mutant.status];
    if (key) {
      tally[key] += 1;
      total[key] += 1;
    }
  }
  if (mutants.length > 0) rows.push(row(`\`${file}\``, tally, targetOf(file)));
}
console.log(
  '| file | score | detected / mutants | of them timed out | survived | no test reached | static (skipped) | target | met |',
);
console.log('|---|---|---|---|---|---|---|---|---|');
for (const line of rows) console.log(line);
console.log(row('**all of src/**', total, null));
