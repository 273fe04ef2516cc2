/**
 * The example passes the conformance kit: a scratch database of its own, migrated with the example's own
 * migration through the Prisma CLI, the example's server on a free port, and every check of
 * `@idem/idempotency/testing` as one test.
 *
 * The database server: the root test run's (`inject('postgresAdminUrl')`), else DATABASE_URL's. Faults are
 * injected from outside the app, in Postgres: a table lock holds a request in flight until the check lets it
 * go, a trigger fails one.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { runConformanceCommand } from '@idem/conformance';
import { createPrismaIdempotencyStore } from '@idem/idempotency/prisma';
import {
  type ConformanceTarget,
  type ExecutionGate,
  registerIdempotencyConformance,
} from '@idem/idempotency/testing';
import pg from 'pg';
import superjson from 'superjson';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { demoTokens } from '../src/auth.ts';
import { createDatabase, type Database } from '../src/db.ts';
import { createServer } from '../src/server.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Provided by the repository's root vitest global setup (tests/setup/database.ts). */
    postgresAdminUrl: string;
  }
}

const exampleDir = path.resolve(import.meta.dirname, '..');
const databaseName = `idem_example_minimal_${randomBytes(4).toString('hex')}`;
const [alice, bob] = Object.entries(demoTokens).map(([token, principal]) => ({ token, principal }));
/** Alice already has a note with this text: writing it again is the business error the kit replays. */
const TAKEN_TEXT = 'already taken';

let adminUrl: string;
let databaseUrl: string;
let db: Database;
let server: ReturnType<typeof createServer> | undefined;
let baseUrl: string | undefined;

function serverUrl(): string {
  const injected: string | undefined = inject('postgresAdminUrl');
  const url = injected ?? process.env.DATABASE_URL;
  if (!url) throw new Error('Set DATABASE_URL to a Postgres server where this test may create a database.');
  return url;
}

function withDatabase(url: string, name: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}

/** Runs SQL on a connection of its own (the fault injections must not share the app's pool). */
async function withClient<T>(url: string, body: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await body(client);
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  adminUrl = serverUrl();
  databaseUrl = withDatabase(adminUrl, databaseName);
  await withClient(adminUrl, (client) => client.query(`create database "${databaseName}"`));

  // The example's own migration, through the Prisma CLI and the example's prisma.config.ts (offline engine).
  const migrate = spawnSync(
    process.execPath,
    [path.join(exampleDir, 'node_modules/prisma/build/index.js'), 'migrate', 'deploy'],
    {
      cwd: exampleDir,
      env: { ...process.env, DATABASE_URL: databaseUrl, PRISMA_HIDE_UPDATE_MESSAGE: '1' },
      encoding: 'utf8',
    },
  );
  if (migrate.status !== 0)
    throw new Error(`prisma migrate deploy failed:\n${migrate.stdout}${migrate.stderr}`);
  // A broken engine path can exit 0 having done nothing: check the database itself.
  const applied = await withClient(databaseUrl, (client) =>
    client.query<{ migration_name: string }>(
      'select migration_name from _prisma_migrations where finished_at is not null and rolled_back_at is null',
    ),
  );
  expect(applied.rows.map((row) => row.migration_name)).toEqual(['20261130040000_init']);

  db = createDatabase(databaseUrl);
  await db.note.create({ data: { author: alice?.principal ?? '', text: TAKEN_TEXT } });
  server = createServer(db);
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}, 120_000);

afterAll(async () => {
  if (server) {
    server.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
  }
  await db?.$disconnect();
  if (adminUrl) {
    await withClient(adminUrl, (client) =>
      client.query(`drop database if exists "${databaseName}" with (force)`),
    );
  }
});

/**
 * Holds every note INSERT behind a table lock until the check releases it, so a request stays in flight for as
 * long as the check needs; `reached(n)` resolves once n backends wait for that lock.
 */
