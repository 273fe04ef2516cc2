/**
 * `idem-conformance` as a user runs it: the command in a child process against a real server on a real store.
 * Protected: a Fetch-adapter route on the Postgres store passes every profile. CONTROL: the same route without
 * the idempotency layer fails the run (exit 1) on the rows that say why. A command line that cannot count
 * executions is a usage error (exit 2).
 */
import type { AddressInfo } from 'node:net';
import { type ServerType, serve } from '@hono/node-server';
import { createPrismaClient, type Database } from '@idem/db';
import { createFetchIdempotency } from '@idem/idempotency/fetch';
import { createPrismaIdempotencyStore } from '@idem/idempotency/prisma';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { runConformanceCommand } from '../src/command.ts';
import type { CliReport } from '../src/report.ts';

let db: Database;
const servers: ServerType[] = [];

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string;
  }
}

/** A note route that inserts one row per execution and answers its id. */
async function insertNote(tx: Pick<Database, '$queryRawUnsafe'>, request: Request): Promise<Response> {
  const body = (await request.json().catch(() => null)) as { text?: unknown } | null;
  if (typeof body?.text !== 'string') return Response.json({ error: 'send {"text": …}' }, { status: 400 });
  // A business rule, answered with a 422 the layer stores and replays.
  if (body.text === 'taken') return Response.json({ error: 'that text is taken' }, { status: 422 });
  const [row] = await tx.$queryRawUnsafe<Array<{ id: string }>>(
    'insert into conformance_cli_notes (text) values ($1) returning id::text',
    body.text,
  );
  return Response.json({ id: row?.id, text: body.text }, { status: 201 });
}

const principalOf = (request: Request) =>
  request.headers.get('authorization')?.replace(/^Bearer /, '') || null;

function listen(fetch: (request: Request) => Promise<Response>): Promise<string> {
  return new Promise((resolve) => {
    const server = serve({ fetch, port: 0, hostname: '127.0.0.1' }, (info: AddressInfo) =>
      resolve(`http://127.0.0.1:${info.port}/notes`),
    );
    servers.push(server);
  });
}

async function conformance(
  args: string[],
): Promise<{ code: number; report: CliReport | null; stderr: string }> {
  const { exitCode, report, stderr } = await runConformanceCommand(args);
  return { code: exitCode, report, stderr };
}

const common = (url: string) => [
  url,
  '--effect-pointer',
  '/id',
  '--body',
  '{"text": "note {{uuid}}"}',
  '--header',
  'Authorization: Bearer alice',
  '--other-header',
  'Authorization: Bearer bob',
  '--business-error-body',
  '{"text": "taken"}',
  '--concurrency',
  '10',
  '--json',
];

let protectedUrl: string;
let unprotectedUrl: string;

beforeAll(async () => {
  db = createPrismaClient({ connectionString: inject('databaseUrl'), max: 10 });
  await db.$executeRawUnsafe(
    'create table if not exists conformance_cli_notes (id bigserial primary key, text text not null)',
  );
  const idempotency = createFetchIdempotency({
    store: createPrismaIdempotencyStore(db),
    getScope: principalOf,
    problemDocsUrl: 'https://idem.example/docs/errors',
  });
  protectedUrl = await listen(idempotency.transactional((request, { tx }) => insertNote(tx, request)));
  unprotectedUrl = await listen(async (request) =>
    principalOf(request) ? insertNote(db, request) : Response.json({ error: 'who?' }, { status: 401 }),
  );
});

afterAll(async () => {
  for (const server of servers) server.close();
  await db.$disconnect();
});

describe('idem-conformance', () => {
  it('protected: an Idem route passes the idem profile, every row that ran passed', async () => {
    const { code, report } = await conformance([...common(protectedUrl), '--profile', 'idem']);
    expect(report?.rows.filter((row) => row.result === 'fail')).toEqual([]);
    expect(code).toBe(0);
    const passed = report?.rows.filter((row) => row.result === 'pass').map((row) => row.id) ?? [];
    for (const id of [
      'first-request',
      'replay',
      'concurrency',
      'fingerprint',
      'missing-key',
      'scope',
      'stored-error',
    ])
      expect(passed).toContain(id);
    expect(passed).toEqual(expect.arrayContaining(['problem-details', 'docs-link']));
  });

  it('protected: and the draft-07 and stripe profiles', async () => {
    for (const profile of ['draft-07', 'stripe']) {
      const { code, report } = await conformance([...common(protectedUrl), '--profile', profile]);
      expect({ profile, code, passed: report?.passed }).toEqual({ profile, code: 0, passed: true });
    }
  });

  it('CONTROL: the same route without the layer fails, and says where', async () => {
    const { code, report } = await conformance([...common(unprotectedUrl), '--profile', 'draft-07']);
    expect(code).toBe(1);
    expect(report?.passed).toBe(false);
    const failed = report?.rows.filter((row) => row.result === 'fail').map((row) => row.id) ?? [];
    expect(failed).toEqual(
      expect.arrayContaining(['replay', 'concurrency', 'missing-key', 'problem-details']),
    );
  });

  it('a command line that cannot count executions is a usage error', async () => {
    const { code, stderr } = await conformance([protectedUrl]);
    expect(code).toBe(2);
    expect(stderr).toContain('give exactly one of --executions-url and --effect-pointer');
  });
});
