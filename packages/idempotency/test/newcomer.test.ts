/**
 * A newcomer's first run, from outside the repository: the packed tarball installed into a fresh app in a
 * temp directory (pnpm, from the local store where it can, the registry otherwise), the README's Prisma model
 * generated into a client, the README's SQL creating the table, a tRPC standalone server written the way
 * "HTTP adapters" says — plain JavaScript, no TypeScript, nothing from this workspace — and the packed
 * `./testing` kit run against it. About 15 s, most of it `pnpm build`, `pnpm install` and `prisma generate`.
 * The control is the same app without the recipe's `responseMeta` line: the kit fails it (no
 * `Idempotent-Replayed` on a replay). The same newcomer on Express (`./express`) passes the kit too, on Prisma and
 * on a plain node-postgres Pool (`./pg`), and the route without the middleware fails it; and on Hono with a plain
 * better-sqlite3 Database (`./fetch`, `./sqlite`), installed from the tarball `npm pack` made, with its own control.
 *
 * The Prisma CLI runs offline through the repository's wasm schema engine (PRISMA_SCHEMA_ENGINE_BINARY, the
 * README's offline route); everything else the app imports is the registry's.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createPrismaClient } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withBuildLock } from './support/build-lock.ts';

const run = promisify(execFile);
const packageDir = path.resolve(import.meta.dirname, '..');
const workspaceRoot = path.resolve(packageDir, '../..');
const readme = readFileSync(path.join(packageDir, 'README.md'), 'utf8');
const wasmEngine = path.join(workspaceRoot, 'tooling/prisma-wasm-engine/bin/prisma-wasm-engine.mjs');

/** The workspace catalog's version of `name`: the fresh app gets what the library is tested with. */
function catalogVersion(name: string): string {
  const workspace = readFileSync(path.join(workspaceRoot, 'pnpm-workspace.yaml'), 'utf8');
  const escaped = name.replace(/[/@.-]/g, (c) => `\\${c}`);
  const version = new RegExp(`^\\s+"?${escaped}"?:\\s*(\\S+)\\s*$`, 'm').exec(workspace)?.[1];
  if (!version) throw new Error(`no catalog version for ${name}`);
  return version;
}

/** The first fenced block of `language` after `heading` in the README. */
function readmeBlock(heading: string, language: string): string {
  const start = readme.indexOf(heading);
  const block = new RegExp(`\`\`\`${language}\\n([\\s\\S]*?)\`\`\``).exec(readme.slice(start));
  if (start < 0 || !block?.[1]) throw new Error(`README: no ${language} block after ${heading}`);
  return block[1];
}

async function mustRun(file: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}) {
  const childEnv = { ...process.env, ...env };
  delete childEnv.NODE_OPTIONS; // nothing of vitest's loader: the app's Node sees only JavaScript
  try {
    return await run(file, args, { cwd, env: childEnv, maxBuffer: 16 * 1024 * 1024, timeout: 180_000 });
  } catch (error) {
    const failure = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(
      `${file} ${args.join(' ')} failed:\n${failure.stdout ?? ''}${failure.stderr ?? failure.message}`,
    );
  }
}

