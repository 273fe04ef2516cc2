/**
 * Issue 14's table, as one `pnpm bench` run measures it: each figure with its target and the "before" column
 * (the issue's own measurement of main on 2026-12-01, same harness and machine kind), written to
 * docs/bench-results.json and into docs/BENCHMARKS.md between two marker lines.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from './repository.ts';

export interface Figure {
  id: string;
  label: string;
  value: number;
  /** The same figure before issue 14 (main, 2026-12-01); absent for figures that are new. */
  before?: number;
  unit?: string;
  target: string;
  met: boolean;
  /** For the chart: the target's bound and whether the value must stay below it. */
  bound: number;
  upper: boolean;
  detail: string;
}

/** Issue 14's "now" column: `pnpm bench` on main, 2026-12-01 (P7: main after issues 12 and 15, 4.88 kB). */
export const BEFORE = {
  P1: 1.39,
  peers: 2.01,
  P4: 6,
  P2: 0.74,
  P3: 0.78,
  P5: 1.39,
  P6: 228,
  P7: 4.88,
} as const;

export function figure(spec: Omit<Figure, 'met'> & { info?: boolean }): Figure {
  const { info, ...rest } = spec;
  const met = info ? true : spec.upper ? spec.value <= spec.bound : spec.value >= spec.bound;
  return { ...rest, met };
}

export function formatValue(value: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  return Number.isInteger(value) ? String(value) : value.toFixed(value >= 100 ? 0 : value >= 10 ? 1 : 2);
}

const START =
  '<!-- pnpm bench: issue 14 summary, generated — edits between these markers are overwritten -->';
const END = '<!-- end of the generated summary -->';

export function summaryMarkdown(figures: Figure[], context: string): string {
  const lines = [
    context,
    '',
    '| figure | before (issue 14) | now (this run) | target | met | detail |',
    '|---|---|---|---|---|---|',
    ...figures.map((f) => {
      const unit = f.unit ? ` ${f.unit}` : '';
      const before = f.before === undefined ? '–' : `${formatValue(f.before)}${unit}`;
      const met = f.target === 'info' ? '–' : f.met ? 'yes' : '**no**';
      return `| ${f.label} | ${before} | **${formatValue(f.value)}${unit}** | ${f.target} | ${met} | ${tableCell(f.detail)} |`;
    }),
  ];
  return lines.join('\n');
}

/** A detail as one Markdown table cell: a section's failure message may span lines or hold a pipe. */
export function tableCell(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').replaceAll('|', '\\|');
}

/** Replaces the generated block of docs/BENCHMARKS.md (or adds it after the title when it is missing). */
export function writeSummaryIntoBenchmarks(markdown: string): void {
  const file = path.join(repoRoot, 'docs/BENCHMARKS.md');
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmarks\n';
  const block = `${START}\n${markdown}\n${END}`;
  const start = text.indexOf(START);
  const end = text.indexOf(END);
  const next =
    start >= 0 && end > start
      ? `${text.slice(0, start)}${block}${text.slice(end + END.length)}`
      : text.replace(/^# .*\n/, (title) => `${title}\n${block}\n`);
  writeFileSync(file, next);
}
