/**
 * Issue 14's table, as one `pnpm bench` run measures it: each figure with its target and the "before" column
 * (the issue's own measurement of main on 2026-12-01, same harness and machine kind), written to
 * docs/bench-results.json and into docs/BENCHMARKS.md between two marker lines.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from './repository.ts';
import { median } from './stats.ts';

/** What the table says of a figure besides its measurement: its target, and its "before" where it has one. */
export interface FigureTarget {
  /** The same figure before issue 14 (main, 2026-12-01); absent for figures that are new. */
  before?: number;
  unit?: string;
  /** As the table shows it: "≤ 1.10", or `'info'` for a figure with no target. */
  target: string;
  /** For the verdict and the chart: the target's bound and whether the value must stay below it. */
  bound: number;
  upper: boolean;
}

/** A row of the table: a figure as measured, judged against its target. */
export interface Figure extends FigureTarget {
  id: string;
  label: string;
  value: number;
  met: boolean;
  detail: string;
  /**
   * What the figure was made of: its value in each run (or round) it is the median of, in run order — NaN where
   * a run had none (e.g. P4 in a round where the peer's added cost was ≤ 0) — or `'exact'`: one measurement with
   * no run-to-run noise (a bundle's size). A figure measured once has one run.
   */
  runs: number[] | 'exact';
}

/** A figure's spread: the smallest and largest of its runs' values (non-finite ones left out). */
export interface Spread {
  min: number;
  max: number;
  /** Runs with a finite value (the spread is over these). */
  finite: number;
}

/** The spread of `runs`: null when no run has a finite value; `'exact'` stays `'exact'`. */
export function spreadOf(runs: Figure['runs']): Spread | 'exact' | null {
  if (runs === 'exact') return 'exact';
  const finite = runs.filter((value) => Number.isFinite(value));
  if (finite.length === 0) return null;
  return { min: Math.min(...finite), max: Math.max(...finite), finite: finite.length };
}

/** A target the value must not exceed: its bound as the table writes it ("1.10"), in `unit` if it has one. */
function atMost(bound: string, unit?: string): FigureTarget {
  return {
    ...(unit ? { unit } : {}),
    target: `≤ ${bound}${unit ? ` ${unit}` : ''}`,
    bound: Number(bound),
    upper: true,
  };
}

/** A target the value must reach: its bound as the table writes it ("0.90"). */
function atLeast(bound: string): FigureTarget {
  return { target: `≥ ${bound}`, bound: Number(bound), upper: false };
}

/** A figure shown for information: always met; its bar is drawn against 1 (a ratio's "no difference"). */
const INFORMATION: FigureTarget = { target: 'info', bound: 1, upper: true };

/**
 * Every figure of the table by its id, with issue 14's targets and "before" column: `pnpm bench` on main,
 * 2026-12-01 (P7: main after issues 12 and 15, 4.88 kB).
 */
const TARGETS = {
  P1: { before: 1.39, ...atMost('1.10') },
  peers: { before: 2.01, ...atMost('1.20') },
  P4: { before: 6, ...atMost('1.0') },
  P2: { before: 0.74, ...atLeast('0.90') },
  P3: { before: 0.78, ...atMost('0.35') },
  // One execution of the burst; judged as at most one: a second execution is what the figure catches.
  'P5-executions': { target: '= 1', bound: 1, upper: true },
  P5: { before: 1.39, ...atMost('0.6') },
  P6: { before: 228, ...atMost('50', 'ms') },
  P7: { before: 4.88, ...atMost('3.0', 'kB') },
  checkout: INFORMATION,
  'job-dedupe': INFORMATION,
  floor: INFORMATION,
  'floor-loaded': INFORMATION,
  'floor-bare-loaded': INFORMATION,
} satisfies Record<string, FigureTarget>;

export type FigureId = keyof typeof TARGETS;

/**
 * A figure as a section measured it; its target comes from TARGETS by its id. Its value is the median of `runs`
 * unless the spec gives another (P4: a ratio of two medians; P5's executions: the largest count), and `'exact'`
 * needs the value.
 */