/** The app: the README's standalone recipe, one transactional mutation, the kit run against it. */
const APP = `
import { createPrismaIdempotencyStore } from '@idem/idempotency/prisma';
import { runIdempotencyConformance, formatConformanceReport } from '@idem/idempotency/testing';
import { createIdempotency, idempotencyHttpContext } from '@idem/idempotency/trpc';
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from '@prisma/client';
import { initTRPC, TRPCError } from '@trpc/server';
import { createHTTPServer } from '@trpc/server/adapters/standalone';
import superjson from 'superjson';
import { z } from 'zod';

const db = new PrismaClient({ adapter: new PrismaPg({ connectionString: process.env.DATABASE_URL }) });
const tokens = { 'token-alice': 'alice', 'token-bob': 'bob' };

const t = initTRPC.context().create({ transformer: superjson, isDev: false });
const authed = t.procedure.use(({ ctx, next }) => {
  if (!ctx.principal) throw new TRPCError({ code: 'UNAUTHORIZED' });
  return next({ ctx: { principal: ctx.principal } });
});
const idempotency = createIdempotency({
  store: createPrismaIdempotencyStore(db),
  transformer: superjson,
  getScope: (ctx) => ctx.principal,
  getRequestHeaders: (ctx) => ctx.headers,
  getResponseHeaders: (ctx) => ctx.resHeaders,
  isBatched: (ctx) => ctx.isBatch,
  isStreamed: (ctx) => ctx.isStreamed,
});
const router = t.router({
  notes: t.router({
    create: authed.concat(idempotency.transactional()).input(z.object({ text: z.string().min(1) }))
      .mutation(async ({ ctx, input }) => {
        if (input.text === 'taken')
          throw new TRPCError({ code: 'UNPROCESSABLE_CONTENT', message: 'That text is taken.' });
        await ctx.idempotency.tx.$executeRawUnsafe('insert into notes (author, text) values ($1, $2)', ctx.principal, input.text);
        return { text: input.text, at: new Date() };
      }),
  }),
});

const server = createHTTPServer({
  basePath: '/trpc/',
  router,
  createContext: (opts) => {
    const http = idempotencyHttpContext(opts);
    const token = (http.headers.get('authorization') ?? '').replace(/^Bearer /, '');
    return { ...http, principal: tokens[token] ?? null };
  },
  responseMeta: idempotency.responseMeta,
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));

let n = 0;
const report = await runIdempotencyConformance({
  url: 'http://127.0.0.1:' + server.address().port + '/trpc',
  procedure: 'notes.create',
  input: () => ({ text: 'note ' + ++n }),
  differentInput: () => ({ text: 'other ' + ++n }),
  invalidInput: () => ({ text: '' }),
  serialize: superjson.serialize,
  principals: [
    { headers: { authorization: 'Bearer token-alice' }, scope: 'alice' },
    { headers: { authorization: 'Bearer token-bob' }, scope: 'bob' },
  ],
  unauthenticatedHeaders: {},
  executions: async () => Number((await db.$queryRawUnsafe('select count(*)::int as n from notes'))[0].n),
  businessErrorInput: () => ({ text: 'taken' }),
  store: createPrismaIdempotencyStore(db),
});
console.error(formatConformanceReport(report));
console.log(JSON.stringify({ passed: report.passed, ran: report.results.map((r) => [r.id, r.passed]) }));
server.close();
await db.$disconnect();
`;

/**
 * The packed kit run against a plain HTTP app's `POST /notes` on `server` (the two principals' tokens, a note
 * per input), its report printed: `executions` and `store` are the app's JavaScript for counting notes and its
 * store.
 */
function httpKitRun(name: string, executions: string, store: string): string {
  return `let n = 0;
const report = await runIdempotencyConformance({
  protocol: 'http',
  url: 'http://127.0.0.1:' + server.address().port + '/notes',
  procedure: 'notes.create',
  input: () => ({ text: '${name} note ' + ++n }),
  differentInput: () => ({ text: '${name} other ' + ++n }),
  invalidInput: () => ({ text: '' }),
  principals: [
    { headers: { authorization: 'Bearer token-alice' }, scope: 'alice' },
    { headers: { authorization: 'Bearer token-bob' }, scope: 'bob' },
  ],
  unauthenticatedHeaders: {},
  executions: ${executions},
  businessErrorInput: () => ({ text: 'taken' }),
  store: ${store},
});
console.error(formatConformanceReport(report));
console.log(JSON.stringify({ passed: report.passed, ran: report.results.map((r) => [r.id, r.passed]) }));`;
}

