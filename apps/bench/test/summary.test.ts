/** The generated table of `pnpm bench`: one row per figure, whatever a figure's detail says, each with its spread. */
import { describe, expect, it } from 'vitest';
import { figureRecord } from '../src/report.ts';
import { figure, formatWithSpread, signedMs, spreadOf, summaryMarkdown } from '../src/summary.ts';

// P4's target is ≤ 1.0.
const base = { id: 'P4', label: 'X', detail: '' } as const;

describe('summaryMarkdown', () => {
  it('keeps a failed section’s multi-line message inside its row (the P6 row of 13:47 broke the table)', () => {
    const failed = figure({
      id: 'P6',
      label: 'P6 worst claim',
      runs: [228],
      detail:
        'kept from the last run; this run failed:\nInvalid `prisma.$executeRawUnsafe()` invocation:\n\n\nA | B',
    });
    const rows = summaryMarkdown([failed], 'context').split('\n').slice(2);
    expect(rows).toHaveLength(3); // header, rule, the one figure
    expect(rows[2]).toBe(
      '| P6 worst claim | 228 ms | **228 ms** (1 run) | ≤ 50 ms | **no** | kept from the last run; this run failed: Invalid `prisma.$executeRawUnsafe()` invocation: A \\| B |',
    );
  });

  it('shows each figure as its median with the min–max of its runs', () => {
    const p2 = figure({ ...base, runs: [0.9, 0.8, 0.85, 0.83, 0.88] });
    expect(p2.value).toBe(0.85);
    const row = summaryMarkdown([p2], 'context').split('\n')[4];
    expect(row).toContain('| **0.85** (0.80–0.90, 5 runs) |');
  });
});

describe('figure', () => {
  it('takes the median of its runs unless given another value', () => {
    expect(figure({ ...base, runs: [3, 1, 2] }).value).toBe(2);
    expect(figure({ ...base, runs: [1, 2, 1], value: 2 }).value).toBe(2);
    expect(figure({ ...base, runs: 'exact', value: 4.65 }).value).toBe(4.65);
  });

  it('judges the target on the value, not on the runs', () => {
    expect(figure({ ...base, runs: [0.5, 0.9, 1.5] }).met).toBe(true);
    expect(figure({ ...base, runs: [0.5, 1.1, 1.5] }).met).toBe(false);
  });
});

describe('spreadOf', () => {
  it('is the min and max of the finite runs', () => {
    expect(spreadOf([0.9, Number.NaN, 0.7, 1.2])).toEqual({ min: 0.7, max: 1.2, finite: 3 });
  });

  it('is null when no run had a value, and exact stays exact', () => {
    expect(spreadOf([Number.NaN])).toBeNull();
    expect(spreadOf([])).toBeNull();
    expect(spreadOf('exact')).toBe('exact');
  });
});

describe('formatWithSpread', () => {
  it('says "exact" for a single measurement without noise', () => {
    expect(formatWithSpread({ value: 4.654296875, unit: 'kB', runs: 'exact' })).toBe('4.65 kB (exact)');
  });

  it('says "1 run" for a figure measured once', () => {
    expect(formatWithSpread({ value: 21.1, unit: 'ms', runs: [21.1] })).toBe('21.1 ms (1 run)');
  });

  it('carries the unit into the range and counts the runs that had no value', () => {
    expect(formatWithSpread({ value: 2, unit: 'ms', runs: [1, 2, 3] })).toBe('2 ms (1–3 ms, 3 runs)');
    expect(formatWithSpread({ value: 1.1, runs: [0.9, Number.NaN, 1.3] })).toBe(
      '1.10 (0.90–1.30, 2 of 3 runs)',
    );
    expect(formatWithSpread({ value: Number.NaN, runs: [Number.NaN, Number.NaN] })).toBe(
      'n/a (no run had a value)',
    );
  });

  it('bolds the value only', () => {
    expect(formatWithSpread({ value: 0.5, runs: [0.4, 0.6] }, true)).toBe('**0.50** (0.40–0.60, 2 runs)');
  });
});

describe('signedMs', () => {
  it('writes one sign (the checkout row of 08:22 read "+-1.98 ms")', () => {
    expect(signedMs(0.47)).toBe('+0.47 ms');
    expect(signedMs(-1.98)).toBe('−1.98 ms');
    expect(signedMs(0)).toBe('+0.00 ms');
  });
});

describe('figureRecord', () => {
  it('writes the runs and their spread, not the chart’s bound', () => {
    const record = figureRecord(figure({ ...base, runs: [1, Number.NaN, 3] }));
    expect(record).not.toHaveProperty('bound');
    expect(record.spread).toEqual({ min: 1, max: 3, finite: 2 });
    expect(JSON.parse(JSON.stringify(record)).runs).toEqual([1, null, 3]);
  });
});
