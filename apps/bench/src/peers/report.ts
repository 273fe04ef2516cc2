/** The peers section as Markdown: the cost table, the correctness table, the baselines and the settings. */
import type { ArmSummary, PeersResult, PeersSkipped, Probe, VariantSummary } from './results.ts';

const ms = (value: number | undefined) =>
  value !== undefined && Number.isFinite(value) ? `${value.toFixed(2)} ms` : 'n/a';
const ratio = (value: number | undefined) =>
  value !== undefined && Number.isFinite(value) ? value.toFixed(2) : 'n/a';
const rps = (value: number) => (Number.isFinite(value) ? `${value.toFixed(0)}` : 'n/a');

function costRow(arm: ArmSummary): string {
  return `| ${arm.label} | ${arm.store} | ${ms(arm.p1Ms)} | **${ratio(arm.p1Ratio)}** | ${ratio(arm.p1RatioVsNone)} | ${rps(arm.p2Rps)} | **${ratio(arm.p2Ratio)}** | ${ratio(arm.p2RatioVsNone)} | ${ratio(arm.replayRatio)} (${ms(arm.replayP50)} / ${ms(arm.firstP50)}) |`;
}

/** "1 in every run" or the per-run list. */
function executions(perRun: number[]): string {
  if (perRun.length === 0) return 'n/a';
  const [first] = perRun;
  return perRun.every((value) => value === first) ? `**${first}** in every run` : `**${perRun.join(', ')}**`;
}

/** Each status code with its min–max count over the runs. */
function statusRanges(perRun: Array<Record<string, number>>): string {
  const codes = [...new Set(perRun.flatMap((statuses) => Object.keys(statuses)))].sort();
  return codes
    .map((code) => {
      const counts = perRun.map((statuses) => statuses[code] ?? 0);
      const low = Math.min(...counts);
      const high = Math.max(...counts);
      return `${code}×${low === high ? low : `${low}–${high}`}`;
    })
    .join(', ');
}

function errorName(body: string): string {
  const match = /"(?:error|code)"\s*:\s*"([^"]+)"/.exec(body) ?? /"message"\s*:\s*"([^"]{0,60})/.exec(body);
  return match?.[1] ?? body.slice(0, 60);
}

function retryCell(probe: Probe): string {
  const { identicalRetry: retry } = probe;
  if (retry.status === 200)
    return `${retry.status}${retry.sameBodyAsFirst ? ', same body' : ', DIFFERENT body'}${retry.rowsWritten ? `, ran again (${retry.rowsWritten} row)` : ''}`;
  return `**${retry.status}** \`${errorName(retry.body)}\`${retry.rowsWritten ? `, ran again (${retry.rowsWritten} row)` : ''}`;
}

function mismatchCell(probe: Probe): string {
  const { mismatchedPayload: other } = probe;
  if (other.status === 200 && other.sameBodyAsFirst)
    return `**200 with the first request's result**; the new payload did not run`;
  if (other.status === 200) return `**200, the new payload ran** (${other.rowsWritten} row)`;
  return `${other.status} \`${errorName(other.body)}\`${other.rowsWritten ? `, yet ran (${other.rowsWritten} row)` : ''}`;
}

function correctnessRow(variant: VariantSummary): string {
  const one = `${executions(variant.oneInstance.executionsPerRun)} (${statusRanges(variant.oneInstance.statusesPerRun)})`;
  const two = variant.twoInstances
    ? `${executions(variant.twoInstances.executionsPerRun)} (${statusRanges(variant.twoInstances.statusesPerRun)})`
    : 'not run';
  return `| ${variant.label} | ${one} | ${two} | ${retryCell(variant.probe)} | ${mismatchCell(variant.probe)} |`;
}

export function formatPeersReport(result: PeersResult | PeersSkipped): string {
  if ('skipped' in result) return `Peers section skipped: ${result.skipped}`;
  const { settings } = result;
  const protectedArms = result.arms.filter((arm) => arm.baseline !== null);
  const baselines = result.arms.filter((arm) => arm.baseline === null);
  const failures = result.arms.filter((arm) => arm.failures > 0);
  return [
    `Cost (median of ${settings.runs} runs; ratios are medians of per-run ratios; P1 ${settings.p1Seconds} s and P2 ${settings.p2Seconds} s per arm per run):`,
    '',
    '| contender | records in | p50 @1 conn | ÷ own framework unprotected | ÷ plain node:http | req/s @32 conn | ÷ own framework unprotected | ÷ plain node:http | replay p50 / first p50 |',
    '|---|---|---|---|---|---|---|---|---|',
    ...protectedArms.map(costRow),
    '',
    `Unprotected baselines (same handler, same run): ${baselines.map((arm) => `${arm.label} ${ms(arm.p1Ms)} p50, ${rps(arm.p2Rps)} req/s`).join('; ')}.`,
    `Rows written by replays: ${protectedArms.map((arm) => `${arm.id} ${arm.replayRows ?? 0}`).join(', ')} (${settings.replayKeys} keys primed then replayed per run).`,
    ...(failures.length > 0
      ? [
          `Non-2xx or connection errors while timed: ${failures.map((arm) => `${arm.id} ${arm.failures}`).join(', ')}.`,
        ]
      : ['No non-2xx answer or connection error while timed.']),
    '',
    `Correctness (${settings.burst} requests with ONE key at once; executions = \`bench_effects\` rows written; statuses as min–max over the runs):`,
    '',
    `| contender | ${settings.burst} same-key, 1 process | split over 2 processes | identical retry after completion | same key, different payload |`,
    '|---|---|---|---|---|',
    ...result.variants.map(correctnessRow),
    '',
    `Machine: ${result.machine.cpus} cores, Node ${result.machine.node}, PostgreSQL ${result.machine.postgres}, Redis ${result.machine.redis}; ${Object.entries(
      result.versions,
    )
      .map(([name, version]) => `${name} ${version}`)
      .join(', ')}; ${result.seconds} s.`,
  ].join('\n');
}