/**
 * The same newcomer on Express 5 with the README's "Plain HTTP" recipe (`express.json()`, then the middleware,
 * the write through `idempotency.tx(res)`), and the packed kit as a plain HTTP target.
 */
const EXPRESS_APP = `
import { createExpressIdempotency } from '@idem/idempotency/express';
import { createPrismaIdempotencyStore } from '@idem/idempotency/prisma';
import { runIdempotencyConformance, formatConformanceReport } from '@idem/idempotency/testing';
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from '@prisma/client';
import express from 'express';

const db = new PrismaClient({ adapter: new PrismaPg({ connectionString: process.env.DATABASE_URL }) });
const tokens = { 'token-alice': 'alice', 'token-bob': 'bob' };
const idempotency = createExpressIdempotency({
  store: createPrismaIdempotencyStore(db),
  getScope: (req) => tokens[(req.get('authorization') ?? '').replace(/^Bearer /, '')] ?? null,
});
const app = express();
app.post('/notes', express.json(), idempotency.transactional({ procedure: 'notes.create' }), async (req, res) => {
  const text = req.body?.text;
  if (typeof text !== 'string' || text === '') return res.status(400).json({ error: 'text is required' });
  if (text === 'taken') return res.status(422).json({ error: 'That text is taken.' });
  const author = idempotency.context(res).scope;
  await idempotency.tx(res).$executeRawUnsafe('insert into notes (author, text) values ($1, $2)', author, text);
  res.status(201).location('/notes/' + encodeURIComponent(text)).json({ text, at: new Date() });
});
const server = await new Promise((resolve) => { const s = app.listen(0, '127.0.0.1', () => resolve(s)); });

${httpKitRun('express', "async () => Number((await db.$queryRawUnsafe('select count(*)::int as n from notes'))[0].n)", 'createPrismaIdempotencyStore(db)')}
server.closeAllConnections();
server.close();
await db.$disconnect();
`;

/** The same Express app on a plain node-postgres Pool (`./pg`): no Prisma anywhere in it. */
function onPlainPg(app: string): string {
  const steps: Array<[string, string]> = [
    [
      "import { createPrismaIdempotencyStore } from '@idem/idempotency/prisma';",
      "import { createPgIdempotencyStore } from '@idem/idempotency/pg';",
    ],
    [
      "import { PrismaPg } from '@prisma/adapter-pg';\nimport { PrismaClient } from '@prisma/client';\n",
      "import pg from 'pg';\n",
    ],
    [
      'const db = new PrismaClient({ adapter: new PrismaPg({ connectionString: process.env.DATABASE_URL }) });',
      'const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });',
    ],
    ['createPrismaIdempotencyStore(db)', 'createPgIdempotencyStore(pool)'],
    [
      "Number((await db.$queryRawUnsafe('select count(*)::int as n from notes'))[0].n)",
      "(await pool.query('select count(*)::int as n from notes')).rows[0].n",
    ],
    ['await db.$disconnect();', 'await pool.end();'],
  ];
  let result = app;
  for (const [from, to] of steps) {
    if (!result.includes(from)) throw new Error(`the Express app no longer has: ${from}`);
    result = result.replaceAll(from, to);
  }
  if (/Prisma|\bdb\b/.test(result)) throw new Error('the plain-pg app still uses Prisma');
  return result;
}

/**
 * A newcomer on Hono with a plain better-sqlite3 Database (`./fetch`, `./sqlite`), no Prisma and no Postgres: the
 * README's "SQLite without Prisma" recipe, from the tarball `npm pack` made.
 */