export type FigureSpec = { id: FigureId; label: string; detail: string } & (
  | { runs: number[]; value?: number }
  | { runs: 'exact'; value: number }
);

export function figure({ detail, ...measured }: FigureSpec): Figure {
  const target: FigureTarget = TARGETS[measured.id];
  const value = measured.value ?? (measured.runs === 'exact' ? Number.NaN : median(measured.runs));
  const met = target === INFORMATION ? true : target.upper ? value <= target.bound : value >= target.bound;
  return { ...measured, ...target, detail, value, met };
}

export function formatValue(value: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  return Number.isInteger(value) ? String(value) : value.toFixed(value >= 100 ? 0 : value >= 10 ? 1 : 2);
}

/** A difference in ms with its sign: "+0.47 ms", "−0.10 ms" (not "+-0.10 ms"). */
export function signedMs(ms: number): string {
  return `${ms < 0 ? '−' : '+'}${Math.abs(ms).toFixed(2)} ms`;
}

/**
 * A figure's value with its spread, as the table shows it: "0.85 (0.80–0.90, 5 runs)", "4.65 kB (exact)",
 * "21.1 ms (1 run)"; "(0.80–0.90, 4 of 5 runs)" when a run had no value. `bold` wraps the value in `**`.
 */
export function formatWithSpread(
  { value, unit, runs }: Pick<Figure, 'value' | 'unit' | 'runs'>,
  bold = false,
): string {
  const u = unit ? ` ${unit}` : '';
  const shown = bold ? `**${formatValue(value)}${u}**` : `${formatValue(value)}${u}`;
  const spread = spreadOf(runs);
  if (spread === 'exact') return `${shown} (exact)`;
  const total = runs.length;
  if (spread === null) return `${shown} (no run had a value)`;
  const counted =
    spread.finite === total ? `${total} run${total === 1 ? '' : 's'}` : `${spread.finite} of ${total} runs`;
  if (total === 1) return `${shown} (${counted})`;
  return `${shown} (${formatValue(spread.min)}–${formatValue(spread.max)}${u}, ${counted})`;
}

const START =
  '<!-- pnpm bench: issue 14 summary, generated — edits between these markers are overwritten -->';
const END = '<!-- end of the generated summary -->';

export function summaryMarkdown(figures: Figure[], context: string): string {
  const lines = [
    context,
    '',
    '| figure | before (issue 14) | now (this run: median (min–max, runs)) | target | met | detail |',
    '|---|---|---|---|---|---|',
    ...figures.map((f) => {
      const unit = f.unit ? ` ${f.unit}` : '';
      const before = f.before === undefined ? '–' : `${formatValue(f.before)}${unit}`;
      const met = f.target === 'info' ? '–' : f.met ? 'yes' : '**no**';
      return `| ${f.label} | ${before} | ${formatWithSpread(f, true)} | ${f.target} | ${met} | ${tableCell(f.detail)} |`;
    }),
  ];
  return lines.join('\n');
}

/** A detail as one Markdown table cell: a section's failure message may span lines or hold a pipe. */
export function tableCell(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').replaceAll('|', '\\|');
}

/**
 * Replaces a generated block of docs/BENCHMARKS.md, the one between `markers` (issue 14's summary by default), or
 * adds it after the title when it is missing.
 */
export function writeSummaryIntoBenchmarks(markdown: string, markers = { start: START, end: END }): void {
  const file = path.join(repoRoot, 'docs/BENCHMARKS.md');
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmarks\n';
  const block = `${markers.start}\n${markdown}\n${markers.end}`;
  const start = text.indexOf(markers.start);
  const end = text.indexOf(markers.end);
  const next =
    start >= 0 && end > start
      ? `${text.slice(0, start)}${block}${text.slice(end + markers.end.length)}`
      : text.replace(/^# .*\n/, (title) => `${title}\n${block}\n`);
  writeFileSync(file, next);
}
