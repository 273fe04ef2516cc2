/** The generated table of `pnpm bench`: one row per figure, whatever a figure's detail says. */
import { describe, expect, it } from 'vitest';
import { figure, summaryMarkdown } from '../src/summary.ts';

describe('summaryMarkdown', () => {
  it('keeps a failed section’s multi-line message inside its row (the P6 row of 13:47 broke the table)', () => {
    const failed = figure({
      id: 'P6',
      label: 'P6 worst claim',
      value: 228,
      target: '≤ 50 ms',
      bound: 50,
      upper: true,
      detail:
        'kept from the last run; this run failed:\nInvalid `prisma.$executeRawUnsafe()` invocation:\n\n\nA | B',
    });
    const rows = summaryMarkdown([failed], 'context').split('\n').slice(2);
    expect(rows).toHaveLength(3); // header, rule, the one figure
    expect(rows[2]).toBe(
      '| P6 worst claim | – | **228** | ≤ 50 ms | **no** | kept from the last run; this run failed: Invalid `prisma.$executeRawUnsafe()` invocation: A \\| B |',
    );
  });
});
