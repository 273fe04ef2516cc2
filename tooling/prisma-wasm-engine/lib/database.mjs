// Plain `pg` helpers for what the wasm engine cannot do itself: checking a connection, creating and dropping
// databases (`prisma migrate dev` creates a missing database; the shadow database is created and dropped here),
// and running raw scripts.
import pg from 'pg';

/**
 * Split a connection URL into what `pg` understands and Prisma's own `?schema=` parameter.
 * @param {string | undefined} url
 * @returns {{ connectionString: string, schema: string | undefined, database: string, host: string, port: string, user: string }}
 */
export function parseDatabaseUrl(url) {
  if (!url) {
    throw new PrismaError(
      'P1012',
      'No database URL: set `datasource.url` in prisma.config.ts (DATABASE_URL).',
    );
  }
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    throw new PrismaError('P1013', 'The provided database string is invalid: it is not a valid URL.');
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') {
    throw new PrismaError(
      'P1013',
      `prisma-wasm-engine only supports postgres:// and postgresql:// URLs, got \`${parsed.protocol}//\`.`,
    );
  }
  const schema = parsed.searchParams.get('schema') ?? undefined;
  parsed.searchParams.delete('schema');
  return {
    connectionString: parsed.toString(),
    schema,
    database: decodeURIComponent(parsed.pathname.replace(/^\//, '')) || 'postgres',
    host: parsed.hostname || 'localhost',
    port: parsed.port || '5432',
    user: decodeURIComponent(parsed.username) || process.env.PGUSER || 'postgres',
  };
}

/**
 * The same URL pointing at another database on the same server.
 * @param {string} url
 * @param {string} database
 */
export function withDatabase(url, database) {
  const parsed = new URL(url);
  parsed.pathname = `/${encodeURIComponent(database)}`;
  return parsed.toString();
}

/** @param {string} name */
export function quoteIdent(name) {
  return `"${name.replaceAll('"', '""')}"`;
}

/** An error carrying a Prisma error code (P1xxx), reported to the CLI in the shape it parses. */
export class PrismaError extends Error {
  /**
   * @param {string | undefined} code
   * @param {string} message
   */
  constructor(code, message) {
    super(message);
    this.name = 'PrismaError';
    this.code = code;
  }
}

/**
 * Translate a `pg`/socket error into the Prisma error the native engine would have reported.
 * @param {unknown} error
 * @param {string} url
 * @returns {PrismaError}
 */
export function toPrismaError(error, url) {
  if (error instanceof PrismaError) return error;
  const { database, host, port, user } = parseDatabaseUrl(url);
  const err = /** @type {{ code?: unknown, message?: unknown }} */ (error ?? {});
  const message = typeof err.message === 'string' ? err.message : String(error);
  switch (err.code) {
    case '3D000':
      return new PrismaError(
        'P1003',
        `Database \`${database}\` does not exist on the database server at \`${host}:${port}\`.`,
      );
    case '28P01':
    case '28000':
      return new PrismaError(
        'P1000',
        `Authentication failed against database server at \`${host}\`, the provided database credentials for \`${user}\` are not valid.`,
      );
    case '42P04':
      return new PrismaError(
        'P1009',
        `Database \`${database}\` already exists on the database server at \`${host}:${port}\``,
      );
    case '42501':
      return new PrismaError(
        'P1010',
        `User \`${user}\` was denied access on the database \`${database}\`: ${message}`,
      );
    case 'ECONNREFUSED':
    case 'ENOTFOUND':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'EAI_AGAIN':
      return new PrismaError(
        'P1001',
        `Can't reach database server at \`${host}:${port}\`\n\nPlease make sure your database server is running at \`${host}:${port}\`.`,
      );
    case 'ETIMEDOUT':
      return new PrismaError(
        'P1002',
        `The database server at \`${host}:${port}\` was reached but timed out.`,
      );
    default:
      return new PrismaError(undefined, message);
  }
}

/**
 * Run `fn` with a connected client, always closing it; errors become {@link PrismaError}s.
 * @template T
 * @param {string} url
 * @param {(client: pg.Client) => Promise<T>} fn
 * @param {string} [reportAs] the URL to name in error messages (defaults to `url`)
 * @returns {Promise<T>}
 */
export async function withClient(url, fn, reportAs = url) {
  const { connectionString } = parseDatabaseUrl(url);
  const client = new pg.Client({ connectionString, connectionTimeoutMillis: 10_000 });
  // A connection error after connect() (server restart…) must not crash the process as "unhandled".
  client.on('error', () => {});
  try {
    await client.connect();
    return await fn(client);
  } catch (error) {
    throw toPrismaError(error, reportAs);
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * Connect to the server's maintenance database (`postgres`, else `template1`) to create or drop `url`'s database.
 * @template T
 * @param {string} url
 * @param {(client: pg.Client) => Promise<T>} fn
 * @returns {Promise<T>}
 */
async function withMaintenanceClient(url, fn) {
  const maintenanceDb = await withClient(withDatabase(url, 'postgres'), async () => 'postgres').catch(
    (error) => {
      if (error instanceof PrismaError && error.code === 'P1003') return 'template1';
      throw error;
    },
  );
  return withClient(withDatabase(url, maintenanceDb), fn, url);
}

/** @param {string} url */
export async function canConnect(url) {
  await withClient(url, (client) => client.query('SELECT 1'));
}

/**
 * @param {string} url
 * @returns {Promise<string>} the database name
 */
export async function createDatabase(url) {
  const { database } = parseDatabaseUrl(url);
  await withMaintenanceClient(url, (client) => client.query(`CREATE DATABASE ${quoteIdent(database)}`));
  return database;
}

/**
 * Drop `url`'s database, disconnecting other sessions (`WITH (FORCE)`, PostgreSQL 13+).
 * @param {string} url
 */
export async function dropDatabase(url) {
  const { database } = parseDatabaseUrl(url);
  await withMaintenanceClient(url, async (client) => {
    const { rows } = await client.query("SELECT current_setting('server_version_num')::int AS version");
    const force = (rows[0]?.version ?? 0) >= 130000 ? ' WITH (FORCE)' : '';
    await client.query(`DROP DATABASE IF EXISTS ${quoteIdent(database)}${force}`);
  });
}

/**
 * Empty a database the way the native engine resets a configured shadow database: drop every user schema
 * (with everything in it), then recreate `public`.
 * @param {string} url
 */
export async function resetDatabase(url) {
  await withClient(url, (client) =>
    client.query(`
      DO $$
      DECLARE schema_name name;
      BEGIN
        FOR schema_name IN
          SELECT nspname FROM pg_namespace
          WHERE nspname <> 'information_schema' AND left(nspname, 3) <> 'pg_'
        LOOP
          EXECUTE format('DROP SCHEMA %I CASCADE', schema_name);
        END LOOP;
      END $$;
      CREATE SCHEMA IF NOT EXISTS public;
    `),
  );
}

/**
 * Run a script the way the native engine does: one simple-protocol query, so that the statements run in one
 * implicit transaction and semicolons inside strings, comments or function bodies are harmless.
 * @param {string} url
 * @param {string} script
 */
export async function executeScript(url, script) {
  await withClient(url, (client) => client.query(script));
}