const HONO_SQLITE_APP = `
import { serve } from '@hono/node-server';
import { createFetchIdempotency } from '@idem/idempotency/fetch';
import { createBetterSqliteIdempotencyStore, sqliteIdempotencyKeysSchema } from '@idem/idempotency/sqlite';
import { runIdempotencyConformance, formatConformanceReport } from '@idem/idempotency/testing';
import Database from 'better-sqlite3';
import { Hono } from 'hono';

const database = new Database(process.env.SQLITE_FILE, { timeout: 5000 });
database.pragma('journal_mode = wal');
for (const statement of sqliteIdempotencyKeysSchema().statements) database.exec(statement);
database.exec('create table if not exists notes (id integer primary key, author text not null, text text not null)');
const tokens = { 'token-alice': 'alice', 'token-bob': 'bob' };
const principalOf = (request) => tokens[(request.headers.get('authorization') ?? '').replace(/^Bearer /, '')] ?? null;
const idempotency = createFetchIdempotency({ store: createBetterSqliteIdempotencyStore(database), getScope: principalOf });
const createNote = idempotency.transactional(async (request, { tx }) => {
  const text = (await request.json().catch(() => null))?.text;
  if (typeof text !== 'string' || text === '') return Response.json({ error: 'text is required' }, { status: 400 });
  if (text === 'taken') return Response.json({ error: 'That text is taken.' }, { status: 422 });
  await tx.$executeRawUnsafe('insert into notes (author, text) values (?, ?)', principalOf(request), text);
  return Response.json({ text, at: new Date() }, { status: 201, headers: { location: '/notes/' + encodeURIComponent(text) } });
}, { procedure: 'notes.create' });
const app = new Hono();
app.post('/notes', (c) => createNote(c.req.raw));
const server = await new Promise((resolve) => { const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s)); });

${httpKitRun('hono', "async () => database.prepare('select count(*) as n from notes').get().n", 'createBetterSqliteIdempotencyStore(database)')}
server.close();
database.close();
`;

