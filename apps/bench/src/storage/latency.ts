/** Latency samples and their summary (nearest-rank percentiles, milliseconds). */

export interface TimedSample {
  /** performance.now() when the operation started. */
  at: number;
  ms: number;
}

export interface LatencySummary {
  count: number;
  p50: number;
  p99: number;
  worst: number;
  mean: number;
}

export function summarize(latencies: readonly number[]): LatencySummary {
  const sorted = [...latencies].sort((a, b) => a - b);
  const count = sorted.length;
  if (count === 0) return { count, p50: Number.NaN, p99: Number.NaN, worst: Number.NaN, mean: Number.NaN };
  const rank = (fraction: number) =>
    sorted[Math.min(count - 1, Math.ceil(fraction * count) - 1)] ?? Number.NaN;
  return {
    count,
    p50: rank(0.5),
    p99: rank(0.99),
    worst: sorted[count - 1] ?? Number.NaN,
    mean: sorted.reduce((sum, value) => sum + value, 0) / count,
  };
}

/** The samples that started inside [from, to). */
export function within(samples: readonly TimedSample[], from: number, to: number): number[] {
  return samples.filter((sample) => sample.at >= from && sample.at < to).map((sample) => sample.ms);
}

export function formatMs(value: number): string {
  if (!Number.isFinite(value)) return '–';
  return value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2);
}

export function formatSummary(summary: LatencySummary): string {
  return `p50 ${formatMs(summary.p50)} ms, p99 ${formatMs(summary.p99)} ms, worst ${formatMs(summary.worst)} ms (n=${summary.count})`;
}