async function withNotesHeld<T>(run: (gate: ExecutionGate) => Promise<T>): Promise<T> {
  return withClient(databaseUrl, async (locker) => {
    await locker.query('begin');
    await locker.query('lock table notes in share mode');
    let released: Promise<unknown> | undefined;
    const release = async () => {
      released ??= locker.query('commit');
      await released;
    };
    const waiting = async () => {
      const { rows } = await locker.query<{ n: number }>(
        "select count(*)::int as n from pg_locks where relation = 'notes'::regclass and not granted",
      );
      return rows[0]?.n ?? 0;
    };
    try {
      return await run({
        reached: async (count) => {
          while ((await waiting()) < count) await new Promise((resolve) => setTimeout(resolve, 20));
        },
        release,
      });
    } finally {
      await release();
    }
  });
}

/** A trigger that makes every note INSERT fail (a database error: 500, not stored) while `run` runs. */
async function withNoteInsertsFailing<T>(run: () => Promise<T>): Promise<T> {
  await withClient(databaseUrl, (client) =>
    client.query(`
      create or replace function conformance_outage() returns trigger language plpgsql as
        $$ begin raise exception 'simulated outage'; end $$;
      create trigger conformance_outage before insert on notes
        for each row execute function conformance_outage();`),
  );
  try {
    return await run();
  } finally {
    await withClient(databaseUrl, (client) => client.query('drop trigger conformance_outage on notes'));
  }
}

let noteNumber = 0;
const target: ConformanceTarget<{ text: string }> = {
  get url() {
    if (!baseUrl) throw new Error('the server has not started');
    return `${baseUrl}/trpc`;
  },
  procedure: 'notes.create',
  // A new text per key: an author cannot write the same text twice.
  input: () => ({ text: `note ${++noteNumber}` }),
  differentInput: () => ({ text: `another note ${++noteNumber}` }),
  invalidInput: () => ({ text: '' }),
  serialize: superjson.serialize,
  principals: [
    { headers: { authorization: `Bearer ${alice?.token}` }, scope: alice?.principal },
    { headers: { authorization: `Bearer ${bob?.token}` }, scope: bob?.principal },
  ],
  unauthenticatedHeaders: {},
  executions: () => db.note.count(),
  businessErrorInput: () => ({ text: TAKEN_TEXT }),
  withHeldExecutions: withNotesHeld,
  withTransientFailure: withNoteInsertsFailing,
  // Transactional mode: no inFlightCap (a claim is invisible to the count until it commits).
  get store() {
    return db ? createPrismaIdempotencyStore(db) : undefined;
  },
};

registerIdempotencyConformance(
  target,
  { describe, it },
  {
    name: 'examples/minimal: notes.create conforms',
    onResult: (result) =>
      console.log(`[conformance] ${result.id} (${result.durationMs} ms): ${result.detail}`),
  },
);

describe('examples/minimal: idem-conformance, the black-box command', () => {
  it('passes every check it can run from outside but the problem documents (tRPC error envelopes)', async () => {
    const note = (text: string) => JSON.stringify({ json: { text } });
    const { report } = await runConformanceCommand([
      `${target.url}/notes.create`,
      ...['--effect-pointer', '/result/data/json/id', '--profile', 'draft-07', '--json'],
      ...[
        '--body',
        note('black box {{uuid}}'),
        '--other-body',
        note('another {{uuid}}'),
        '--invalid-body',
        note(''),
      ],
      ...['--business-error-body', note(TAKEN_TEXT)],
      ...[
        '--header',
        `Authorization: Bearer ${alice?.token}`,
        '--other-header',
        `Authorization: Bearer ${bob?.token}`,
      ],
    ]);
    const failed = report?.rows.filter((row) => row.result === 'fail').map((row) => row.id);
    expect(failed?.sort()).toEqual(['docs-link', 'problem-details']);
    expect(report?.rows.filter((row) => row.result === 'pass').map((row) => row.id)).toEqual(
      expect.arrayContaining([
        'first-request',
        'replay',
        'fingerprint',
        'concurrency',
        'scope',
        'stored-error',
      ]),
    );
  });
});