let scratch: string;
let appDir: string;
let honoDir: string;
let schema: string;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'idem-newcomer-'));
  const npmDestination = path.join(scratch, 'npm-pack');
  await mkdir(npmDestination);
  const [packed, npmPacked] = await withBuildLock(async () => {
    await mustRun('pnpm', ['run', 'build'], packageDir);
    // Both packers, one after the other, from the same dist.
    return [
      await mustRun('pnpm', ['pack', '--pack-destination', scratch, '--json'], packageDir),
      await mustRun(
        'npm',
        ['pack', '--pack-destination', npmDestination, '--json', '--ignore-scripts'],
        packageDir,
      ),
    ];
  });
  const tarball = (JSON.parse(packed.stdout) as { filename: string }).filename;
  const npmTarball = path.join(
    npmDestination,
    (JSON.parse(npmPacked.stdout) as Array<{ filename: string }>)[0]?.filename ?? 'no tarball',
  );

  // The Hono + better-sqlite3 app: npm pack's tarball, its own directory (no Prisma, no Postgres in it).
  honoDir = path.join(scratch, 'hono-app');
  await mkdir(honoDir);
  const honoDependencies: Record<string, string> = { '@idem/idempotency': `file:${npmTarball}` };
  for (const name of ['hono', '@hono/node-server', 'better-sqlite3'])
    honoDependencies[name] = catalogVersion(name);
  await writeFile(
    path.join(honoDir, 'package.json'),
    JSON.stringify({
      name: 'newcomer-hono-app',
      private: true,
      type: 'module',
      dependencies: honoDependencies,
    }),
  );
  // pnpm 12 runs a dependency's build script only when allowed: better-sqlite3's builds its native addon.
  await writeFile(path.join(honoDir, 'pnpm-workspace.yaml'), 'allowBuilds:\n  better-sqlite3: true\n');
  await mustRun('pnpm', ['install', '--prefer-offline'], honoDir);
  await writeFile(path.join(honoDir, 'app.mjs'), HONO_SQLITE_APP);
  const honoUnprotected = HONO_SQLITE_APP.replace(
    'const createNote = idempotency.transactional(async (request, { tx }) => {',
    'const tx = { $executeRawUnsafe: async (sql, ...values) => database.prepare(sql).run(...values).changes };\n' +
      'const createNote = async (request) => {',
  ).replace("}, { procedure: 'notes.create' });", '};');
  if (honoUnprotected.includes('idempotency.transactional'))
    throw new Error('the control must drop the middleware');
  await writeFile(path.join(honoDir, 'app-unprotected.mjs'), honoUnprotected);

  appDir = path.join(scratch, 'app');
  await mkdir(path.join(appDir, 'prisma'), { recursive: true });
  const dependencies: Record<string, string> = { '@idem/idempotency': `file:${tarball}` };
  for (const name of [
    '@trpc/server',
    '@prisma/client',
    '@prisma/adapter-pg',
    'pg',
    'prisma',
    'superjson',
    'zod',
    'express',
  ])
    dependencies[name] = catalogVersion(name);
  await writeFile(
    path.join(appDir, 'package.json'),
    JSON.stringify({ name: 'newcomer-app', private: true, type: 'module', dependencies }, null, 2),
  );
  // Prisma's postinstall would download engines: not run (strict-dep-builds off lets pnpm skip it quietly).
  await mustRun('pnpm', ['install', '--prefer-offline', '--config.strict-dep-builds=false'], appDir).catch(
    (error: Error) => {
      if (!existsSync(path.join(appDir, 'node_modules/@idem/idempotency/package.json'))) throw error;
    },
  );

  // The README's model, as the newcomer pastes it, under a generator and a datasource of their own.
  await writeFile(
    path.join(appDir, 'prisma/schema.prisma'),
    `generator client {\n  provider = "prisma-client-js"\n}\n\ndatasource db {\n  provider = "postgresql"\n}\n\n${readmeBlock('## The Prisma model', 'prisma')}`,
  );
  await writeFile(
    path.join(appDir, 'prisma.config.mjs'),
    "export default { schema: 'prisma/schema.prisma' };\n",
  );
  await mustRun(process.execPath, ['node_modules/prisma/build/index.js', 'generate'], appDir, {
    PRISMA_SCHEMA_ENGINE_BINARY: wasmEngine,
    PRISMA_HIDE_UPDATE_MESSAGE: '1',
  });

  // The README's SQL, in a schema of this test's own in the run's database.
  schema = `newcomer_${randomBytes(4).toString('hex')}`;
  const admin = createPrismaClient({ connectionString: databaseUrl(), max: 1 });
  try {
    await admin.$executeRawUnsafe(`create schema "${schema}"`);
    await admin.$executeRawUnsafe(`set search_path to "${schema}"`);
    for (const statement of readmeBlock('Or, if you manage SQL yourself', 'sql').split(/;\s*\n/)) {
      if (statement.trim()) await admin.$executeRawUnsafe(statement);
    }
    await admin.$executeRawUnsafe(
      `create table "${schema}".notes (id serial primary key, author text not null, text text not null)`,
    );
  } finally {
    await admin.$disconnect();
  }
  await writeFile(path.join(appDir, 'app.mjs'), APP);
  const withoutResponseMeta = APP.replace('  responseMeta: idempotency.responseMeta,\n', '');
  if (withoutResponseMeta === APP) throw new Error('the control must drop the responseMeta line');
  await writeFile(path.join(appDir, 'app-without-response-meta.mjs'), withoutResponseMeta);
  await writeFile(path.join(appDir, 'express-app.mjs'), EXPRESS_APP);
  const unprotected = EXPRESS_APP.replace(", idempotency.transactional({ procedure: 'notes.create' })", '')
    .replace('idempotency.context(res).scope', "'alice'")
    .replace('idempotency.tx(res)', 'db');
  if (unprotected.includes('idempotency.transactional'))
    throw new Error('the control must drop the middleware');
  await writeFile(path.join(appDir, 'express-app-unprotected.mjs'), unprotected);
  await writeFile(path.join(appDir, 'express-pg-app.mjs'), onPlainPg(EXPRESS_APP));
}, 300_000);

