/**
 * docs/bench-chart.svg: one bar per figure against its target, then the throughput curve — protected and
 * unprotected req/s at 1, 8, 32 and 128 connections (logarithmic x axis).
 */
import { type Figure, formatValue, spreadOf } from './summary.ts';

export interface CurvePoint {
  connections: number;
  protectedRps: number;
  unprotectedRps: number;
}

const xml = (text: string) => text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');

export function svgChart(figures: Figure[], curve: CurvePoint[], title: string): string {
  const width = 900;
  const rowHeight = 44;
  // Wide enough for the longest label at 13 px ("peers: Idem on bare tRPC ÷ the same route unprotected").
  const left = 370;
  const barWidth = 400;
  const top = 48;
  const barsHeight = top + figures.length * rowHeight;
  const curveHeight = curve.length > 0 ? 300 : 0;
  const height = barsHeight + curveHeight + 40;
  const rows = figures.map((figure, index) => {
    const y = top + index * rowHeight;
    const value = Number.isFinite(figure.value) ? figure.value : 0;
    const spread = spreadOf(figure.runs);
    const range = spread === 'exact' || spread === null || figure.runs.length < 2 ? null : spread;
    const scale = Math.max(value, figure.bound, range?.max ?? 0, 0.001) * 1.25;
    const w = Math.max(1, (value / scale) * barWidth);
    const at = (v: number) => (left + (Math.max(0, v) / scale) * barWidth).toFixed(1);
    const tx = left + (figure.bound / scale) * barWidth;
    const color = figure.target === 'info' ? '#607d8b' : figure.met ? '#2e7d32' : '#c62828';
    const unit = figure.unit ? ` ${figure.unit}` : '';
    return [
      `<text x="${left - 10}" y="${y + 20}" text-anchor="end">${xml(figure.label)}</text>`,
      `<rect x="${left}" y="${y + 6}" width="${w.toFixed(1)}" height="20" fill="${color}"/>`,
      // The runs' min–max: a whisker across the bar.
      range
        ? `<line x1="${at(range.min)}" y1="${y + 16}" x2="${at(range.max)}" y2="${y + 16}" stroke="#111" stroke-width="1.5"/>` +
          `<line x1="${at(range.min)}" y1="${y + 11}" x2="${at(range.min)}" y2="${y + 21}" stroke="#111" stroke-width="1.5"/>` +
          `<line x1="${at(range.max)}" y1="${y + 11}" x2="${at(range.max)}" y2="${y + 21}" stroke="#111" stroke-width="1.5"/>`
        : '',
      figure.target === 'info'
        ? ''
        : `<line x1="${tx.toFixed(1)}" y1="${y + 1}" x2="${tx.toFixed(1)}" y2="${y + 31}" stroke="#111" stroke-width="2" stroke-dasharray="4 2"/>`,
      `<text x="${(Math.max(left + w, range ? Number(at(range.max)) : 0) + 6).toFixed(1)}" y="${y + 20}">${xml(`${formatValue(figure.value)}${unit} (target ${figure.target})`)}</text>`,
    ].join('\n  ');
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="13">
  <title>${xml(title)}</title>
  <rect width="100%" height="100%" fill="#fff"/>
  <text x="16" y="26" font-size="16" font-weight="bold">${xml(title)}</text>
  ${rows.join('\n  ')}
  ${curve.length > 0 ? curvePanel(curve, barsHeight + 20, width) : ''}
  <text x="16" y="${height - 14}" fill="#555">Bars: measured (green = target met, red = not met, grey = information). Dashed line: the target. Whisker: the runs' min–max.</text>
</svg>
`;
}

function curvePanel(curve: CurvePoint[], y0: number, width: number): string {
  const left = 90;
  const right = width - 180;
  const top = y0 + 30;
  const bottom = y0 + 250;
  const max =
    Math.max(1, ...curve.flatMap((p) => [p.protectedRps, p.unprotectedRps]).filter(Number.isFinite)) * 1.1;
  const logs = curve.map((p) => Math.log2(p.connections));
  const minLog = Math.min(...logs);
  const maxLog = Math.max(...logs, minLog + 1);
  const x = (connections: number) =>
    left + ((Math.log2(connections) - minLog) / (maxLog - minLog)) * (right - left);
  const y = (rps: number) => bottom - (Math.max(0, rps) / max) * (bottom - top);
  const line = (pick: (p: CurvePoint) => number, color: string, label: string, labelDy: number) => {
    const points = curve.map((p) => `${x(p.connections).toFixed(1)},${y(pick(p)).toFixed(1)}`).join(' ');
    const last = curve.at(-1);
    const dots = curve
      .map(
        (p) =>
          `<circle cx="${x(p.connections).toFixed(1)}" cy="${y(pick(p)).toFixed(1)}" r="3" fill="${color}"/>`,
      )
      .join('');
    return `<polyline points="${points}" fill="none" stroke="${color}" stroke-width="2"/>${dots}${
      last
        ? `<text x="${(x(last.connections) + 8).toFixed(1)}" y="${(y(pick(last)) + labelDy).toFixed(1)}" fill="${color}">${xml(label)}</text>`
        : ''
    }`;
  };
  const ticks = curve
    .map(
      (p) =>
        `<text x="${x(p.connections).toFixed(1)}" y="${bottom + 18}" text-anchor="middle">${p.connections}</text>` +
        `<text x="${x(p.connections).toFixed(1)}" y="${bottom + 34}" text-anchor="middle" fill="#555">${formatValue(p.protectedRps / p.unprotectedRps)}</text>`,
    )
    .join('');
  return [
    `<text x="16" y="${y0 + 14}" font-weight="bold">P2 against connections (test server): req/s, protected vs unprotected; ratio under each count</text>`,
    `<line x1="${left}" y1="${bottom}" x2="${right}" y2="${bottom}" stroke="#999"/>`,
    `<line x1="${left}" y1="${top}" x2="${left}" y2="${bottom}" stroke="#999"/>`,
    `<text x="${left - 8}" y="${top + 4}" text-anchor="end">${formatValue(max)}</text>`,
    `<text x="${left - 8}" y="${bottom}" text-anchor="end">0</text>`,
    ticks,
    line((p) => p.unprotectedRps, '#1565c0', 'unprotected', -6),
    line((p) => p.protectedRps, '#ef6c00', 'protected', 14),
  ].join('\n  ');
}
