/**
 * Test harness: every test file gets its own throw-away database and a real provider on a random loopback port.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { type ProviderOptions, type RunningProvider, startProvider } from '../src/index.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Provided by the root vitest global setup (tests/setup/database.ts) when the suite runs from the root. */
    postgresAdminUrl: string;
  }
}

/**
 * Server on which test databases are created; any database there works as the maintenance connection.
 * Order: an explicit override, the root suite's server (embedded or DATABASE_URL's), DATABASE_URL, the local PG.
 */
export const ADMIN_URL: string =
  process.env.PROVIDER_TEST_DATABASE_URL ??
  (inject('postgresAdminUrl') as string | undefined) ??
  process.env.DATABASE_URL ??
  'postgresql://postgres@127.0.0.1:5432/test';

export const SECRET = 'sk_test_provider_suite';

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `idem_provider_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    async drop() {
      const client = new pg.Client({ connectionString: ADMIN_URL });
      await client.connect();
      try {
        // pg's Pool#end() resolves before its connections have finished closing; give them a moment, so FORCE
        // below only ever kills leaks (killing a closing connection makes pg emit an unhandled 'error').
        for (let i = 0; i < 100; i += 1) {
          const open = await client.query<{ n: number }>(
            'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1',
            [name],
          );
          if ((open.rows[0]?.n ?? 0) === 0) break;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        // FORCE: a provider that failed to close must not leave the database behind.
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}

export interface Harness {
  provider: RunningProvider;
  db: TestDatabase;
  /** Direct SQL access to the test database, for assertions and for ageing keys. */
  sql: pg.Pool;
  /** Lines the provider logged (unexpected errors); tests assert it stays empty where it should. */
  logs: string[];
  close(): Promise<void>;
}

export async function startHarness(options: Partial<ProviderOptions> = {}): Promise<Harness> {
  const db = await createTestDatabase();
  const logs: string[] = [];
  const provider = await startProvider({
    databaseUrl: db.url,
    port: 0,
    secretKey: SECRET,
    log: (line) => logs.push(line),
    ...options,
  });
  const sql = new pg.Pool({ connectionString: db.url, max: 2 });
  return {
    provider,
    db,
    sql,
    logs,
    async close() {
      await provider.close();
      await sql.end();
      await db.drop();
    },
  };
}

export interface ChargeBody {
  amount?: unknown;
  currency?: unknown;
  source?: unknown;
  order?: unknown;
  description?: unknown;
  [extra: string]: unknown;
}

export interface PostOptions {
  key?: string;
  /** `null` sends no Authorization header. */
  secret?: string | null;
  headers?: Record<string, string>;
}

export interface RawResponse {
  status: number;
  headers: Headers;
  text: string;
}

export async function postCharge(
  base: string,
  body: ChargeBody | string,
  options: PostOptions = {},
): Promise<RawResponse> {
  return postV1(base, '/v1/charges', body, options);
}

export async function postRefund(
  base: string,
  body: { charge?: unknown; [extra: string]: unknown } | string,
  options: PostOptions = {},
): Promise<RawResponse> {
  return postV1(base, '/v1/refunds', body, options);
}

async function postV1(
  base: string,
  path: string,
  body: object | string,
  options: PostOptions,
): Promise<RawResponse> {
  const headers: Record<string, string> = { 'Content-Type': 'application/json', ...options.headers };
  const secret = options.secret === undefined ? SECRET : options.secret;
  if (secret !== null) headers.Authorization = `Bearer ${secret}`;
  if (options.key !== undefined) headers['Idempotency-Key'] = options.key;
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers,
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

export async function getJson(
  base: string,
  path: string,
  secret: string | null = SECRET,
): Promise<{ status: number; json: unknown }> {
  const res = await fetch(`${base}${path}`, {
    headers: secret === null ? {} : { Authorization: `Bearer ${secret}` },
  });
  return { status: res.status, json: await res.json() };
}

export interface Charge {
  id: string;
  status: string;
  amount: number;
  order: string;
}

export async function listCharges(base: string, order: string): Promise<Charge[]> {
  const res = await getJson(base, `/v1/charges?order=${encodeURIComponent(order)}`);
  if (res.status !== 200) throw new Error(`list failed: ${res.status} ${JSON.stringify(res.json)}`);
  return (res.json as { data: Charge[] }).data;
}

export function uniqueOrder(): string {
  return `ord_${randomBytes(6).toString('hex')}`;
}

export function validCharge(order: string, overrides: ChargeBody = {}): ChargeBody {
  return { amount: 2000, currency: 'usd', source: 'tok_visa', order, ...overrides };
}
