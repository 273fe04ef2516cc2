/** Median of the finite values (NaN when there are none). */
export function median(values: number[]): number {
  const sorted = values.filter((value) => Number.isFinite(value)).sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const middle = Math.floor(sorted.length / 2);
  const high = sorted[middle] ?? Number.NaN;
  return sorted.length % 2 === 1 ? high : ((sorted[middle - 1] ?? high) + high) / 2;
}

/** `items` rotated left by `by` (the round number): each item takes every position in turn. */
export function rotate<T>(items: readonly T[], by: number): T[] {
  if (items.length === 0) return [];
  const shift = by % items.length;
  return [...items.slice(shift), ...items.slice(0, shift)];
}

/** The median of `values` in milliseconds, two decimals: "1.23 ms". */
export function medianMs(values: number[]): string {
  return `${median(values).toFixed(2)} ms`;
}

/**
 * The p50 as the in-process profiles take it: the value at the middle of the sorted values (the upper of the two
 * middle ones for an even count, no averaging); NaN for none.
 */
export function p50(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}
