/**
 * `pnpm test:mutation:survivors [report.json]`: every mutant of the last `pnpm test:mutation` run that no test
 * detected (survived, or reached by no test), one line each — `file:line mutator → replacement | the line` —
 * for triage: a missing test, dead code, or an equivalent mutant to list in docs/RELIABILITY.md.
 */
import { readFileSync } from 'node:fs';

interface Mutant {
  mutatorName: string;
  replacement?: string;
  status: string;
  location: { start: { line: number } };
}
interface Report {
  files: Record<string, { source: string; mutants: Mutant[] }>;
}

const reportPath = process.argv[2] ?? 'reports/mutation/mutation.json';
const report = JSON.parse(readFileSync(reportPath, 'utf8')) as Report;
const undetected = new Set(['Survived', 'NoCoverage']);
let count = 0;
for (const [file, { source, mutants }] of Object.entries(report.files)) {
  const lines = source.split('\n');
  for (const mutant of mutants) {
    if (!undetected.has(mutant.status)) continue;
    count += 1;
    const line = mutant.location.start.line;
    const replacement = (mutant.replacement ?? '').replace(/\s+/g, ' ').slice(0, 60);
    const code = (lines[line - 1] ?? '').trim().slice(0, 80);
    console.log(`${file}:${line} ${mutant.status} ${mutant.mutatorName} → ${replacement} | ${code}`);
  }
}
console.log(`${count} undetected mutant(s) in ${reportPath}`);