afterAll(async () => {
  if (schema) {
    const admin = createPrismaClient({ connectionString: databaseUrl(), max: 1 });
    await admin
      .$executeRawUnsafe(`drop schema if exists "${schema}" cascade`)
      .finally(() => admin.$disconnect());
  }
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

function databaseUrl(): string {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error('DATABASE_URL is not set: run the tests through the root vitest config.');
  return url;
}

/** Runs one of the app's files against this test's schema: the kit's verdict, and its printed report. */
async function runApp(file: string) {
  const options = encodeURIComponent(`-c search_path=${schema}`);
  const url = `${databaseUrl()}${databaseUrl().includes('?') ? '&' : '?'}options=${options}`;
  return verdictOf(await mustRun(process.execPath, [file], appDir, { DATABASE_URL: url }));
}

/** Runs one of the Hono app's files on a new SQLite file of its own. */
async function runHonoApp(file: string) {
  return verdictOf(
    await mustRun(process.execPath, [file], honoDir, { SQLITE_FILE: path.join(honoDir, `${file}.db`) }),
  );
}

function verdictOf({ stdout, stderr }: { stdout: string; stderr: string }) {
  const report = JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as {
    passed: boolean;
    ran: Array<[string, boolean]>;
  };
  return { ...report, printed: stderr };
}

describe('a newcomer app, from the packed tarball and the README', () => {
  it('control: without the recipe’s responseMeta, the kit fails the replay checks', async () => {
    const report = await runApp('app-without-response-meta.mjs');
    expect(report.passed).toBe(false);
    expect(report.ran).toContainEqual(['replay', false]);
  }, 120_000);

  it('passes the conformance kit', async () => {
    const report = await runApp('app.mjs');
    expect(report.passed, report.printed).toBe(true);
    // Every check a target without fault injection supports ran, and passed.
    expect(report.ran.length, report.printed).toBeGreaterThanOrEqual(8);
    console.log(`[newcomer] ${report.ran.length} checks passed: ${report.ran.map(([id]) => id).join(', ')}`);
  }, 120_000);

  it('on Express, with the README’s plain HTTP recipe: passes the conformance kit', async () => {
    const report = await runApp('express-app.mjs');
    expect(report.passed, report.printed).toBe(true);
    expect(
      report.ran.map(([id]) => id),
      report.printed,
    ).toEqual(expect.arrayContaining(['replay', 'fingerprint', 'concurrency', 'scope', 'missing-key']));
  }, 120_000);

  it('on Express with a plain node-postgres Pool (./pg), no Prisma: passes the conformance kit', async () => {
    const report = await runApp('express-pg-app.mjs');
    expect(report.passed, report.printed).toBe(true);
    expect(report.ran.length).toBeGreaterThan(8);
  });

  it('on Hono with a plain better-sqlite3 Database (./sqlite), from npm pack’s tarball: passes the conformance kit', async () => {
    const report = await runHonoApp('app.mjs');
    expect(report.passed, report.printed).toBe(true);
    expect(
      report.ran.map(([id]) => id),
      report.printed,
    ).toEqual(expect.arrayContaining(['replay', 'fingerprint', 'concurrency', 'scope', 'missing-key']));
  }, 120_000);

  it('control: the same Hono route without the middleware fails the kit', async () => {
    const report = await runHonoApp('app-unprotected.mjs');
    expect(report.passed).toBe(false);
    for (const id of ['replay', 'fingerprint', 'concurrency', 'missing-key'])
      expect(report.ran, id).toContainEqual([id, false]);
  }, 120_000);

  it('control: the same Express route without the middleware fails the kit', async () => {
    const report = await runApp('express-app-unprotected.mjs');
    expect(report.passed).toBe(false);
    for (const id of ['replay', 'fingerprint', 'concurrency', 'missing-key'])
      expect(report.ran, id).toContainEqual([id, false]);
  }, 120_000);
});
