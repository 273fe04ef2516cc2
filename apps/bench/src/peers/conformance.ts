/**
 * `pnpm bench:conformance`: `idem-conformance` (packages/conformance) against every contender's protected route,
 * on the same handler (`{ "n": <int> }` → one `bench_effects` row, `{ id, at }`): one table of checks ×
 * contenders, and per profile whether each passes. Prints it and writes it between the conformance markers of
 * docs/BENCHMARKS.md. The routes have no principals (`--no-auth`; the scope check needs two). Needs Redis for
 * the Redis-backed peers (BENCH_REDIS_URL, as `pnpm bench:peers`).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  type CliReport,
  PROFILES,
  type ProfileName,
  parseCliOptions,
  runConformanceCli,
} from '@idem/conformance';
import { repoRoot } from '../repository.ts';
import { KEY_PREFIX, type PeerSettings, readPeerSettings } from './config.ts';
import { arms } from './contenders.ts';
import { startServerProcess } from './processes.ts';
import { withRedis } from './redis-keys.ts';
import { withPeersDatabase } from './scratch-database.ts';

const CONTENDERS = ['idem', 'node-idempotency', 'express-idempotency', 'powertools'] as const;
const DOC = path.join(repoRoot, 'docs/BENCHMARKS.md');
const START = '<!-- conformance:start -->';
const END = '<!-- conformance:end -->';

function log(line: string): void {
  console.log(`[bench:conformance] ${line}`);
}

/** Where a success body names the effect: tRPC wraps the handler's `{ id, at }` in its result envelope. */
const EFFECT_POINTER: Record<(typeof CONTENDERS)[number], string> = {
  idem: '/result/data/id',
  'node-idempotency': '/id',
  'express-idempotency': '/id',
  powertools: '/id',
};

/** One run per profile: each judges by its own rules (draft-07 infers replays from repeated effect ids). */
async function checkContender(url: string, effectPointer: string): Promise<Record<ProfileName, CliReport>> {
  const reports: Partial<Record<ProfileName, CliReport>> = {};
  for (const profile of Object.keys(PROFILES) as ProfileName[]) {
    const args = [
      url,
      '--effect-pointer',
      effectPointer,
      '--body',
      '{"n": 1}',
      '--no-auth',
      '--profile',
      profile,
    ];
    const options = parseCliOptions(args);
    if (options === 'help') throw new Error('unreachable: no --help given');
    reports[profile] = await runConformanceCli(options);
  }
  return reports as Record<ProfileName, CliReport>;
}

/** The checks as the idem profile ran them (replays told by their header), then each profile's verdict. */
function table(reports: ReadonlyArray<readonly [string, Record<ProfileName, CliReport>]>): string {
  const mark = { pass: 'pass', fail: '**fail**', 'not covered': '–' } as const;
  const ids = [...new Set(reports.flatMap(([, byProfile]) => byProfile.idem.rows.map((row) => row.id)))];
  const header = `| check | ${reports.map(([label]) => label).join(' | ')} |`;
  const rule = `|---|${reports.map(() => '---').join('|')}|`;
  const rows = ids.map((id) => {
    const cells = reports.map(([, byProfile]) => {
      const row = byProfile.idem.rows.find((each) => each.id === id);
      return row ? mark[row.result] : '–';
    });
    return `| \`${id}\` | ${cells.join(' | ')} |`;
  });
  const profiles = (Object.keys(PROFILES) as ProfileName[]).map((profile) => {
    const cells = reports.map(([, byProfile]) => (byProfile[profile].passed ? 'passes' : '**fails**'));
    return `| profile \`${profile}\` | ${cells.join(' | ')} |`;
  });
  return [header, rule, ...rows, ...profiles].join('\n');
}

/**
 * Runs the section on `databaseUrl` (migrated, with `bench_effects`): each contender's server in turn, the table
 * printed and written between the conformance markers of docs/BENCHMARKS.md. `pnpm bench:peers` runs it too.
 */
export async function runConformanceSection(
  databaseUrl: string,
  settings: PeerSettings,
  log: (line: string) => void,
): Promise<void> {
  const env = {
    DATABASE_URL: databaseUrl,
    BENCH_REDIS_URL: settings.redisUrl,
    BENCH_PEERS_POOL: String(settings.poolSize),
    BENCH_PEERS_KEY_PREFIX: KEY_PREFIX,
  };
  const reports: Array<readonly [string, Record<ProfileName, CliReport>]> = [];
  for (const contender of CONTENDERS) {
    const arm = arms[contender];
    const server = await startServerProcess(
      arm.server,
      'conformance',
      env,
      process.env.BENCH_VERBOSE === '1',
    );
    try {
      log(`conformance: ${arm.label}: ${server.url}${arm.path}`);
      const byProfile = await checkContender(`${server.url}${arm.path}`, EFFECT_POINTER[contender]);
      for (const [profile, report] of Object.entries(byProfile))
        for (const row of report.rows.filter((each) => each.result === 'fail' && each.required))
          log(`  ${profile}: fail ${row.id}: ${row.detail.replace(/\n/g, ' ').slice(0, 200)}`);
      reports.push([arm.label, byProfile]);
    } finally {
      await server.stop();
    }
  }
  await withRedis(settings.redisUrl, (redis) => redis.deleteByPrefix(KEY_PREFIX));
  const date = new Date().toISOString().slice(0, 16).replace('T', ' ');
  const block = `${START}\nMeasured ${date} UTC by \`pnpm bench:conformance\` (also part of \`pnpm bench:peers\`).\n\n${table(reports)}\n${END}`;
  console.log(`\n${block}`);
  const doc = readFileSync(DOC, 'utf8');
  const at = doc.indexOf(START);
  const end = doc.indexOf(END);
  if (at < 0 || end < at) throw new Error(`${DOC} has no ${START} … ${END} block`);
  writeFileSync(DOC, `${doc.slice(0, at)}${block}${doc.slice(end + END.length)}`);
  log('wrote the conformance table into docs/BENCHMARKS.md');
}

async function main() {
  const settings = readPeerSettings();
  await withPeersDatabase(log, (databaseUrl) => runConformanceSection(databaseUrl, settings, log));
}

// Run as a script (`pnpm bench:conformance`), not when bench:peers imports the section.
if (import.meta.url === `file://${process.argv[1]}`)
  main().catch((error: unknown) => {
    console.error(`[bench:conformance] ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  });
